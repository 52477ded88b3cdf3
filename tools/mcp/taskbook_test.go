package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/server"

	testmcp "relaybot/internal/testkit/mcp"
	"relaybot/internal/testkit/memnet"
	"relaybot/internal/testkit/wait"
	"relaybot/tools"
	"relaybot/tools/mcp"
)

// book is the store's mcp_tasks_in_flight in memory: a task's row names its process, and a
// process takes only the rows of processes that are gone, each once.
type book struct {
	mu   sync.Mutex
	rows map[string]string // task id → owner
	gone map[string]bool
}

func newBook() *book { return &book{rows: map[string]string{}, gone: map[string]bool{}} }

func (b *book) owners() map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]string{}
	for id, o := range b.rows {
		out[id] = o
	}
	return out
}

func (b *book) leave(owner string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gone[owner] = true
}

// of is the book as process owner sees it.
func (b *book) of(owner string) mcp.TaskBook { return bookOf{b, owner} }

type bookOf struct {
	b     *book
	owner string
}

func (o bookOf) BeginTask(_ context.Context, server, id, protocol string) error {
	o.b.mu.Lock()
	defer o.b.mu.Unlock()
	o.b.rows[id] = o.owner
	return nil
}

func (o bookOf) EndTask(_ context.Context, server, id string) error {
	o.b.mu.Lock()
	defer o.b.mu.Unlock()
	delete(o.b.rows, id)
	return nil
}

func (o bookOf) TakeLeftTasks(_ context.Context, server string) ([]string, error) {
	o.b.mu.Lock()
	defer o.b.mu.Unlock()
	var out []string
	for id, owner := range o.b.rows {
		if owner != o.owner && o.b.gone[owner] {
			out = append(out, id)
			delete(o.b.rows, id)
		}
	}
	return out, nil
}

// severable is a network the test can cut: then every request fails.
type severable struct {
	next http.RoundTripper
	cut  atomic.Bool
}

func (s *severable) RoundTrip(r *http.Request) (*http.Response, error) {
	if s.cut.Load() {
		return nil, errors.New("network cut")
	}
	return s.next.RoundTrip(r)
}

// A task whose process died without ending it (here: its network cut, so neither its result
// nor its cancellation reaches the server) is cancelled on the server by the next process that
// connects it, once that process is gone; a process already connected finds it at its next sweep.
// Both task protocols: the 2026-07-28 extension and 2025-11-25's task-augmented calls.
func TestATaskAStoppedProcessLeftIsCancelledByTheNext(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		name := map[bool]string{false: "2026-07-28", true: "2025-11-25"}[legacy]
		for _, connected := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/at connect", true: "/at a sweep"}[connected], func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					k := testmcp.New("kit")
					if legacy {
						k.Legacy()
					}
					ln := memnet.Listen("mcp.test:80")
					srv := &http.Server{Handler: k.Serve(server.NewStreamableHTTPServer(k.Server))}
					go func() { _ = srv.Serve(ln) }()
					netA := &severable{next: &http.Transport{DialContext: ln.Dial}}
					hcA := &http.Client{Transport: netA}
					hcB := &http.Client{Transport: &http.Transport{DialContext: ln.Dial}}
					t.Cleanup(func() {
						hcB.CloseIdleConnections()
						_ = srv.Close()
					})
					b := newBook()

					a := mcp.NewLoader([]mcp.ServerConfig{mcp.OverHTTP("srv", "http://mcp.test:80/mcp", hcA)}, quietLogger(), mcp.WithTaskBook(b.of("a")))
					a.Start(context.Background())
					waitUp(t, a, "srv")
					ctx, stop := context.WithCancel(context.Background())
					done := make(chan error, 1)
					go func() {
						args, _ := json.Marshal(map[string]any{"steps": 1, "seconds": 3600})
						_, err := a.Call(ctx, tools.Invocation{Name: "research", Arguments: args})
						done <- err
					}()
					wait.For(t, "the task in the book", func() bool { return len(b.owners()) == 1 })
					for _, o := range b.owners() {
						if o != "a" {
							t.Fatalf("the task is booked to %q, want a", o)
						}
					}

					var bl *mcp.Loader
					startB := func() {
						bl = mcp.NewLoader([]mcp.ServerConfig{mcp.OverHTTP("srv", "http://mcp.test:80/mcp", hcB)}, quietLogger(),
							mcp.WithTaskBook(b.of("b")), mcp.WithTaskSweep(time.Minute))
						bl.Start(context.Background())
						t.Cleanup(bl.Close)
						waitUp(t, bl, "srv")
					}
					if connected {
						startB()
						time.Sleep(2 * time.Minute) // on the bubble's clock: sweeps while a lives take nothing
						if len(b.owners()) != 1 || k.Cancelled() != 0 {
							t.Fatalf("a live process's task was taken: book %v, cancelled %d", b.owners(), k.Cancelled())
						}
					}
					// a dies: nothing it sends reaches the server any more.
					netA.cut.Store(true)
					stop()
					<-done
					a.Close()
					if got := b.owners(); len(got) != 1 {
						t.Fatalf("after a's cancellation could not be sent the book holds %v, want a's task", got)
					}
					if k.Cancelled() != 0 {
						t.Fatal("the task was cancelled over a cut network")
					}
					b.leave("a")
					if connected {
						time.Sleep(time.Minute) // on the bubble's clock: b's next sweep
					} else {
						startB()
					}
					wait.For(t, "the left task cancelled on the server", func() bool { return k.Cancelled() == 1 })
					if got := b.owners(); len(got) != 0 {
						t.Fatalf("the book still holds %v", got)
					}
				})
			})
		}
	}
}
