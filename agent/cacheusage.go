package agent

import (
	"encoding/json"

	"relaybot/chat"

	openai "github.com/sashabaranov/go-openai"
)

// cacheReport is what a usage report says of the provider's prompt cache beyond go-openai's
// prompt_tokens_details.cached_tokens, in the shapes OpenAI-compatible endpoints send:
//
//   - DeepSeek: prompt_cache_hit_tokens (and prompt_cache_miss_tokens), both inside
//     prompt_tokens;
//   - Anthropic-compatible gateways: cache_read_input_tokens and cache_creation_input_tokens
//     beside prompt_tokens;
//   - OpenRouter: prompt_tokens_details.cache_write_tokens beside cached_tokens.
type cacheReport struct {
	seen                  bool
	hit, read, created    int
	detailsWrite, details int
}

// take reads the fields of one usage object; a field of the wrong type counts as absent.
func (c *cacheReport) take(raw json.RawMessage) {
	var u struct {
		Hit     json.Number `json:"prompt_cache_hit_tokens"`
		Read    json.Number `json:"cache_read_input_tokens"`
		Created json.Number `json:"cache_creation_input_tokens"`
		Details struct {
			Cached json.Number `json:"cached_tokens"`
			Write  json.Number `json:"cache_write_tokens"`
		} `json:"prompt_tokens_details"`
	}
	if json.Unmarshal(raw, &u) != nil {
		// One field of an unexpected type spoils the typed read; the report then says nothing.
		return
	}
	count := func(n json.Number) int {
		v, err := n.Int64()
		if err != nil || v < 0 || v > 1<<40 {
			return 0
		}
		return int(v)
	}
	*c = cacheReport{seen: true, hit: count(u.Hit), read: count(u.Read), created: count(u.Created),
		details: count(u.Details.Cached), detailsWrite: count(u.Details.Write)}
}

// setUsage records a usage report on rec: its prompt and completion tokens, and of the prompt
// the tokens served from the provider's cache and written to it. Every provider's prompt_tokens
// counts the whole prompt, except an Anthropic-style report whose prompt_tokens leaves the
// cache's tokens out (fewer than it read and wrote): they are added then, since the provider
// bills them.
func setUsage(rec *chat.ModelCall, u *openai.Usage, c cacheReport) {
	in := max(u.PromptTokens, 0) // a negative count is no count
	cached := 0
	if u.PromptTokensDetails != nil {
		cached = u.PromptTokensDetails.CachedTokens
	}
	written := 0
	if c.seen {
		cached = max(cached, c.details, c.hit, c.read)
		written = max(c.detailsWrite, c.created)
		if c.read+c.created > in {
			in += c.read + c.created
		}
	}
	cached = min(max(cached, 0), in)
	written = min(max(written, 0), in-cached)
	rec.TokensIn, rec.TokensOut = in, u.CompletionTokens
	rec.CachedIn, rec.CacheWriteIn = cached, written
}
