package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"relaybot/adapters"
	"relaybot/internal/testkit/wait"
)

// holdingHandler hands each message to the test and returns when the test lets it.
type holdingHandler struct {
	got     chan adapters.Inbound
	release chan struct{}
}

func (h holdingHandler) Handle(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	h.got <- in
	<-h.release
}

// TestASendIsAnsweredOnceItsMessageHasItsPlace: the page sends a chat's next message only once
// its send is answered, and with several replicas the next may reach another one. With a relay
// (replicas share the chat) the send is answered once the pipeline says the message has its
// place in the deployment's turn queue, so the next queues behind it; a process alone answers at
// once, as before.
func TestASendIsAnsweredOnceItsMessageHasItsPlace(t *testing.T) {
	for _, tt := range []struct {
		name     string
		replicas bool
	}{
		{name: "replicas sharing the chat", replicas: true},
		{name: "a process alone"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := holdingHandler{got: make(chan adapters.Inbound, 1), release: make(chan struct{})}
			opts := Options{Handler: h}
			if tt.replicas {
				opts.Relay = (&relayHub{}).relay()
			}
			c, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(c.Handler())
			defer func() {
				close(h.release) // before Close, which waits for the turns
				srv.Close()
				c.Close()
			}()
			b := newBrowser(t, srv)
			answered := make(chan int, 1)
			go func() {
				answered <- b.post("first", http.Header{"X-Csrf-Token": {b.csrf}}).StatusCode
			}()
			in := <-h.got
			var code int
			got := func() bool {
				select {
				case code = <-answered:
					return true
				default:
					return false
				}
			}
			if !tt.replicas {
				wait.For(t, "the send answered while its turn runs", got)
				if code != http.StatusAccepted {
					t.Fatalf("send answered %d, want 202", code)
				}
				return
			}
			wait.For(t, "the send answered, or held for the message's place", func() bool {
				return got() || wait.Inside("web.(*Chat).send", "adapters.(*Placement).Wait")
			})
			if code != 0 {
				t.Fatalf("the page heard its message arrived (%d) before it had its place: its next message could run first on another replica", code)
			}
			in.Placed()
			wait.For(t, "the send answered once the message is placed", got)
			if code != http.StatusAccepted {
				t.Fatalf("send answered %d, want 202", code)
			}
		})
	}
}
