package config

import (
	"fmt"
	"regexp"
	"time"

	"relaybot/chat"
	"relaybot/provider"
)

// KnowledgeMode is [[knowledge.bases]] mode: how a base's chunks reach a turn.
type KnowledgeMode string

// The knowledge modes.
const (
	// KnowledgeTool: the model searches the base with search_knowledge when it needs to (the
	// default).
	KnowledgeTool KnowledgeMode = "tool"
	// KnowledgeAuto: the best chunks go into every turn in the base's chats, within max_tokens,
	// without a tool call.
	KnowledgeAuto KnowledgeMode = "auto"
)

// KnowledgeModes lists [[knowledge.bases]] mode's values.
var KnowledgeModes = []KnowledgeMode{KnowledgeTool, KnowledgeAuto}

// UnmarshalText implements encoding.TextUnmarshaler.
func (m *KnowledgeMode) UnmarshalText(b []byte) error { return parseEnum(m, b, KnowledgeModes) }

// Knowledge is the admins' documents the bot answers from: [knowledge] and its
// [[knowledge.bases]].
type Knowledge struct {
	// MaxFileBytes, MaxPages and MaxDocuments bound an upload: its bytes, a PDF's pages, and the
	// documents one base holds.
	MaxFileBytes int64 `toml:"max_file_bytes"`
	MaxPages     int   `toml:"max_pages"`
	MaxDocuments int   `toml:"max_documents"`
	// MaxTextBytes bounds the text one document may yield (a small file can inflate).
	MaxTextBytes int64 `toml:"max_text_bytes"`
	// ChunkChars is a chunk's target length in characters; ChunkOverlap how many characters of
	// the chunk before it one repeats.
	ChunkChars   int `toml:"chunk_chars"`
	ChunkOverlap int `toml:"chunk_overlap"`
	// Rerank is an optional /v1/rerank endpoint (the Jina and Cohere shape) that orders the
	// found chunks again; no model: none.
	Rerank provider.Endpoint `toml:"rerank"`
	Bases  []KnowledgeBase   `toml:"bases"`
}

// KnowledgeBase is one [[knowledge.bases]] entry.
type KnowledgeBase struct {
	// Name is how the CLI, the API and the tool's base argument name it.
	Name string `toml:"name"`
	// Description tells the model what the base holds (in search_knowledge's description).
	Description string `toml:"description"`
	// Chats are the chat references that may use it (as in [access], threads included: a chat
	// covers its threads); empty: every chat.
	Chats []string      `toml:"chats"`
	Mode  KnowledgeMode `toml:"mode"`
	// MaxTokens bounds the chunks "auto" puts into a turn.
	MaxTokens int `toml:"max_tokens"`
}

func defaultKnowledge() Knowledge {
	return Knowledge{MaxFileBytes: 20 << 20, MaxPages: 500, MaxDocuments: 1000, MaxTextBytes: 16 << 20, ChunkChars: 1200, ChunkOverlap: 150}
}

// baseName is what a base may be named: it is a path segment of the API.
var baseName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// fillKnowledgeDefaults gives the bases their default mode and budget, and the rerank
// endpoint its name and timeout.
func (c *Config) fillKnowledgeDefaults() {
	for i := range c.Knowledge.Bases {
		b := &c.Knowledge.Bases[i]
		if b.Mode == "" {
			b.Mode = KnowledgeTool
		}
		if b.MaxTokens == 0 {
			b.MaxTokens = 1500
		}
	}
	r := &c.Knowledge.Rerank
	if r.Name == "" {
		r.Name = r.Model
	}
	if r.Timeout == 0 {
		r.Timeout = 30 * time.Second
	}
}

// validateKnowledge checks [knowledge] and its bases.
func (c *Config) validateKnowledge(p *problems) {
	k := c.Knowledge
	if k.MaxFileBytes < 1 || k.MaxFileBytes > 1<<30 {
		p.bad("knowledge.max_file_bytes", "must be between 1 and %d, got %d", 1<<30, k.MaxFileBytes)
	}
	if k.MaxTextBytes < 1 || k.MaxTextBytes > 1<<30 {
		p.bad("knowledge.max_text_bytes", "must be between 1 and %d, got %d", 1<<30, k.MaxTextBytes)
	}
	p.between("knowledge.max_pages", k.MaxPages, 1, 100000)
	p.between("knowledge.max_documents", k.MaxDocuments, 1, 1000000)
	p.between("knowledge.chunk_chars", k.ChunkChars, 100, 20000)
	if k.ChunkOverlap < 0 || k.ChunkOverlap > k.ChunkChars/2 {
		p.bad("knowledge.chunk_overlap", "must be between 0 and half of chunk_chars (%d), got %d", k.ChunkChars/2, k.ChunkOverlap)
	}
	if r := k.Rerank; r.Model != "" || r.BaseURL != "" {
		if r.BaseURL == "" {
			p.bad("knowledge.rerank.base_url", "must be set when knowledge.rerank.model is")
		} else {
			p.httpURL("knowledge.rerank.base_url", r.BaseURL)
		}
		if r.Model == "" {
			p.bad("knowledge.rerank.model", "must be set when knowledge.rerank.base_url is")
		}
		p.durationBetween("knowledge.rerank.timeout_sec", r.Timeout, 1, 3600)
	}
	seen := map[string]bool{}
	for i, b := range k.Bases {
		key := fmt.Sprintf("knowledge.bases[%d]", i)
		switch {
		case !baseName.MatchString(b.Name):
			p.bad(key+".name", "must be 1-64 lower-case letters, digits, - or _, starting with a letter or digit, got %q", b.Name)
		case seen[b.Name]:
			p.bad(key+".name", "%q names another base too", b.Name)
		}
		seen[b.Name] = true
		for j, ref := range b.Chats {
			if _, err := chat.ParseRef(ref); err != nil {
				p.bad(fmt.Sprintf("%s.chats[%d]", key, j), `must look like "platform:chat" or "platform:chat#thread", got %q`, ref)
			}
		}
		p.between(key+".max_tokens", b.MaxTokens, 50, 100000)
	}
}
