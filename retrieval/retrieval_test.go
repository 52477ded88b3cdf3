package retrieval_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	"relaybot/provider"
	"relaybot/retrieval"
	"relaybot/store"
	"relaybot/store/storetest"
)

// databases runs fn on every database the retrieval layer runs on: SQLite, PostgreSQL without
// pgvector (vectors compared in Go) and PostgreSQL with it; each PostgreSQL one is skipped,
// saying why, when its server is not given.
func databases(t *testing.T, fn func(t *testing.T, db *store.Database, dialect string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, storetest.Open(t, storetest.SQLite), retrieval.SQLite) })
	t.Run("postgres", func(t *testing.T) { fn(t, storetest.Open(t, storetest.Postgres), retrieval.Postgres) })
	t.Run("pgvector", func(t *testing.T) { fn(t, storetest.OpenPgvector(t), retrieval.Postgres) })
}

func open(t *testing.T, db *store.Database, dialect, collection string) *retrieval.Index {
	t.Helper()
	w, r := db.Pools()
	x, err := retrieval.Open(context.Background(), w, r, dialect, collection)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

type observer struct {
	mu    sync.Mutex
	calls []chat.ModelCall
}

func (o *observer) ModelCallFinished(_ context.Context, c chat.ModelCall) {
	o.mu.Lock()
	o.calls = append(o.calls, c)
	o.mu.Unlock()
}

func embedder(t *testing.T, fake *llm.Server, obs provider.Observer, models ...string) *retrieval.Embedder {
	t.Helper()
	var cands []retrieval.Candidate
	for _, m := range models {
		cands = append(cands, retrieval.Candidate{Endpoint: provider.Endpoint{BaseURL: fake.URL, APIKey: "k", Model: m}})
	}
	e, err := retrieval.NewEmbedder(retrieval.EmbedderOptions{Candidates: cands, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestSearchFindsAnOwnersTextsByWordsAndMeaningOnly(t *testing.T) {
	databases(t, func(t *testing.T, db *store.Database, dialect string) {
		ctx := context.Background()
		fake := llm.NewServer()
		defer fake.Close()
		e := embedder(t, fake, nil, "embed-a")
		x := open(t, db, dialect, "memory")
		other := open(t, db, dialect, "knowledge")
		docs := []retrieval.Doc{
			{Item: 1, Owner: "telegram:1", Scope: "private", Text: "My cat is called Tom"},
			{Item: 2, Owner: "telegram:1", Scope: "private", Text: "I live in Oslo near the fjord"},
			{Item: 3, Owner: "telegram:1", Scope: "telegram:-100", Text: "Prefers tea over coffee"},
			{Item: 4, Owner: "telegram:2", Scope: "private", Text: "My cat is called Felix"},
		}
		texts := make([]string, len(docs))
		for i, d := range docs {
			texts[i] = d.Text
		}
		emb, err := e.Embed(ctx, texts)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range docs {
			if err := x.Put(ctx, d, emb.Vectors[i], emb.Space); err != nil {
				t.Fatal(err)
			}
		}
		if err := other.Put(ctx, retrieval.Doc{Item: 1, Owner: "telegram:1", Text: "cat handbook"}, nil, retrieval.Space{}); err != nil {
			t.Fatal(err)
		}
		q, err := e.Embed(ctx, []string{"what is my cat called"})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			q    retrieval.Query
			want []int64
		}{
			{"words and vector", retrieval.Query{Owner: "telegram:1", Text: "what is my cat called", Vector: q.Vectors[0], Space: q.Space, Limit: 1}, []int64{1}},
			{"words only", retrieval.Query{Owner: "telegram:1", Text: "cat", Limit: 5}, []int64{1}},
			{"another person's", retrieval.Query{Owner: "telegram:2", Text: "cat", Limit: 5}, []int64{4}},
			{"scope of a group", retrieval.Query{Owner: "telegram:1", Scopes: []string{"telegram:-100"}, Text: "cat tea", Limit: 5}, []int64{3}},
			{"no scope", retrieval.Query{Owner: "telegram:1", Scopes: []string{}, Text: "cat", Limit: 5}, nil},
			{"a vector of another space", retrieval.Query{Owner: "telegram:1", Vector: q.Vectors[0], Space: retrieval.Space{Model: "embed-b", Dims: q.Space.Dims}, Limit: 5}, nil},
		} {
			got, err := x.Search(ctx, tc.q)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: found %v, want %v", tc.name, got, tc.want)
			}
		}
		if err := x.Delete(ctx, 1); err != nil {
			t.Fatal(err)
		}
		got, err := x.Search(ctx, retrieval.Query{Owner: "telegram:1", Text: "cat", Vector: q.Vectors[0], Space: q.Space})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(got, 1) {
			t.Errorf("a deleted text is still found: %v", got)
		}
		if err := x.Scrub(ctx); err != nil {
			t.Fatal(err)
		}
		if dialect == retrieval.Postgres {
			// The deleted rows leave the pages and indexes at the scrub, not at autovacuum's pass.
			_, r := db.Pools()
			var vacuumed bool
			if err := r.QueryRowContext(ctx, `SELECT last_vacuum IS NOT NULL FROM pg_stat_user_tables WHERE relid = 'retrieval_docs'::regclass`).Scan(&vacuumed); err != nil {
				t.Fatal(err)
			}
			if !vacuumed {
				t.Error("the scrub did not vacuum the texts' table")
			}
		}
	})
}

func TestPgvectorIsUsedWhereTheServerHasItAndItsGraphFindsAnOwnersTexts(t *testing.T) {
	ctx := context.Background()
	db := storetest.OpenPgvector(t)
	x := open(t, db, retrieval.Postgres, "knowledge")
	if !x.Pgvector() {
		t.Fatal("the server has pgvector but the vectors are compared in Go")
	}
	fake := llm.NewServer()
	defer fake.Close()
	e := embedder(t, fake, nil, "embed-a")
	var docs []retrieval.Doc
	var texts []string
	for i := range 300 {
		owner := "handbook"
		if i%3 != 0 {
			owner = fmt.Sprint("other-", i%7)
		}
		text := fmt.Sprintf("chapter %d about topic %d and theme %d", i, i%11, i%13)
		docs, texts = append(docs, retrieval.Doc{Item: int64(i + 1), Owner: owner, Text: text}), append(texts, text)
	}
	emb, err := e.Embed(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.PutMany(ctx, docs, emb.Vectors, emb.Space); err != nil {
		t.Fatal(err)
	}
	q, err := e.Embed(ctx, []string{texts[30]})
	if err != nil {
		t.Fatal(err)
	}
	for _, approximate := range []bool{false, true} {
		got, err := x.Search(ctx, retrieval.Query{Owner: "handbook", Vector: q.Vectors[0], Space: q.Space, Limit: 5, Approximate: approximate})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 5 || got[0] != 31 {
			t.Errorf("approximate %v: found %v, want 5 of the handbook's texts, chapter 30 first", approximate, got)
		}
		for _, id := range got {
			if (id-1)%3 != 0 {
				t.Errorf("approximate %v: found text %d of another owner", approximate, id)
			}
		}
	}
}

func TestAChangedModelIsReembeddedWithoutMixingSpaces(t *testing.T) {
	databases(t, func(t *testing.T, db *store.Database, dialect string) {
		ctx := context.Background()
		fake := llm.NewServer()
		defer fake.Close()
		fake.SetEmbeddingDims("embed-b", 32)
		x := open(t, db, dialect, "memory")
		old := embedder(t, fake, nil, "embed-a")
		texts := []string{"my cat is called Tom", "I live in Oslo", "tea over coffee"}
		emb, err := old.Embed(ctx, texts)
		if err != nil {
			t.Fatal(err)
		}
		for i, text := range texts {
			if err := x.Put(ctx, retrieval.Doc{Item: int64(i + 1), Owner: "p", Text: text}, emb.Vectors[i], emb.Space); err != nil {
				t.Fatal(err)
			}
		}
		obs := &observer{}
		newer := embedder(t, fake, obs, "embed-b")
		q, err := newer.Embed(ctx, []string{"Oslo"})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := x.Search(ctx, retrieval.Query{Owner: "p", Vector: q.Vectors[0], Space: q.Space}); err != nil || len(got) != 0 {
			t.Fatalf("before reindexing a new model's query found %v (%v): spaces mixed", got, err)
		}
		var progress [][2]int
		space, err := retrieval.Reindex(ctx, x, newer, retrieval.ReindexOptions{Batch: 2, Progress: func(done, total int) {
			progress = append(progress, [2]int{done, total})
		}})
		if err != nil {
			t.Fatal(err)
		}
		if space != (retrieval.Space{Model: "embed-b", Dims: 32}) {
			t.Fatalf("reindexed into %v", space)
		}
		if !slices.Equal(progress, [][2]int{{2, 3}, {3, 3}}) {
			t.Errorf("progress %v, want 2 then 3 of 3", progress)
		}
		got, err := x.Search(ctx, retrieval.Query{Owner: "p", Vector: q.Vectors[0], Space: q.Space, Limit: 1})
		if err != nil || !slices.Equal(got, []int64{2}) {
			t.Fatalf("after reindexing found %v (%v), want the Oslo text", got, err)
		}
		if done, total, _ := x.Progress(ctx, emb.Space); done != 0 || total != 3 {
			t.Errorf("the old model's vectors are kept: %d of %d", done, total)
		}
		if len(obs.calls) == 0 || obs.calls[len(obs.calls)-1].TokensIn == 0 {
			t.Errorf("embedding calls not reported with their tokens: %+v", obs.calls)
		}
	})
}

func TestEmbedderFallsBackAndReportsEveryAttempt(t *testing.T) {
	down := llm.NewServer()
	defer down.Close()
	down.FailEmbeddings(1, http.StatusServiceUnavailable)
	up := llm.NewServer()
	defer up.Close()
	obs := &observer{}
	e, err := retrieval.NewEmbedder(retrieval.EmbedderOptions{Observer: obs, Candidates: []retrieval.Candidate{
		{Endpoint: provider.Endpoint{Name: "first", BaseURL: down.URL, Model: "text-embedding-3-small"}, Dimensions: 16},
		{Endpoint: provider.Endpoint{Name: "second", BaseURL: up.URL, Model: "text-embedding-3-small"}, Dimensions: 16},
	}})
	if err != nil {
		t.Fatal(err)
	}
	emb, err := e.Embed(context.Background(), []string{"hello"})
	if err != nil {
		t.Fatal(err)
	}
	if emb.Space != (retrieval.Space{Model: "text-embedding-3-small", Dims: 16}) || len(emb.Vectors[0]) != 16 {
		t.Fatalf("space %v", emb.Space)
	}
	if len(emb.Calls) != 2 || emb.Calls[0].Status != chat.StatusError || emb.Calls[1].Model != "second" || emb.Calls[1].FallbackReason == "" {
		t.Fatalf("calls %+v", emb.Calls)
	}
	if len(obs.calls) != 2 {
		t.Errorf("observer heard %d calls, want 2", len(obs.calls))
	}

	refused, err := retrieval.NewEmbedder(retrieval.EmbedderOptions{Candidates: []retrieval.Candidate{
		{Endpoint: provider.Endpoint{BaseURL: up.URL, Model: "nomic-embed-text"}, Dimensions: 8},
		{Endpoint: provider.Endpoint{BaseURL: up.URL, Model: "text-embedding-3-small"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = refused.Embed(context.Background(), []string{"hello"})
	var apiErr interface{ Error() string }
	if err == nil || errors.As(err, &apiErr) && provider.ErrorKindOf(err).MovesOn() {
		t.Fatalf("a refused request (400) moved on to the fallback or succeeded: %v", err)
	}
}

func TestFuseRanksWhatBothListsAgreeOnFirst(t *testing.T) {
	got := retrieval.Fuse(3, []int64{1, 2, 3, 4}, []int64{3, 5, 1})
	if !slices.Equal(got, []int64{1, 3, 2}) {
		t.Fatalf("fused %v, want [1 3 2]", got)
	}
	if got := retrieval.Fuse(10); len(got) != 0 {
		t.Fatalf("nothing fused to %v", got)
	}
}

// TestALargeOwnersVectorSearchFindsWhatAnExactComparisonFinds stores more of one owner's texts
// than a search compares exactly (it reads their codes first): the texts nearest a query are
// still found, and texts stored before codes existed are found once the index is opened again.
func TestALargeOwnersVectorSearchFindsWhatAnExactComparisonFinds(t *testing.T) {
	words := strings.Fields("cat dog tea coffee oslo berlin cello piano allergic nuts runs swims reads novels " +
		"works nurse teacher engineer sister brother garden bikes vegan spicy jazz opera hiking chess march tennis")
	space := retrieval.Space{Model: "embed-a", Dims: 256}
	const n = 5000 // past retrieval's manyTexts: PostgreSQL's keyword search starts from the index's postings
	docs := make([]retrieval.Doc, n)
	vecs := make([][]float32, n)
	for i := range docs {
		text := fmt.Sprintf("%s %s %s %s w%d", words[i%len(words)], words[(i/7)%len(words)], words[(i*13)%len(words)], words[(i/31)%len(words)], i%97)
		docs[i] = retrieval.Doc{Item: int64(i + 1), Owner: "telegram:1", Text: text}
		vecs[i] = llm.FakeEmbedding(space.Model, text, space.Dims)
	}
	cos := func(a, b []float32) float32 {
		var s float32
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	databases(t, func(t *testing.T, db *store.Database, dialect string) {
		ctx := context.Background()
		x := open(t, db, dialect, "knowledge")
		if err := x.PutMany(ctx, docs, vecs, space); err != nil {
			t.Fatal(err)
		}
		for _, query := range []string{"tea and jazz in oslo", "a nurse who swims", docs[1234].Text} {
			q := llm.FakeEmbedding(space.Model, query, space.Dims)
			sims := make([]float32, n)
			for i := range vecs {
				sims[i] = cos(q, vecs[i])
			}
			sorted := slices.Clone(sims)
			slices.Sort(sorted)
			tenth := sorted[n-10]
			got, err := x.Search(ctx, retrieval.Query{Owner: "telegram:1", Vector: q, Space: space, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			near := 0
			for _, item := range got {
				if sims[item-1] >= tenth-1e-6 {
					near++
				}
			}
			if len(got) != 10 || near < 9 {
				t.Errorf("%q: %d of the %d found are among the 10 nearest (the 10th is %.3f): %v", query, near, len(got), tenth, got)
			}
			if query == docs[1234].Text && (len(got) == 0 || sims[got[0]-1] < 1-1e-5) {
				t.Errorf("the text itself is not found first: %v", got)
			}
		}
		// Words only: every text found holds a word of the query, the first holds both.
		found, err := x.Search(ctx, retrieval.Query{Owner: "telegram:1", Text: "cello opera", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != 10 {
			t.Fatalf("the words found %d texts, want 10", len(found))
		}
		for i, item := range found {
			text := docs[item-1].Text
			both := strings.Contains(text, "cello") && strings.Contains(text, "opera")
			if !strings.Contains(text, "cello") && !strings.Contains(text, "opera") || i == 0 && !both {
				t.Errorf("found %d %q at %d for \"cello opera\"", item, text, i)
			}
		}
		// Vectors stored before codes existed: not seen until the index is opened again.
		w, _ := db.Pools()
		if _, err := w.ExecContext(ctx, `DELETE FROM retrieval_codes`); err != nil {
			t.Fatal(err)
		}
		q := llm.FakeEmbedding(space.Model, docs[42].Text, space.Dims)
		x = open(t, db, dialect, "knowledge")
		got, err := x.Search(ctx, retrieval.Query{Owner: "telegram:1", Vector: q, Space: space, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || sims(q, vecs, got[0]) < 1-1e-5 {
			t.Errorf("after reopening, the text's own vector finds %v, want item 43 or its twin", got)
		}
	})
}

func sims(q []float32, vecs [][]float32, item int64) float32 {
	var s float32
	for i, x := range vecs[item-1] {
		s += q[i] * x
	}
	return s
}

// TestAWriteOnOneReplicaIsSeenByAnothersNextSearch opens the index twice on one database, as
// two replicas do: what one writes, deletes or moves to another scope, the other's next vector
// search sees, although it keeps the owner's codes in memory between searches.
func TestAWriteOnOneReplicaIsSeenByAnothersNextSearch(t *testing.T) {
	space := retrieval.Space{Model: "embed-a", Dims: 128}
	vec := func(text string) []float32 { return llm.FakeEmbedding(space.Model, text, space.Dims) }
	databases(t, func(t *testing.T, db *store.Database, dialect string) {
		ctx := context.Background()
		a := open(t, db, dialect, "memory")
		b := open(t, db, dialect, "memory")
		for i, text := range []string{"my cat is called Tom", "I live in Oslo", "tea over coffee"} {
			d := retrieval.Doc{Item: int64(i + 1), Owner: "telegram:1", Scope: "private", Text: text}
			if err := a.Put(ctx, d, vec(text), space); err != nil {
				t.Fatal(err)
			}
		}
		search := func(text string, scopes []string) []int64 {
			t.Helper()
			got, err := a.Search(ctx, retrieval.Query{Owner: "telegram:1", Scopes: scopes, Vector: vec(text), Space: space, Limit: 3})
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		if got := search("my cat is called Tom", nil); len(got) == 0 || got[0] != 1 {
			t.Fatalf("before any other write: %v, want item 1 first", got)
		}
		if err := b.Put(ctx, retrieval.Doc{Item: 9, Owner: "telegram:1", Scope: "private", Text: "plays the cello"}, vec("plays the cello"), space); err != nil {
			t.Fatal(err)
		}
		if got := search("plays the cello", nil); len(got) == 0 || got[0] != 9 {
			t.Errorf("a text the other replica added: %v, want item 9 first", got)
		}
		if err := b.Delete(ctx, 9); err != nil {
			t.Fatal(err)
		}
		if got := search("plays the cello", nil); slices.Contains(got, 9) {
			t.Errorf("a text the other replica deleted is still found: %v", got)
		}
		if err := b.Put(ctx, retrieval.Doc{Item: 1, Owner: "telegram:1", Scope: "telegram:-100", Text: "my cat is called Tom"}, vec("my cat is called Tom"), space); err != nil {
			t.Fatal(err)
		}
		if got := search("my cat is called Tom", []string{"private"}); slices.Contains(got, 1) {
			t.Errorf("a text the other replica moved to a group is still found in private: %v", got)
		}
		if err := b.Put(ctx, retrieval.Doc{Item: 1, Owner: "telegram:2", Scope: "private", Text: "my cat is called Tom"}, vec("my cat is called Tom"), space); err != nil {
			t.Fatal(err)
		}
		if got := search("my cat is called Tom", nil); slices.Contains(got, 1) {
			t.Errorf("a text the other replica gave to another person is still found: %v", got)
		}
	})
}
