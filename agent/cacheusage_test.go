package agent

import (
	"testing"

	"relaybot/chat"

	openai "github.com/sashabaranov/go-openai"
)

func TestCachedTokensAreReadFromEveryProvidersUsageShape(t *testing.T) {
	tests := []struct {
		name               string
		usage              string
		prompt, out        int
		cachedTokens       int // go-openai's prompt_tokens_details.cached_tokens
		wantIn, wantCached int
		wantWritten        int
	}{
		{"OpenAI: cached_tokens only", `{"prompt_tokens":2000,"completion_tokens":5}`, 2000, 5, 1536, 2000, 1536, 0},
		{"DeepSeek: hit and miss add up to the prompt", `{"prompt_tokens":2000,"completion_tokens":5,"prompt_cache_hit_tokens":1900,"prompt_cache_miss_tokens":100}`, 2000, 5, 0, 2000, 1900, 0},
		{"OpenRouter: reads and writes under the details", `{"prompt_tokens":2000,"prompt_tokens_details":{"cached_tokens":1000,"cache_write_tokens":800}}`, 2000, 5, 1000, 2000, 1000, 800},
		{"a gateway counting the cache in prompt_tokens", `{"prompt_tokens":2000,"cache_read_input_tokens":1500,"cache_creation_input_tokens":300}`, 2000, 5, 0, 2000, 1500, 300},
		{"Anthropic's own count leaves the cache out of the prompt", `{"prompt_tokens":50,"cache_read_input_tokens":1500,"cache_creation_input_tokens":300}`, 50, 5, 0, 1850, 1500, 300},
		{"an impossible report is capped at the prompt", `{"prompt_tokens":100,"prompt_tokens_details":{"cached_tokens":5000}}`, 100, 5, 5000, 100, 100, 0},
		{"a field of the wrong type says nothing of the cache", `{"prompt_tokens":100,"prompt_cache_hit_tokens":"many"}`, 100, 5, 0, 100, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c cacheReport
			c.take([]byte(tt.usage))
			u := &openai.Usage{PromptTokens: tt.prompt, CompletionTokens: tt.out}
			if tt.cachedTokens > 0 {
				u.PromptTokensDetails = &openai.PromptTokensDetails{CachedTokens: tt.cachedTokens}
			}
			var rec chat.ModelCall
			setUsage(&rec, u, c)
			if rec.TokensIn != tt.wantIn || rec.CachedIn != tt.wantCached || rec.CacheWriteIn != tt.wantWritten || rec.TokensOut != tt.out {
				t.Errorf("billed %d in (%d cached, %d written), %d out; want %d in (%d cached, %d written), %d out",
					rec.TokensIn, rec.CachedIn, rec.CacheWriteIn, rec.TokensOut, tt.wantIn, tt.wantCached, tt.wantWritten, tt.out)
			}
		})
	}
}

// FuzzCacheReport: whatever a provider puts in its usage report, the bill stays sane: the cached
// and written tokens are parts of the prompt's, none negative.
func FuzzCacheReport(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":2000,"prompt_cache_hit_tokens":1900,"prompt_cache_miss_tokens":100}`,
		`{"prompt_tokens":50,"cache_read_input_tokens":1500,"cache_creation_input_tokens":300}`,
		`{"prompt_tokens_details":{"cached_tokens":1000,"cache_write_tokens":800}}`,
		`{"cache_read_input_tokens":-5,"prompt_cache_hit_tokens":1e300}`,
	} {
		f.Add([]byte(s), 2000, 1000)
	}
	f.Fuzz(func(t *testing.T, raw []byte, prompt, cached int) {
		var c cacheReport
		c.take(raw)
		u := &openai.Usage{PromptTokens: prompt, PromptTokensDetails: &openai.PromptTokensDetails{CachedTokens: cached}}
		var rec chat.ModelCall
		setUsage(&rec, u, c)
		if rec.CachedIn < 0 || rec.CacheWriteIn < 0 || rec.CachedIn+rec.CacheWriteIn > rec.TokensIn || rec.TokensIn < max(u.PromptTokens, 0) {
			t.Fatalf("usage %s billed %d in, %d cached, %d written", raw, rec.TokensIn, rec.CachedIn, rec.CacheWriteIn)
		}
	})
}
