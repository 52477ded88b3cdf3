package main

import (
	"context"
	"fmt"
	"log/slog"

	"relaybot/chat"
	"relaybot/config"
	"relaybot/knowledge/extract"
	"relaybot/pipeline/knowledge"
	"relaybot/provider"
	"relaybot/retrieval"
	"relaybot/store"
)

// newKnowledge builds [knowledge]'s bases over the store (nil when none is configured), with
// [embeddings] when set (its background re-embedding is bot.reindex's).
func (b *bot) newKnowledge(ctx context.Context, cfg *config.Config, obs provider.Observer) (*knowledge.Knowledge, error) {
	if len(cfg.Knowledge.Bases) == 0 {
		return nil, nil
	}
	emb, err := newEmbedder(cfg, obs)
	if err != nil {
		return nil, err
	}
	k, err := openKnowledge(ctx, cfg, b.store, emb, b.log)
	if err != nil {
		return nil, err
	}
	ko := knowledgeOptions(cfg)
	if !emb.Enabled() {
		b.log.Info("knowledge: on, search by keywords only (no [embeddings] model)", "bases", len(ko.Bases))
		return k, nil
	}
	b.log.Info("knowledge: on", "bases", len(ko.Bases), "embeddings", emb.Model(), "rerank", ko.Rerank.Label())
	return k, nil
}

// openKnowledge opens [knowledge]'s bases over st, with emb (nil or none configured: keywords
// only): the server's and the CLI's.
func openKnowledge(ctx context.Context, cfg *config.Config, st *store.Database, emb *retrieval.Embedder, log *slog.Logger) (*knowledge.Knowledge, error) {
	w, r := st.Pools()
	ko := knowledgeOptions(cfg)
	ko.Dialect, ko.W, ko.R, ko.Embedder, ko.Log = st.Driver(), w, r, emb, log
	ko.HTTPClient = modelHTTPClient(cfg.Chat.MaxTurnsInFlight)
	k, err := knowledge.New(ctx, ko)
	if err != nil {
		return nil, fmt.Errorf("knowledge: %w", err)
	}
	return k, nil
}

// reindexKnowledge gives every chunk a vector of the embedding model's space, logging its
// progress; a failure is logged and left for the next start (or `bot knowledge reindex`).
func reindexKnowledge(ctx context.Context, k *knowledge.Knowledge, log *slog.Logger) {
	last := -1
	space, err := k.Reindex(ctx, func(done, total int) {
		if pct := done * 100 / max(total, 1); pct/10 != last/10 {
			last = pct
			log.Info("knowledge: re-embedding chunks", "done", done, "total", total)
		}
	})
	if err != nil && ctx.Err() == nil {
		log.Warn("knowledge: chunks not re-embedded; search uses keywords for those without a vector", "err", err)
		return
	}
	if last >= 0 {
		log.Info("knowledge: every chunk has a vector", "space", space.String())
	}
}

// knowledgeOptions are [knowledge]'s keys the bases read; the caller adds the database, the
// embedder, the reranker's client and the log.
func knowledgeOptions(cfg *config.Config) knowledge.Options {
	k := cfg.Knowledge
	o := knowledge.Options{
		Limits: knowledge.Limits{MaxFileBytes: k.MaxFileBytes, MaxPages: k.MaxPages, MaxTextBytes: k.MaxTextBytes, MaxDocuments: k.MaxDocuments},
		Chunks: extract.ChunkOptions{TargetChars: k.ChunkChars, OverlapChars: k.ChunkOverlap},
		Rerank: k.Rerank,
	}
	for _, b := range k.Bases {
		base := knowledge.Base{Name: b.Name, Description: b.Description, Mode: knowledge.Mode(b.Mode), MaxTokens: b.MaxTokens}
		for _, ref := range b.Chats {
			// config checked every reference.
			r, _ := chat.ParseRef(ref)
			base.Chats = append(base.Chats, r)
		}
		o.Bases = append(o.Bases, base)
	}
	return o
}
