package knowledge_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/logbuf"
	"relaybot/knowledge/extract"
	"relaybot/pipeline/knowledge"
	"relaybot/retrieval"
	"relaybot/store"
)

// openBases opens the knowledge bases named, each of mode "tool" and every chat, logging to log.
func openBases(t *testing.T, db *store.Database, emb *retrieval.Embedder, log *logbuf.Buffer, maxDocs int, names ...string) *knowledge.Knowledge {
	t.Helper()
	w, r := db.Pools()
	var bases []knowledge.Base
	for _, n := range names {
		bases = append(bases, knowledge.Base{Name: n, Mode: knowledge.ModeTool, MaxTokens: 500})
	}
	k, err := knowledge.New(context.Background(), knowledge.Options{Dialect: db.Driver(), W: w, R: r, Embedder: emb,
		Limits: knowledge.Limits{MaxFileBytes: 1 << 20, MaxPages: 10, MaxDocuments: maxDocs},
		Chunks: extract.ChunkOptions{TargetChars: 400, OverlapChars: 40}, Bases: bases,
		Log: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A base renamed in config.toml leaves its documents orphaned, said at start with the fix;
// Rename moves them to the new name with their vectors (nothing embedded again), after which
// they are found there and nothing is orphaned. A rename from a configured base, to an unknown
// one, of nothing, or past max_documents is refused.
func TestARenamedBasesDocumentsAreMovedWithTheirVectors(t *testing.T) {
	databases(t, func(t *testing.T, db *store.Database) {
		ctx := context.Background()
		fake := llm.NewServer()
		defer fake.Close()
		emb := embedder(t, fake.URL, "embed-a")
		var log logbuf.Buffer
		before := openBases(t, db, emb, &log, 2, "handbook", "faq")
		doc := add(t, before, "handbook", "handbook.md", handbook)
		add(t, before, "faq", "faq.md", "# FAQ\n\nThe wifi password is on the fridge.")

		k := openBases(t, db, emb, &log, 2, "staff", "faq")
		if !strings.Contains(log.String(), `a base config.toml does not name holds documents`) || !strings.Contains(log.String(), "base=handbook documents=1") ||
			!strings.Contains(log.String(), "bot knowledge rename -from handbook -to NAME") {
			t.Fatalf("opened with handbook renamed staff, the log says:\n%s\nwant a warning naming handbook's orphaned document and the fix", log.String())
		}
		orphans, err := k.Orphans(ctx)
		if err != nil || len(orphans) != 1 || orphans[0].Base != "handbook" || len(orphans[0].Documents) != 1 || orphans[0].Documents[0].ID != doc.ID {
			t.Fatalf("orphans: %+v %v; want handbook with its one document", orphans, err)
		}
		for _, tc := range []struct {
			name, from, to string
			want           error
		}{
			{"from a configured base", "faq", "staff", knowledge.ErrStillConfigured},
			{"to an unknown base", "handbook", "nope", knowledge.ErrNoBase},
			{"of nothing", "gone", "staff", knowledge.ErrNotFound},
		} {
			if _, err := k.Rename(ctx, tc.from, tc.to); !errors.Is(err, tc.want) {
				t.Errorf("rename %s: %v, want %v", tc.name, err, tc.want)
			}
		}
		a, b := add(t, k, "staff", "a.md", "# A\n\nOne."), add(t, k, "staff", "b.md", "# B\n\nTwo.")
		var ref *knowledge.RefusedError
		if _, err := k.Rename(ctx, "handbook", "staff"); !errors.As(err, &ref) || ref.Key != "knowledge.max_documents" {
			t.Fatalf("a rename into a base already full: %v, want refused naming knowledge.max_documents", err)
		}
		for _, d := range []knowledge.Document{a, b} {
			if _, err := k.Remove(ctx, "staff", d.ID); err != nil {
				t.Fatal(err)
			}
		}

		embedded := len(fake.EmbeddingRequests())
		got, err := k.Rename(ctx, "handbook", "staff")
		if err != nil || got.Documents != 1 || got.Chunks != int64(doc.Chunks) {
			t.Fatalf("rename: %+v %v; want 1 document and its %d chunks moved", got, err, doc.Chunks)
		}
		if n := len(fake.EmbeddingRequests()); n != embedded {
			t.Errorf("the rename embedded %d batches again; the vectors should move as they are", n-embedded)
		}
		hits, err := k.Search(ctx, []string{"staff"}, "how many weeks of parental leave", 5, nil)
		if err != nil || len(hits) == 0 || !strings.Contains(hits[0].Text, "sixteen weeks") || hits[0].Base != "staff" {
			t.Fatalf("after the rename a search of staff found %+v, %v; want the parental leave passage, of staff", hits, err)
		}
		if done, total, _, err := k.VectorProgress(ctx); err != nil || done != total {
			t.Errorf("after the rename %d of %d chunks have a vector (%v)", done, total, err)
		}
		if orphans, err := k.Orphans(ctx); err != nil || len(orphans) != 0 {
			t.Errorf("after the rename the orphans are %+v (%v), want none", orphans, err)
		}
		if docs, _ := k.Documents(ctx, "staff"); len(docs) != 1 || docs[0].ID != doc.ID {
			t.Errorf("staff's documents: %+v, want handbook.md", docs)
		}
	})
}
