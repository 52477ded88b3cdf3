package agent

import "testing"

func TestOnlyChunksInOpenAIsOwnShapeSkipTheRewrite(t *testing.T) {
	for _, c := range []struct {
		name  string
		chunk string
		plain bool
	}{
		{"text delta", `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi \"there\": x"},"finish_reason":null}]}`, true},
		{"tool call delta", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{\"q\":1}"}}]}}]}`, true},
		{"usage with empty choices", `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"completion_tokens_details":{"reasoning_tokens":0}}}`, true},
		{"Azure filter results", `{"choices":[],"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}`, true},
		{"Mistral content parts", `{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"Hi"}]}}]}`, false},
		{"Mistral content parts after a blank", `{"choices":[{"index":0,"delta":{"content": [{"type":"text","text":"Hi"}]}}]}`, false},
		{"Groq reasoning", `{"choices":[{"index":0,"delta":{"reasoning":"hmm"}}]}`, false},
		{"DeepSeek reasoning_content", `{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}`, false},
		{"Gemini thought signature", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"},"extra_content":{"google":{"thought_signature":"x"}}}]}}]}`, false},
		{"escaped key", `{"choices":[{"index":0,"delta":{"con\u0074ent":"x"}}]}`, false},
		{"cut JSON", `{"choices":[{"index":0,"delta":{"content":"x`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := plainChunk([]byte(c.chunk)); got != c.plain {
				t.Errorf("plainChunk = %v, want %v for %s", got, c.plain, c.chunk)
			}
		})
	}
}
