package main

import (
	"context"
	"fmt"
	"log/slog"

	"relaybot/config"
	"relaybot/pipeline/memory"
	"relaybot/provider"
	"relaybot/retrieval"
)

// newMemory builds [memory] over the store (nil when it is off), with [embeddings] when set (its
// background re-embedding is bot.reindex's).
func (b *bot) newMemory(ctx context.Context, cfg *config.Config, obs provider.Observer) (*memory.Memory, error) {
	if !cfg.Memory.Enabled {
		return nil, nil
	}
	eo := embedderOptions(cfg)
	eo.HTTPClient, eo.Observer = modelHTTPClient(cfg.Chat.MaxTurnsInFlight), obs
	emb, err := retrieval.NewEmbedder(eo)
	if err != nil {
		return nil, err
	}
	w, r := b.store.Pools()
	mo := memoryOptions(cfg)
	mo.Dialect, mo.W, mo.R, mo.Embedder, mo.Calls = b.store.Driver(), w, r, emb, b.store.ToolCalls
	mo.HTTPClient, mo.Observer, mo.Log = modelHTTPClient(cfg.Chat.MaxTurnsInFlight), obs, b.log
	mem, err := memory.New(ctx, mo)
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	model := mo.Model
	if !emb.Enabled() {
		b.log.Info("memory: on, recall by keywords only (no [embeddings] model)", "extraction_model", model.Label())
		return mem, nil
	}
	b.log.Info("memory: on", "extraction_model", model.Label(), "embeddings", emb.Model())
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

// memoryOptions are [memory]'s keys the memory reads (the extraction model: memory.model's
// [[models]] entry, default the first); the caller adds the database, the embedder, its client,
// observer and log.
func memoryOptions(cfg *config.Config) memory.Options {
	o := memory.Options{MaxFacts: cfg.Memory.MaxFacts, PrivateOnlyInPrivate: cfg.Memory.PrivateOnlyInPrivate}
	if len(cfg.Models) > 0 {
		o.Model = cfg.Models[0].Endpoint
	}
	for _, m := range cfg.Models {
		if m.Name == cfg.Memory.Model {
			o.Model = m.Endpoint
		}
	}
	return o
}

// embedderOptions are [embeddings]' endpoints; the caller adds the client and the observer.
func embedderOptions(cfg *config.Config) retrieval.EmbedderOptions {
	var o retrieval.EmbedderOptions
	for _, m := range cfg.Embeddings.Candidates() {
		o.Candidates = append(o.Candidates, retrieval.Candidate{Endpoint: m.Endpoint, Dimensions: m.Dimensions})
	}
	return o
}

// newEmbedder builds the embeddings client of [embeddings]: nil when no model is set.
func newEmbedder(cfg *config.Config, obs provider.Observer) (*retrieval.Embedder, error) {
	o := embedderOptions(cfg)
	o.HTTPClient, o.Observer = modelHTTPClient(cfg.Chat.MaxTurnsInFlight), obs
	return retrieval.NewEmbedder(o)
}

// embeddingNames are the embedding endpoints' names, which the metrics label their calls with.
func embeddingNames(cfg *config.Config) []string {
	var names []string
	for _, m := range cfg.Embeddings.Candidates() {
		names = append(names, m.Name)
	}
	return names
}
