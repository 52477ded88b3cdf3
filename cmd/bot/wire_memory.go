package main

import (
	"context"
	"fmt"
	"log/slog"

	"relaybot/config"
	"relaybot/internal/lifecycle"
	"relaybot/pipeline/memory"
	"relaybot/provider"
	"relaybot/retrieval"
)

// newMemory builds [memory] over the store (nil when it is off), with [embeddings] when set, and
// re-embeds in the background whatever has no vector of the embedding model's space (after a
// model change, or facts learned while the endpoint was down).
func (b *bot) newMemory(ctx context.Context, cfg *config.Config, obs provider.Observer) (*memory.Memory, error) {
	if !cfg.Memory.Enabled {
		return nil, nil
	}
	emb, err := newEmbedder(cfg, obs)
	if err != nil {
		return nil, err
	}
	model := cfg.Models[0]
	for _, m := range cfg.Models {
		if m.Name == cfg.Memory.Model {
			model = m
		}
	}
	w, r := b.store.Pools()
	mem, err := memory.New(ctx, memory.Options{Dialect: b.store.Driver(), W: w, R: r,
		Model:    provider.Endpoint{Name: model.Name, BaseURL: model.BaseURL, APIKey: model.APIKey, Model: model.Model, Timeout: model.Timeout},
		Embedder: emb, MaxFacts: cfg.Memory.MaxFacts, PrivateOnlyInPrivate: cfg.Memory.PrivateOnlyInPrivate,
		HTTPClient: modelHTTPClient(cfg.Chat.MaxTurnsInFlight), Observer: obs, Log: b.log})
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	if !emb.Enabled() {
		b.log.Info("memory: on, recall by keywords only (no [embeddings] model)", "extraction_model", model.Name)
		return mem, nil
	}
	b.log.Info("memory: on", "extraction_model", model.Name, "embeddings", emb.Model())
	b.background = append(b.background, lifecycle.Part{Name: "memory reindex", Run: func(ctx context.Context) error {
		reindexMemory(ctx, mem, b.log)
		return nil
	}})
	return mem, nil
}

// reindexMemory gives every fact a vector of the embedding model's space, logging its progress;
// a failure is logged and left for the next start (or `bot memory reindex`).
func reindexMemory(ctx context.Context, mem *memory.Memory, log *slog.Logger) {
	last := -1
	space, err := mem.Reindex(ctx, func(done, total int) {
		if pct := done * 100 / max(total, 1); pct/10 != last/10 {
			last = pct
			log.Info("memory: re-embedding facts", "done", done, "total", total)
		}
	})
	if err != nil && ctx.Err() == nil {
		log.Warn("memory: facts not re-embedded; recall uses keywords for those without a vector", "err", err)
		return
	}
	if last >= 0 {
		log.Info("memory: every fact has a vector", "space", space.String())
	}
}

// newEmbedder builds the embeddings client of [embeddings]: nil when no model is set.
func newEmbedder(cfg *config.Config, obs provider.Observer) (*retrieval.Embedder, error) {
	var cands []retrieval.Candidate
	for _, m := range cfg.Embeddings.Candidates() {
		cands = append(cands, retrieval.Candidate{Dimensions: m.Dimensions,
			Endpoint: provider.Endpoint{Name: m.Name, BaseURL: m.BaseURL, APIKey: m.APIKey, Model: m.Model, Timeout: m.Timeout}})
	}
	return retrieval.NewEmbedder(retrieval.EmbedderOptions{Candidates: cands, HTTPClient: modelHTTPClient(cfg.Chat.MaxTurnsInFlight), Observer: obs})
}

// embeddingNames are the embedding endpoints' names, which the metrics label their calls with.
func embeddingNames(cfg *config.Config) []string {
	var names []string
	for _, m := range cfg.Embeddings.Candidates() {
		names = append(names, m.Name)
	}
	return names
}
