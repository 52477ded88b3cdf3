package knowledge_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	"relaybot/knowledge/extract"
	"relaybot/pipeline/knowledge"
	"relaybot/provider"
	"relaybot/retrieval"
	"relaybot/store"
	"relaybot/store/storetest"
	"relaybot/tools"
)

// databases runs fn on SQLite, PostgreSQL without pgvector and PostgreSQL with it (each
// PostgreSQL one skipped, saying why, when its server is not given).
func databases(t *testing.T, fn func(t *testing.T, db *store.Database)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, storetest.Open(t, storetest.SQLite)) })
	t.Run("postgres", func(t *testing.T) { fn(t, storetest.Open(t, storetest.Postgres)) })
	t.Run("pgvector", func(t *testing.T) { fn(t, storetest.OpenPgvector(t)) })
}

var (
	staffRoom = chat.Ref{Platform: chat.Telegram, ChatID: "-100"}
	lobby     = chat.Ref{Platform: chat.Discord, ChatID: "555"}
)

func embedder(t testing.TB, url, model string) *retrieval.Embedder {
	t.Helper()
	e, err := retrieval.NewEmbedder(retrieval.EmbedderOptions{Candidates: []retrieval.Candidate{
		{Endpoint: provider.Endpoint{BaseURL: url, Model: model}}}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func open(t *testing.T, db *store.Database, emb *retrieval.Embedder, limits knowledge.Limits) *knowledge.Knowledge {
	t.Helper()
	w, r := db.Pools()
	if limits.MaxFileBytes == 0 {
		limits = knowledge.Limits{MaxFileBytes: 1 << 20, MaxPages: 50, MaxDocuments: 10}
	}
	k, err := knowledge.New(context.Background(), knowledge.Options{Dialect: db.Driver(), W: w, R: r, Embedder: emb, Limits: limits,
		Chunks: extract.ChunkOptions{TargetChars: 400, OverlapChars: 40},
		Bases: []knowledge.Base{
			{Name: "handbook", Description: "the staff handbook", Chats: []chat.Ref{staffRoom}, Mode: knowledge.ModeTool, MaxTokens: 500},
			{Name: "faq", Mode: knowledge.ModeAuto, MaxTokens: 500},
		}})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

const handbook = `# Handbook

Welcome to the company.

## Leave

### Parental leave

Parents get sixteen weeks of parental leave at full pay.

## Expenses

Receipts are filed within thirty days through the expenses portal.
`

func add(t *testing.T, k *knowledge.Knowledge, base, name, text string) knowledge.Document {
	t.Helper()
	d, err := k.Add(context.Background(), base, name, strings.NewReader(text), "test", nil)
	if err != nil {
		t.Fatalf("add %s: %v", name, err)
	}
	return d
}

func TestAMarkdownFactIsFoundWithItsHeadingPath(t *testing.T) {
	databases(t, func(t *testing.T, db *store.Database) {
		fake := llm.NewServer()
		defer fake.Close()
		k := open(t, db, embedder(t, fake.URL, "embed-a"), knowledge.Limits{})
		d := add(t, k, "handbook", "handbook.md", handbook)
		if d.State != knowledge.StateReady || d.Chunks == 0 || d.Format != "markdown" {
			t.Fatalf("document %+v, want a ready markdown document with chunks", d)
		}
		hits, err := k.Search(context.Background(), []string{"handbook"}, "how many weeks of parental leave", 5, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 || !strings.Contains(hits[0].Text, "sixteen weeks") {
			t.Fatalf("hits %+v, want the parental leave passage first", hits)
		}
		if got := hits[0].Where(); got != "handbook.md › Handbook › Leave › Parental leave" {
			t.Fatalf("the passage is cited as %q, want its heading path", got)
		}
	})
}

func TestARefusedUploadSaysWhichLimitAndStoresNothing(t *testing.T) {
	databases(t, func(t *testing.T, db *store.Database) {
		k := open(t, db, nil, knowledge.Limits{MaxFileBytes: 100, MaxPages: 5, MaxDocuments: 1})
		for _, tc := range []struct{ name, file, text, key string }{
			{"oversized", "big.md", strings.Repeat("word ", 100), "knowledge.max_file_bytes"},
			{"unknown format", "tool.exe", "MZ\x90\x00binary", ""},
		} {
			_, err := k.Add(context.Background(), "handbook", tc.file, strings.NewReader(tc.text), "test", nil)
			var ref *knowledge.RefusedError
			if !errors.As(err, &ref) || ref.Key != tc.key {
				t.Fatalf("%s: error %v, want a refusal naming %q", tc.name, err, tc.key)
			}
		}
		if docs, _ := k.Documents(context.Background(), "handbook"); len(docs) != 0 {
			t.Fatalf("documents after refused uploads: %+v, want none", docs)
		}
		add(t, k, "handbook", "one.md", "# One\n\nThe first.")
		_, err := k.Add(context.Background(), "handbook", "two.md", strings.NewReader("# Two\n\nThe second."), "test", nil)
		var ref *knowledge.RefusedError
		if !errors.As(err, &ref) || ref.Key != "knowledge.max_documents" {
			t.Fatalf("a second document in a base of one: %v, want a refusal naming knowledge.max_documents", err)
		}
		if hits, _ := k.Search(context.Background(), []string{"handbook"}, "second", 5, nil); len(hits) != 0 {
			t.Fatalf("the refused document is found: %+v", hits)
		}
	})
}

func TestARemovedDocumentIsNotFound(t *testing.T) {
	databases(t, func(t *testing.T, db *store.Database) {
		fake := llm.NewServer()
		defer fake.Close()
		k := open(t, db, embedder(t, fake.URL, "embed-a"), knowledge.Limits{})
		d := add(t, k, "handbook", "handbook.md", handbook)
		add(t, k, "handbook", "other.md", "# Other\n\nThe canteen opens at noon.")
		if _, err := k.Remove(context.Background(), "faq", d.ID); !errors.Is(err, knowledge.ErrNotFound) {
			t.Fatalf("removing handbook's document from faq: %v, want not found", err)
		}
		if _, err := k.Remove(context.Background(), "handbook", d.ID); err != nil {
			t.Fatal(err)
		}
		hits, err := k.Search(context.Background(), []string{"handbook"}, "parental leave weeks", 5, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hits {
			if h.Document == d.ID {
				t.Fatalf("a removed document's chunk is found: %+v", h)
			}
		}
		docs, _ := k.Documents(context.Background(), "handbook")
		if len(docs) != 1 || docs[0].Name != "other.md" {
			t.Fatalf("documents %+v, want other.md alone", docs)
		}
	})
}

func TestTheToolIsOfferedOnlyWhereABaseServesAndRefusesOtherChats(t *testing.T) {
	db := storetest.Open(t, storetest.SQLite)
	k := open(t, db, nil, knowledge.Limits{})
	add(t, k, "handbook", "handbook.md", handbook)
	loader := k.Tools()
	spec := loader.Tools(context.Background())[0]
	here := tools.TurnInfo{Platform: "telegram", ChatID: "-100", RuleChats: []chat.Ref{{Platform: chat.Telegram, ChatID: "-100", ThreadID: "7"}, staffRoom}}
	elsewhere := tools.TurnInfo{Platform: "discord", ChatID: lobby.ChatID, RuleChats: []chat.Ref{lobby}}
	if s, ok := loader.ForTurn(spec, here); !ok || !strings.Contains(s.Description, `"handbook" (the staff handbook)`) {
		t.Fatalf("in a thread of the staff room: offered %v, description %q; want it offered naming the handbook", ok, s.Description)
	}
	if _, ok := loader.ForTurn(spec, elsewhere); ok {
		t.Fatal("search_knowledge offered in a chat no tool base serves")
	}
	_, err := loader.Call(context.Background(), tools.Invocation{Name: knowledge.ToolSearch, Turn: elsewhere,
		Arguments: []byte(`{"query":"parental leave","base":"handbook"}`)})
	if err == nil || !strings.Contains(err.Error(), `no knowledge base "handbook"`) {
		t.Fatalf("called by name in another chat: %v, want refused", err)
	}
	res, err := loader.Call(context.Background(), tools.Invocation{Name: knowledge.ToolSearch, Turn: here,
		Arguments: []byte(`{"query":"parental leave"}`)})
	if err != nil || !strings.HasPrefix(res.Text, "[1] handbook.md › Handbook › Leave › Parental leave (chunk ") {
		t.Fatalf("result %q, %v; want numbered passages citing the heading path", res.Text, err)
	}
}

func TestAutoBasesComeIntoTurnsWithinTheirBudget(t *testing.T) {
	db := storetest.Open(t, storetest.SQLite)
	k := open(t, db, nil, knowledge.Limits{})
	add(t, k, "faq", "faq.md", "# FAQ\n\n## Wifi\n\nThe wifi password is on the fridge.\n\n## Parking\n\nParking is free after six.")
	add(t, k, "handbook", "handbook.md", handbook)
	est := func(s string) int { return len(s) / 4 }
	block, hits, err := k.Recall(context.Background(), []chat.Ref{lobby}, "where is the wifi password", est, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(block, knowledge.BlockStart) || !strings.Contains(block, "on the fridge") || len(hits) == 0 {
		t.Fatalf("block %q, want the wifi passage", block)
	}
	if slices.ContainsFunc(hits, func(h knowledge.Hit) bool { return h.Base != "faq" }) {
		t.Fatalf("a tool base's chunk came into a turn by itself: %+v", hits)
	}
}

func TestAChangedEmbeddingModelIsReembeddedWithProgressAndNeverMixed(t *testing.T) {
	databases(t, func(t *testing.T, db *store.Database) {
		fake := llm.NewServer()
		defer fake.Close()
		add(t, open(t, db, embedder(t, fake.URL, "embed-a"), knowledge.Limits{}), "handbook", "handbook.md", handbook)
		fake.SetEmbeddingDims("embed-b", 24)
		k := open(t, db, embedder(t, fake.URL, "embed-b"), knowledge.Limits{})
		if done, total, space, err := k.VectorProgress(context.Background()); err != nil || done != 0 || total == 0 || space.String() != "embed-b/24" {
			t.Fatalf("before the reindex: %d of %d in %s (%v), want none of the chunks in embed-b/24", done, total, space, err)
		}
		// Until the reindex, a query of the new space finds the chunks by their words.
		if hits, err := k.Search(context.Background(), []string{"handbook"}, "parental leave", 5, nil); err != nil || len(hits) == 0 {
			t.Fatalf("search between the model change and the reindex: %d hits, %v", len(hits), err)
		}
		var seen []int
		space, err := k.Reindex(context.Background(), func(done, total int) { seen = append(seen, done) })
		if err != nil || space.String() != "embed-b/24" || len(seen) == 0 {
			t.Fatalf("reindex: %s %v, progress %v", space, err, seen)
		}
		done, total, _, err := k.VectorProgress(context.Background())
		if err != nil || done != total {
			t.Fatalf("after the reindex %d of %d chunks have a vector of embed-b (%v)", done, total, err)
		}
		w, _ := db.Pools()
		var other int
		if err := w.QueryRow(`SELECT COUNT(*) FROM retrieval_vectors WHERE model <> 'embed-b'`).Scan(&other); err != nil || other != 0 {
			t.Fatalf("%d vectors of the old model remain (%v)", other, err)
		}
		hits, err := k.Search(context.Background(), []string{"handbook"}, "sixteen weeks parental leave", 5, nil)
		if err != nil || len(hits) == 0 || !strings.Contains(hits[0].Text, "sixteen weeks") {
			t.Fatalf("after the reindex: %+v, %v", hits, err)
		}
	})
}

func TestTheRerankerOrdersTheFoundChunksAndAFailedOneLeavesTheFusedOrder(t *testing.T) {
	db := storetest.Open(t, storetest.SQLite)
	fake := llm.NewServer()
	defer fake.Close()
	w, r := db.Pools()
	k, err := knowledge.New(context.Background(), knowledge.Options{Dialect: db.Driver(), W: w, R: r,
		Limits: knowledge.Limits{MaxFileBytes: 1 << 20, MaxPages: 10, MaxDocuments: 10}, Chunks: extract.ChunkOptions{TargetChars: 200},
		Rerank: provider.Endpoint{BaseURL: fake.URL, Model: "rerank-test", APIKey: "k"},
		Bases:  []knowledge.Base{{Name: "handbook", Mode: knowledge.ModeTool}}})
	if err != nil {
		t.Fatal(err)
	}
	add(t, k, "handbook", "handbook.md", handbook)
	hits, err := k.Search(context.Background(), []string{"handbook"}, "parental leave at full pay", 3, nil)
	if err != nil || len(hits) == 0 || !strings.Contains(hits[0].Text, "sixteen weeks") {
		t.Fatalf("reranked: %+v %v", hits, err)
	}
	reqs := fake.RerankRequests()
	if len(reqs) != 1 || reqs[0].Model != "rerank-test" || reqs[0].Query != "parental leave at full pay" || len(reqs[0].Documents) < 2 {
		t.Fatalf("rerank requests %+v, want one with the query and the fused candidates", reqs)
	}
	fake.FailRerank(1, 503)
	again, err := k.Search(context.Background(), []string{"handbook"}, "parental leave at full pay", 3, nil)
	if err != nil || len(again) == 0 {
		t.Fatalf("with the reranker down the search failed: %v", err)
	}
}
