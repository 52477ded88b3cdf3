package knowledge

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"relaybot/internal/testkit/llm"
	"relaybot/provider"
	"relaybot/retrieval"
	"relaybot/store"
	"relaybot/store/storetest"
)

// benchDims is the length of the search benchmark's vectors (text-embedding-3-small asked for
// 512).
const benchDims = 512

// benchChunks is how many chunks the search benchmark stores in one base: BOT_BENCH_CHUNKS, or
// 5,000 (CI's once-over run; the figures in docs/performance/2026-12-07-knowledge.md are at
// 50,000).
func benchChunks(b *testing.B) int {
	if s := os.Getenv("BOT_BENCH_CHUNKS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1000 {
			b.Fatalf("BOT_BENCH_CHUNKS=%q: want a number of chunks, at least 1000", s)
		}
		return n
	}
	return 5_000
}

// benchVocabulary is 3,000 words: a handbook's common words and made-up terms, so a query's
// words are in many chunks, as in a real base.
var benchVocabulary = func() []string {
	common := strings.Fields("leave expenses travel hotel parental annual sick receipts laptop monitor office visitor badge " +
		"password security incident train flight insurance allowance canteen parking wifi drill policy employee manager " +
		"contract salary bonus pension holiday weekend overtime training review budget invoice supplier customer")
	out := append([]string(nil), common...)
	for i := len(out); i < 3000; i++ {
		out = append(out, fmt.Sprintf("term%d", i))
	}
	return out
}()

// benchChunk is the text of chunk i: 60 words, different for each chunk.
func benchChunk(i int) string {
	n := len(benchVocabulary)
	words := make([]string, 60)
	for j := range words {
		words[j] = benchVocabulary[(i*31+j*j*7+j*i%97)%n]
	}
	return strings.Join(words, " ") + fmt.Sprintf(" (section %d)", i)
}

// BenchmarkSearch times search_knowledge's search of one base of BOT_BENCH_CHUNKS chunks (keywords
// and vectors fused, every chunk with a vector; beside a small base), and each retrieval leg
// alone, and reports their p95. The query's embedding comes from the testkit's model on loopback.
func BenchmarkSearch(b *testing.B) {
	n := benchChunks(b)
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
			e, err := retrieval.NewEmbedder(retrieval.EmbedderOptions{Candidates: []retrieval.Candidate{
				{Endpoint: provider.Endpoint{BaseURL: fake.URL, Model: "embed-bench"}}}})
			if err != nil {
				b.Fatal(err)
			}
			w, r := db.Pools()
			k, err := New(context.Background(), Options{Dialect: db.Driver(), W: w, R: r, Embedder: e,
				Limits: Limits{MaxDocuments: 1000}, Bases: []Base{{Name: "big", Mode: ModeTool}, {Name: "small", Mode: ModeTool}}})
			if err != nil {
				b.Fatal(err)
			}
			fillBase(b, db, k, "big", n)
			fillBase(b, db, k, "small", 500)
			// The first search builds the HNSW index (pgvector) and reads a heavy base's keyword
			// postings into memory (PostgreSQL): what the first search after an import costs.
			start := time.Now()
			if _, err := k.Search(context.Background(), []string{"big"}, "parental leave policy", 5, nil); err != nil {
				b.Fatal(err)
			}
			b.Logf("the first search after the import: %s", time.Since(start).Round(time.Millisecond))
			for _, leg := range []string{"fused", "keyword", "vector"} {
				b.Run(leg, func(b *testing.B) { benchQueries(b, k, leg) })
			}
		})
	}
}

// benchQueries times searches of the big base and reports their p95: the whole search
// ("fused": the query embedded, both legs, the chunks read), or one retrieval leg alone.
func benchQueries(b *testing.B, k *Knowledge, leg string) {
	ctx := context.Background()
	times := make([]time.Duration, 0, 1024)
	n := len(benchVocabulary)
	space := retrieval.Space{Model: "embed-bench", Dims: benchDims}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q := fmt.Sprintf("how does the %s %s work for %s", benchVocabulary[i%40], benchVocabulary[(i*7)%n], benchVocabulary[(i*13)%n])
		var found int
		var err error
		start := time.Now()
		switch leg {
		case "fused":
			var hits []Hit
			hits, err = k.Search(ctx, []string{"big"}, q, 5, nil)
			found = len(hits)
		case "keyword":
			var ids []int64
			ids, err = k.index.Search(ctx, retrieval.Query{Owner: "big", Text: q, Limit: 5, Approximate: true})
			found = len(ids)
		case "vector":
			var ids []int64
			ids, err = k.index.Search(ctx, retrieval.Query{Owner: "big", Vector: llm.FakeEmbedding("embed-bench", q, benchDims), Space: space, Limit: 5, Approximate: true})
			found = len(ids)
		}
		times = append(times, time.Since(start))
		if err != nil || found == 0 {
			b.Fatalf("%s search found %d chunks: %v", leg, found, err)
		}
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)*95/100].Microseconds())/1000, "p95-ms")
}

// fillBase stores chunks chunks in base, 500 to a document, straight into the tables with their
// vectors (the benchmark measures search, not 50,000 embedding requests).
func fillBase(b *testing.B, db *store.Database, k *Knowledge, base string, chunks int) {
	b.Helper()
	ctx := context.Background()
	space := retrieval.Space{Model: "embed-bench", Dims: benchDims}
	for doc := 0; doc*500 < chunks; doc++ {
		count := min(500, chunks-doc*500)
		rows := make([]chunkRow, count)
		for i := range rows {
			rows[i] = chunkRow{Ordinal: i, Page: i/5 + 1}
		}
		d, ids, err := k.docs.insert(ctx, Document{Base: base, Name: fmt.Sprintf("doc%d.pdf", doc), Format: "pdf", Chunks: count, AddedAt: time.Now()}, rows)
		if err != nil {
			b.Fatal(err)
		}
		docs := make([]retrieval.Doc, count)
		vecs := make([][]float32, count)
		for i := range docs {
			text := benchChunk(doc*500 + i)
			docs[i] = retrieval.Doc{Item: ids[i], Owner: base, Text: text}
			vecs[i] = llm.FakeEmbedding("embed-bench", text, benchDims)
		}
		if err := k.index.PutMany(ctx, docs, vecs, space); err != nil {
			b.Fatal(err)
		}
		if err := k.docs.progress(ctx, d.ID, count, count); err != nil {
			b.Fatal(err)
		}
	}
	if db.Driver() == store.DriverPostgres {
		w, _ := db.Pools()
		if _, err := w.Exec(`ANALYZE`); err != nil {
			b.Fatal(err)
		}
	}
}
