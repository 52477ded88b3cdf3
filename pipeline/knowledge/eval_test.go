package knowledge_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"relaybot/internal/testkit/llm"
	"relaybot/knowledge/extract"
	"relaybot/pipeline/knowledge"
	"relaybot/provider"
	"relaybot/store/storetest"
)

// question is one of the evaluation set's: a member's words, the document that answers it, and
// words of the passage that does (a chunk holding them is a right answer).
type question struct {
	Q      string `json:"q"`
	Doc    string `json:"doc"`
	Answer string `json:"answer"`
}

// evalBase is a SQLite knowledge base "eval" holding testdata/eval's documents, searched with
// the embeddings and reranker given (either may be off).
func evalBase(t testing.TB, fake *llm.Server, embed, rerank bool) (*knowledge.Knowledge, []question) {
	t.Helper()
	db := storetest.Open(t, storetest.SQLite)
	w, r := db.Pools()
	o := knowledge.Options{Dialect: db.Driver(), W: w, R: r,
		Limits: knowledge.Limits{MaxFileBytes: 1 << 20, MaxPages: 10, MaxTextBytes: 1 << 20, MaxDocuments: 100},
		Chunks: extract.ChunkOptions{TargetChars: 400, OverlapChars: 60},
		Bases:  []knowledge.Base{{Name: "eval", Mode: knowledge.ModeTool, MaxTokens: 500}}}
	if embed {
		fake.SetEmbeddingDims("embed-eval", 256)
		o.Embedder = embedder(t, fake.URL, "embed-eval")
	}
	if rerank {
		o.Rerank = provider.Endpoint{BaseURL: fake.URL, Model: "rerank-eval"}
	}
	k, err := knowledge.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob("testdata/eval/*.md")
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		_, err = k.Add(context.Background(), "eval", filepath.Base(name), f, "eval", nil)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile("testdata/eval/questions.json")
	if err != nil {
		t.Fatal(err)
	}
	var qs []question
	if err := json.Unmarshal(data, &qs); err != nil {
		t.Fatal(err)
	}
	return k, qs
}

// answers reports whether h is a passage that answers q.
func (q question) answers(h knowledge.Hit) bool {
	return h.DocName == q.Doc && strings.Contains(strings.Join(strings.Fields(h.Text), " "), q.Answer)
}

// quality is recall@5 (the share of questions answered among the first five passages) and the
// mean reciprocal rank of the first passage that answers (0 when none of the five does).
func quality(t testing.TB, k *knowledge.Knowledge, qs []question) (recall, mrr float64) {
	t.Helper()
	for _, q := range qs {
		hits, err := k.Search(context.Background(), []string{"eval"}, q.Q, 5, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, h := range hits {
			if q.answers(h) {
				recall++
				mrr += 1 / float64(i+1)
				break
			}
		}
	}
	return recall / float64(len(qs)), mrr / float64(len(qs))
}

// Every question of the evaluation set has a passage that answers it, in its document: a reader
// or chunker that lost or split the answers would make the benchmark's figures meaningless.
func TestTheEvaluationSetIsAnswerable(t *testing.T) {
	fake := llm.NewServer()
	defer fake.Close()
	k, qs := evalBase(t, fake, false, false)
	if len(qs) < 20 {
		t.Fatalf("%d questions, want at least 20", len(qs))
	}
	for _, q := range qs {
		// The answer's own words find it: the passage exists whole in one chunk.
		hits, err := k.Search(context.Background(), []string{"eval"}, q.Answer, 50, nil)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, h := range hits {
			found = found || q.answers(h)
		}
		if !found {
			t.Errorf("no chunk of %s holds %q (the answer to %q)", q.Doc, q.Answer, q.Q)
		}
	}
}

// BenchmarkRetrievalQuality prints recall@5 and MRR over the evaluation set for keyword search
// alone, keywords and vectors fused, and the fused list reranked. The vectors and the reranker
// are the testkit's (a bag of hashed words; a word-overlap score): the figures compare the
// pipeline's stages, not a model's understanding (docs/performance/2026-12-07-knowledge.md).
func BenchmarkRetrievalQuality(b *testing.B) {
	fake := llm.NewServer()
	b.Cleanup(fake.Close)
	for _, tc := range []struct {
		name          string
		embed, rerank bool
	}{{"keyword", false, false}, {"hybrid", true, false}, {"hybrid+rerank", true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			k, qs := evalBase(b, fake, tc.embed, tc.rerank)
			var recall, mrr float64
			for b.Loop() {
				recall, mrr = quality(b, k, qs)
			}
			b.ReportMetric(recall, "recall@5")
			b.ReportMetric(mrr, "MRR")
		})
	}
}
