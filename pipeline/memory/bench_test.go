package memory

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	"relaybot/provider"
	"relaybot/retrieval"
	"relaybot/store"
	"relaybot/store/storetest"
)

// benchDims is the length of the benchmark's vectors.
const benchDims = 512

// benchFacts is how many facts the recall benchmark stores: BOT_BENCH_FACTS, or 4,000 (CI's
// once-over run; the figures in docs/performance/2026-12-07-memory.md are at 100,000).
func benchFacts(b *testing.B) int {
	if s := os.Getenv("BOT_BENCH_FACTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1000 {
			b.Fatalf("BOT_BENCH_FACTS=%q: want a number of facts, at least 1000", s)
		}
		return n
	}
	return 4_000
}

var benchWords = strings.Fields("cat dog tea coffee oslo berlin cello piano allergic nuts runs swims reads novels " +
	"works nurse teacher engineer sister brother daughter son garden bikes vegan spicy food jazz opera hiking chess " +
	"birthday march april june football tennis knits paints photos travels japan italy spain mountains sea")

// benchText is the text of fact i: a few words of the list, different for each fact.
func benchText(i int) string {
	n := len(benchWords)
	return fmt.Sprintf("Likes %s and %s, %s on %s (note %d)", benchWords[i%n], benchWords[(i/n)%n], benchWords[(i*7)%n], benchWords[(i*13)%n], i)
}

// BenchmarkRecall measures what recall adds to a turn: the speaker's facts found by keywords and
// vector similarity among every person's facts, merged, and read. A "typical" speaker has 100
// facts, a "heavy" one 5,000; everyone else shares the rest. The query's embedding comes from
// the testkit's model on loopback (a real endpoint's network time is not the database's).
func BenchmarkRecall(b *testing.B) {
	n := benchFacts(b)
	for _, tc := range []struct {
		name string
		open func(testing.TB) *store.Database
	}{
		{"sqlite", func(t testing.TB) *store.Database { return storetest.Open(t, storetest.SQLite) }},
		{"postgres", func(t testing.TB) *store.Database { return storetest.Open(t, storetest.Postgres) }},
		{"pgvector", storetest.OpenPgvector},
	} {
		b.Run(tc.name, func(b *testing.B) {
			db := tc.open(b)
			fake := llm.NewServer()
			b.Cleanup(fake.Close)
			fake.SetEmbeddingDims("embed-bench", benchDims)
			m := benchMemory(b, db, fake)
			for _, speaker := range []struct {
				name  string
				facts int
			}{{"typical", 100}, {"heavy", min(5000, n/2)}} {
				b.Run(speaker.name, func(b *testing.B) {
					who := chat.User{Platform: chat.Telegram, ID: "speaker-" + speaker.name}
					fill(b, db, m, who, speaker.facts, n)
					benchSearch(b, m, who)
				})
			}
		})
	}
}

func benchMemory(b *testing.B, db *store.Database, fake *llm.Server) *Memory {
	b.Helper()
	e, err := retrieval.NewEmbedder(retrieval.EmbedderOptions{Candidates: []retrieval.Candidate{
		{Endpoint: provider.Endpoint{BaseURL: fake.URL, Model: "embed-bench"}}}})
	if err != nil {
		b.Fatal(err)
	}
	w, r := db.Pools()
	m, err := New(context.Background(), Options{Dialect: db.Driver(), W: w, R: r, Embedder: e, PrivateOnlyInPrivate: true})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// benchSearch times each recall and reports its p95 beside the mean.
func benchSearch(b *testing.B, m *Memory, who chat.User) {
	ctx := context.Background()
	at := Place{Chat: chat.Ref{Platform: chat.Telegram, ChatID: who.ID}, Private: true}
	if _, err := m.Search(ctx, who, at, "what do I like, tea or coffee?", 8, nil); err != nil { // the HNSW index is built here
		b.Fatal(err)
	}
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		found, err := m.Search(ctx, who, at, "does the person like "+benchWords[i%len(benchWords)]+" and "+benchWords[(i*5)%len(benchWords)], 8, nil)
		times = append(times, time.Since(start))
		if err != nil || len(found) == 0 {
			b.Fatalf("recall found %d facts: %v", len(found), err)
		}
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)*95/100].Microseconds())/1000, "p95-ms")
}

// fill stores facts of who and, once per database, the other people's facts up to total, in
// batches straight into the tables (the benchmark measures recall, not 100,000 extractions).
func fill(b *testing.B, db *store.Database, m *Memory, who chat.User, own, total int) {
	b.Helper()
	w, _ := db.Pools()
	var have int
	if err := w.QueryRow(`SELECT COUNT(*) FROM memory_facts`).Scan(&have); err != nil {
		b.Fatal(err)
	}
	var facts []Fact
	now := time.Now().UTC()
	for i := range own {
		facts = append(facts, Fact{Who: who, Scope: "private", Chat: "telegram:" + who.ID, Text: benchText(i), Path: PathExtraction, CreatedAt: now, UpdatedAt: now})
	}
	for i := have + own; i < total; i++ {
		p := chat.User{Platform: chat.Telegram, ID: fmt.Sprint("p", i%1000)}
		facts = append(facts, Fact{Who: p, Scope: "private", Chat: "telegram:" + p.ID, Text: benchText(i), Path: PathExtraction, CreatedAt: now, UpdatedAt: now})
	}
	for start := 0; start < len(facts); start += 500 {
		if err := insertBatch(db, m, facts[start:min(start+500, len(facts))]); err != nil {
			b.Fatal(err)
		}
	}
	if db.Driver() == store.DriverPostgres {
		// As autovacuum would have by now: without statistics of the tables just filled the
		// planner takes them for empty.
		if _, err := w.Exec(`ANALYZE`); err != nil {
			b.Fatal(err)
		}
	}
}

// insertBatch writes facts, then their texts and vectors, each in one transaction.
func insertBatch(db *store.Database, m *Memory, facts []Fact) error {
	ctx := context.Background()
	w, _ := db.Pools()
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	docs := make([]retrieval.Doc, len(facts))
	vecs := make([][]float32, len(facts))
	for i, f := range facts {
		if err := tx.QueryRowContext(ctx, `INSERT INTO memory_facts (platform, user_id, scope, chat, body, source_message, written_by, path, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, '', 'bench', $6, $7, $7) RETURNING id`, f.Who.Platform, f.Who.ID, f.Scope, f.Chat, f.Text, string(f.Path), f.CreatedAt).Scan(&f.ID); err != nil {
			return err
		}
		docs[i] = retrieval.Doc{Item: f.ID, Owner: f.Who.String(), Scope: f.Scope, Text: f.Text}
		vecs[i] = llm.FakeEmbedding("embed-bench", f.Text, benchDims)
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	return m.index.PutMany(ctx, docs, vecs, retrieval.Space{Model: "embed-bench", Dims: benchDims})
}
