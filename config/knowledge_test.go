package config

import (
	"strings"
	"testing"
	"time"
)

func TestKnowledgeKeysAreCheckedByName(t *testing.T) {
	base := "[[knowledge.bases]]\nname = \"handbook\"\n"
	for _, tc := range []struct{ name, toml, want string }{
		{"file bytes", minimal + "[knowledge]\nmax_file_bytes = 0\n", "knowledge.max_file_bytes: must be between 1 and"},
		{"pages", minimal + "[knowledge]\nmax_pages = 0\n", "knowledge.max_pages: must be between 1 and 100000, got 0"},
		{"text bytes", minimal + "[knowledge]\nmax_text_bytes = 0\n", "knowledge.max_text_bytes: must be between 1 and"},
		{"documents", minimal + "[knowledge]\nmax_documents = -1\n", "knowledge.max_documents: must be between"},
		{"overlap", minimal + "[knowledge]\nchunk_chars = 500\nchunk_overlap = 500\n", "knowledge.chunk_overlap: must be between 0 and half of chunk_chars (250), got 500"},
		{"rerank without url", minimal + "[knowledge.rerank]\nmodel = \"jina-reranker-v2\"\n", "knowledge.rerank.base_url: must be set"},
		{"bad name", minimal + "[[knowledge.bases]]\nname = \"Hand Book\"\n", `knowledge.bases[0].name: must be 1-64 lower-case letters`},
		{"two of a name", minimal + base + base, `knowledge.bases[1].name: "handbook" names another base too`},
		{"bad chat", minimal + base + "chats = [\"telegram\"]\n", `knowledge.bases[0].chats[0]: must look like "platform:chat"`},
		{"bad mode", minimal + base + "mode = \"always\"\n", "knowledge.bases[0].mode"},
		{"budget", minimal + base + "max_tokens = 10\n", "knowledge.bases[0].max_tokens: must be between 50 and 100000, got 10"},
		{"unknown key", minimal + base + "chat = []\n", "knowledge.bases"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.toml), func(string) (string, bool) { return "", false })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestKnowledgeDefaults(t *testing.T) {
	cfg, err := Parse([]byte(minimal+`
[[knowledge.bases]]
name = "handbook"
chats = ["telegram:-100123#7", "discord:42"]
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Knowledge
	if k.MaxFileBytes != 20<<20 || k.MaxPages != 500 || k.MaxDocuments != 1000 || k.ChunkChars != 1200 || k.ChunkOverlap != 150 || k.Rerank.Timeout != 30*time.Second {
		t.Fatalf("knowledge defaults %+v", k)
	}
	if b := k.Bases[0]; b.Mode != KnowledgeTool || b.MaxTokens != 1500 || len(b.Chats) != 2 {
		t.Fatalf("base defaults %+v, want mode tool and 1500 tokens", b)
	}
}
