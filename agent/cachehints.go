package agent

import (
	"encoding/json"

	"relaybot/chat"

	openai "github.com/sashabaranov/go-openai"
)

// breakpoint is a message of a request that gets Anthropic's cache_control marker: the provider
// caches the prompt up to it, and a later request sharing that prefix reads it from the cache.
type breakpoint struct {
	index int
	// split, when above 0, cuts the message's text in two parts at that byte, the marker on the
	// first (the system prompt's stable part); 0 marks the whole text.
	split int
}

// cacheControl is the marker, as Anthropic's and OpenRouter's OpenAI-compatible APIs take it on a
// text part of a message's content.
var cacheControl = json.RawMessage(`{"type":"ephemeral"}`)

// breakpoints places the request's markers (Anthropic takes four at most; three are used): the
// system prompt's stable part, the last message of the history (before the newest user
// message and any system message the turn put before it), and the last message sent, whose prefix the next round or turn reads back. A
// message without text (an assistant's tool calls) passes its marker to the one before.
func breakpoints(up []openai.ChatCompletionMessage, history []chat.Message) []breakpoint {
	var out []breakpoint
	add := func(i int) {
		for ; i > 0 && !hasText(up[i]); i-- {
		}
		if i <= 0 || len(out) > 0 && out[len(out)-1].index >= i {
			return
		}
		out = append(out, breakpoint{index: i})
	}
	if len(up) > 0 && up[0].Role == string(chat.RoleSystem) && up[0].Content != "" {
		split := 0
		if len(history) > 0 && history[0].Content == up[0].Content && history[0].Stable < len(up[0].Content) {
			split = history[0].Stable
		}
		out = append(out, breakpoint{index: 0, split: split})
	}
	newest := -1
	for i := range up {
		if up[i].Role == string(chat.RoleUser) {
			newest = i
		}
	}
	// The history ends before the system messages the turn puts right before its user message
	// (the speaker's remembered facts): they change every turn, and a marker on them would cache
	// nothing the next turn sends again.
	last := newest - 1
	for last > 0 && up[last].Role == string(chat.RoleSystem) {
		last--
	}
	if last > 0 {
		add(last)
	}
	add(len(up) - 1)
	return out
}

func hasText(m openai.ChatCompletionMessage) bool {
	if m.Content != "" {
		return true
	}
	for _, p := range m.MultiContent {
		if p.Type == openai.ChatMessagePartTypeText && p.Text != "" {
			return true
		}
	}
	return false
}

// markBreakpoint puts cache_control on a message of the request body: a string content becomes
// one text part (two when split cuts it) with the marker; an array of parts gets it on its last
// text part.
func markBreakpoint(msg map[string]json.RawMessage, split int) error {
	type part struct {
		Type         string          `json:"type"`
		Text         string          `json:"text"`
		CacheControl json.RawMessage `json:"cache_control,omitempty"`
	}
	raw := msg["content"]
	var text string
	if json.Unmarshal(raw, &text) == nil {
		parts := []part{{Type: "text", Text: text, CacheControl: cacheControl}}
		if split > 0 && split < len(text) {
			parts = []part{{Type: "text", Text: text[:split], CacheControl: cacheControl}, {Type: "text", Text: text[split:]}}
		}
		b, err := json.Marshal(parts)
		if err != nil {
			return err
		}
		msg["content"] = b
		return nil
	}
	var parts []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil // no content to mark
	}
	for i := len(parts) - 1; i >= 0; i-- {
		if string(parts[i]["type"]) == `"text"` {
			parts[i]["cache_control"] = cacheControl
			break
		}
	}
	b, err := json.Marshal(parts)
	if err != nil {
		return err
	}
	msg["content"] = b
	return nil
}
