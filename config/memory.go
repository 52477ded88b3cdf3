package config

import (
	"fmt"
	"math"
	"time"

	"relaybot/provider"
)

// EmbeddingModel is one embeddings endpoint: [embeddings] itself is the first,
// [[embeddings.fallbacks]] the others, tried in order with the chat models' fallback rules.
type EmbeddingModel struct {
	provider.Endpoint
	// Dimensions, when set, asks the endpoint for vectors this long (text-embedding-3-* can
	// shorten theirs); 0 takes the model's own length.
	Dimensions int `toml:"dimensions"`
	// PriceIn is what a million input tokens cost, in the currency of the [[models]] prices.
	PriceIn float64 `toml:"price_in"`
}

// Embeddings is the OpenAI-compatible POST /v1/embeddings endpoint memory (and any other
// retrieval) turns text into vectors with: [embeddings]. No model: search by keywords only.
type Embeddings struct {
	// EmbeddingModel is the first endpoint: its keys stand at the top of [embeddings].
	EmbeddingModel

	Fallbacks []EmbeddingModel `toml:"fallbacks"`
}

// Candidates returns the embedding endpoints in order: none when [embeddings] sets no model.
func (e Embeddings) Candidates() []EmbeddingModel {
	if e.Model == "" {
		return nil
	}
	return append([]EmbeddingModel{e.EmbeddingModel}, e.Fallbacks...)
}

// Memory is what the bot remembers of each person: [memory].
type Memory struct {
	Enabled bool `toml:"enabled"`
	// Model is the [[models]] name that extracts facts after a turn; empty: the first model.
	Model string `toml:"model"`
	// MaxFacts is how many of the speaker's facts are recalled into a turn at most.
	MaxFacts int `toml:"max_facts"`
	// PrivateOnlyInPrivate keeps a fact learned in a private chat out of groups, and one learned
	// in a group in that group.
	PrivateOnlyInPrivate bool `toml:"private_only_in_private"`
}

func defaultMemory() Memory { return Memory{MaxFacts: 8, PrivateOnlyInPrivate: true} }

// fillEmbeddingDefaults names the candidates and gives them the default timeout.
func (c *Config) fillEmbeddingDefaults() {
	cands := []*EmbeddingModel{&c.Embeddings.EmbeddingModel}
	for i := range c.Embeddings.Fallbacks {
		cands = append(cands, &c.Embeddings.Fallbacks[i])
	}
	for _, m := range cands {
		if m.Name == "" {
			m.Name = m.Model
		}
		if m.Timeout == 0 {
			m.Timeout = defaultModelTimeout
		}
	}
}

// validateMemory checks [embeddings] and [memory].
func (c *Config) validateMemory(p *problems, models map[string]bool) {
	e := c.Embeddings
	for i, m := range e.Candidates() {
		key := "embeddings"
		if i > 0 {
			key = fmt.Sprintf("embeddings.fallbacks[%d]", i-1)
		}
		if m.BaseURL == "" {
			p.bad(key+".base_url", "must be set")
		} else {
			p.httpURL(key+".base_url", m.BaseURL)
		}
		if m.Model == "" {
			p.bad(key+".model", "must be set")
		}
		if m.Dimensions < 0 || m.Dimensions > 16000 {
			p.bad(key+".dimensions", "must be between 0 (the model's own) and 16000, got %d", m.Dimensions)
		}
		if m.Timeout < time.Second || m.Timeout > time.Hour {
			p.bad(key+".timeout_sec", "must be between 1 and 3600, got %s", inUnit("timeout_sec", m.Timeout))
		}
		if m.PriceIn < 0 || math.IsNaN(m.PriceIn) {
			p.bad(key+".price_in", "must be 0 or more, got %v", m.PriceIn)
		}
	}
	if e.Model == "" && len(e.Fallbacks) > 0 {
		p.bad("embeddings.model", "must be set when [[embeddings.fallbacks]] are")
	}
	m := c.Memory
	if m.MaxFacts < 1 || m.MaxFacts > 100 {
		p.bad("memory.max_facts", "must be between 1 and 100, got %d", m.MaxFacts)
	}
	if m.Model != "" && !models[m.Model] {
		p.bad("memory.model", "names no [[models]] entry: %q", m.Model)
	}
}
