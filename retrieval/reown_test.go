package retrieval_test

import (
	"context"
	"slices"
	"testing"

	"relaybot/internal/testkit/llm"
	"relaybot/retrieval"
	"relaybot/store"
)

// Reowning texts (a knowledge base renamed) moves their words, vectors and codes to the new
// owner without embedding anything again, on this replica and on another whose caches held the
// old owner's; the old owner has none left.
func TestReownedTextsAreFoundUnderTheNewOwnerWithTheirVectors(t *testing.T) {
	databases(t, func(t *testing.T, db *store.Database, dialect string) {
		ctx := context.Background()
		fake := llm.NewServer()
		defer fake.Close()
		e := embedder(t, fake, nil, "embed-a")
		x, other := open(t, db, dialect, "knowledge"), open(t, db, dialect, "knowledge")
		docs := []retrieval.Doc{
			{Item: 1, Owner: "handbook", Text: "Parents get sixteen weeks of parental leave"},
			{Item: 2, Owner: "handbook", Text: "Receipts are filed within thirty days"},
			{Item: 3, Owner: "faq", Text: "The wifi password is on the fridge"},
		}
		texts := make([]string, len(docs))
		for i, d := range docs {
			texts[i] = d.Text
		}
		emb, err := e.Embed(ctx, texts)
		if err != nil {
			t.Fatal(err)
		}
		if err := x.PutMany(ctx, docs, emb.Vectors, emb.Space); err != nil {
			t.Fatal(err)
		}
		q, err := e.Embed(ctx, []string{"parental leave"})
		if err != nil {
			t.Fatal(err)
		}
		words := func(owner string) retrieval.Query {
			return retrieval.Query{Owner: owner, Text: "parental leave", Limit: 5}
		}
		vector := func(owner string) retrieval.Query {
			return retrieval.Query{Owner: owner, Vector: q.Vectors[0], Space: q.Space, Limit: 5, Approximate: true}
		}
		// Both replicas read (and keep) the old owner's codes and texts before the move.
		for _, idx := range []*retrieval.Index{x, other} {
			if got, err := idx.Search(ctx, vector("handbook")); err != nil || len(got) != 2 {
				t.Fatalf("before the move: %v %v", got, err)
			}
		}
		embedded := len(fake.EmbeddingRequests())
		moved, err := x.Reown(ctx, "handbook", "staff")
		if err != nil || moved != 2 {
			t.Fatalf("reown: %d texts moved, %v; want 2", moved, err)
		}
		for name, idx := range map[string]*retrieval.Index{"this replica": x, "another replica": other} {
			for what, q := range map[string]retrieval.Query{"words": words("staff"), "vector": vector("staff")} {
				if got, err := idx.Search(ctx, q); err != nil || !slices.Contains(got, 1) || slices.Contains(got, 3) {
					t.Errorf("%s, by %s, under the new owner: %v %v; want the moved texts only", name, what, got, err)
				}
			}
			for what, q := range map[string]retrieval.Query{"words": words("handbook"), "vector": vector("handbook")} {
				if got, err := idx.Search(ctx, q); err != nil || len(got) != 0 {
					t.Errorf("%s, by %s, under the old owner: %v %v; want nothing", name, what, got, err)
				}
			}
		}
		if done, total, err := x.Progress(ctx, emb.Space); err != nil || done != total || total != 3 {
			t.Errorf("after the move %d of %d texts have a vector (%v); want every one kept", done, total, err)
		}
		if n := len(fake.EmbeddingRequests()); n != embedded {
			t.Errorf("the move embedded again (%d requests, was %d)", n, embedded)
		}
		if moved, err := x.Reown(ctx, "handbook", "staff"); err != nil || moved != 0 {
			t.Errorf("the same move again: %d, %v; want nothing moved and no error", moved, err)
		}
	})
}
