package config

import (
	"strings"
	"testing"
	"time"
)

func TestEmbeddingsAndMemoryKeysAreCheckedByName(t *testing.T) {
	emb := "[embeddings]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"text-embedding-3-small\"\n"
	for _, tc := range []struct{ name, toml, want string }{
		{"no base url", minimal + "[embeddings]\nmodel = \"m\"\n", "embeddings.base_url: must be set"},
		{"fallbacks without a first", minimal + "[[embeddings.fallbacks]]\nbase_url = \"http://h/v1\"\nmodel = \"m\"\n", "embeddings.model: must be set when [[embeddings.fallbacks]] are"},
		{"negative dimensions", minimal + emb + "dimensions = -1\n", "embeddings.dimensions: must be between 0 (the model's own) and 16000, got -1"},
		{"max facts", minimal + "[memory]\nmax_facts = 0\n", "memory.max_facts: must be between 1 and 100, got 0"},
		{"unknown model", minimal + "[memory]\nmodel = \"nope\"\n", `memory.model: names no [[models]] entry: "nope"`},
		{"unknown key", minimal + "[memory]\nmax_fact = 3\n", "memory.max_fact"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.toml), func(string) (string, bool) { return "", false })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestMemoryDefaultsAndEmbeddingCandidates(t *testing.T) {
	cfg, err := Parse([]byte(minimal+`
[embeddings]
base_url = "http://127.0.0.1:9/v1"
api_key = "${KEY}"
model = "text-embedding-3-small"
dimensions = 256
[[embeddings.fallbacks]]
base_url = "http://127.0.0.1:10/v1"
model = "text-embedding-3-small"
`), func(k string) (string, bool) { return "secret-" + k, true })
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Embeddings.Candidates()
	if len(c) != 2 || c[0].APIKey != "secret-KEY" || c[0].Dimensions != 256 || c[1].Name != "text-embedding-3-small" || c[1].Timeout != 2*time.Minute {
		t.Fatalf("candidates %+v", c)
	}
	if m := cfg.Memory; m.Enabled || m.MaxFacts != 8 || !m.PrivateOnlyInPrivate || m.Model != "" {
		t.Fatalf("memory defaults %+v, want off, 8 facts, private only in private", m)
	}
}
