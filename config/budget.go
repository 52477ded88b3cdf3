package config

import "strings"

// Budget is a model's token budget: its context window and the room kept for its answer.
type Budget struct {
	ContextWindow   int
	MaxOutputTokens int
}

// knownBudgets returns the published budgets of well-known model families, matched by the
// longest prefix of the model id (a vendor prefix such as "openai/" is ignored).
func knownBudgets() []knownBudget {
	return []knownBudget{
		{"gpt-3.5-turbo", Budget{16_385, 4_096}},
		{"gpt-4-turbo", Budget{128_000, 4_096}},
		{"gpt-4o", Budget{128_000, 16_384}},
		{"gpt-4.1", Budget{1_047_576, 32_768}},
		{"gpt-4", Budget{8_192, 4_096}},
		{"gpt-5", Budget{400_000, 128_000}},
		{"o1", Budget{200_000, 100_000}},
		{"o3", Budget{200_000, 100_000}},
		{"o4", Budget{200_000, 100_000}},
		{"claude", Budget{200_000, 8_192}},
		{"gemini-1.5", Budget{1_048_576, 8_192}},
		{"gemini-2", Budget{1_048_576, 8_192}},
		{"gemini", Budget{1_048_576, 8_192}},
		{"deepseek", Budget{128_000, 8_192}},
		{"mistral-large", Budget{128_000, 8_192}},
		{"mistral-small", Budget{32_000, 8_192}},
		{"grok", Budget{131_072, 8_192}},
		{"llama-3", Budget{128_000, 8_192}},
		{"llama3", Budget{128_000, 8_192}},
		{"qwen", Budget{32_768, 8_192}},
	}
}

type knownBudget struct {
	prefix string
	Budget
}

// The budget of a model id not in the list: small enough for any model an OpenAI-compatible
// endpoint serves.
const (
	DefaultContextWindow   = 8_192
	DefaultMaxOutputTokens = 2_048
)

// KnownBudget returns the budget of a model id: the longest matching known family, else
// the default budget.
func KnownBudget(model string) Budget {
	id := strings.ToLower(model)
	if i := strings.LastIndex(id, "/"); i >= 0 {
		id = id[i+1:]
	}
	best, n := Budget{DefaultContextWindow, DefaultMaxOutputTokens}, 0
	for _, k := range knownBudgets() {
		if strings.HasPrefix(id, k.prefix) && len(k.prefix) > n {
			best, n = k.Budget, len(k.prefix)
		}
	}
	return best
}
