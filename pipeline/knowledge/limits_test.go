package knowledge_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"relaybot/pipeline/knowledge"
	"relaybot/store"
	"relaybot/store/storetest"
)

// gatedReader holds its first Read until every upload of the test has begun reading, so all of
// them have passed Add's first look at the count before any of them stores anything.
type gatedReader struct {
	r       io.Reader
	once    sync.Once
	arrived *sync.WaitGroup
	release <-chan struct{}
}

func (g *gatedReader) Read(p []byte) (int, error) {
	g.once.Do(func() {
		g.arrived.Done()
		<-g.release
	})
	return g.r.Read(p)
}

// Uploads that arrive together, on two replicas sharing the database, never take a base past
// knowledge.max_documents: as many as the limit are stored, every other one is refused naming
// the limit, and nothing of a refused one is left behind.
func TestConcurrentUploadsNeverTakeABasePastMaxDocuments(t *testing.T) {
	storetest.Drivers(t, func(t *testing.T, driver string) {
		const limit, uploads = 4, 16
		dsn := storetest.DSN(t, driver)
		dbs := []*store.Database{storetest.OpenWith(t, store.Options{Driver: driver, DSN: dsn}), storetest.OpenWith(t, store.Options{Driver: driver, DSN: dsn})}
		var replicas []*knowledge.Knowledge
		for _, db := range dbs {
			replicas = append(replicas, open(t, db, nil, knowledge.Limits{MaxFileBytes: 1 << 20, MaxPages: 5, MaxDocuments: limit}))
		}
		var arrived sync.WaitGroup
		arrived.Add(uploads)
		release := make(chan struct{})
		go func() { arrived.Wait(); close(release) }()
		errs := make([]error, uploads)
		var wg sync.WaitGroup
		for i := range uploads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				text := fmt.Sprintf("# Memo %d\n\nMemo %d says the canteen opens at noon.", i, i)
				r := &gatedReader{r: strings.NewReader(text), arrived: &arrived, release: release}
				_, errs[i] = replicas[i%2].Add(context.Background(), "handbook", fmt.Sprintf("memo%d.md", i), r, "test", nil)
			}()
		}
		wg.Wait()
		stored := 0
		for i, err := range errs {
			var ref *knowledge.RefusedError
			switch {
			case err == nil:
				stored++
			case errors.As(err, &ref) && ref.Key == "knowledge.max_documents" && ref.Limit == limit &&
				strings.Contains(err.Error(), "knowledge.max_documents (4)"):
			default:
				t.Errorf("upload %d: %v, want it stored or refused naming knowledge.max_documents (4)", i, err)
			}
		}
		docs, err := replicas[0].Documents(context.Background(), "handbook")
		if err != nil {
			t.Fatal(err)
		}
		if stored != limit || len(docs) != limit {
			t.Fatalf("%d uploads at once into a base of at most %d: %d said stored, the base holds %d", uploads, limit, stored, len(docs))
		}
		chunks := 0
		for _, d := range docs {
			chunks += d.Chunks
		}
		w, _ := dbs[0].Pools()
		var rows, texts int
		if err := w.QueryRow(`SELECT COUNT(*) FROM knowledge_chunks`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if err := w.QueryRow(`SELECT COUNT(*) FROM retrieval_docs WHERE collection = 'knowledge'`).Scan(&texts); err != nil {
			t.Fatal(err)
		}
		if rows != chunks || texts != chunks {
			t.Fatalf("the stored documents have %d chunks, yet %d chunk rows and %d texts are kept: a refused upload left some behind", chunks, rows, texts)
		}
	})
}
