package coord

import (
	"context"
	"relaybot/internal/testkit/wait"
	"testing"

	"log/slog"
	"relaybot/internal/testkit/logbuf"
	"strings"
)

// TestAStopPublishedOnOneReplicaReachesTheOthers publishes a stop request through one
// replica's pool and receives it, whole, on another's listener.
func TestAStopPublishedOnOneReplicaReachesTheOthers(t *testing.T) {
	st, dsn := pgStore(t, "")
	other := openPG(t, dsn, "")
	logs := &logbuf.Buffer{}
	listener := NewSignals(pool(t, st), slog.New(slog.NewTextHandler(logs, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan Stop, 1)
	done := make(chan error, 1)
	go func() { done <- listener.ListenStops(ctx, "", func(s Stop) { got <- s }) }()
	wait.For(t, "the listener to listen", func() bool { return strings.Contains(logs.String(), "listening for stop requests") })

	want := Stop{Key: "telegram:42::", UserID: "7", Admin: true}
	if err := NewSignals(pool(t, other), nil).PublishStop(ctx, want.Key, want.UserID, want.Admin); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the stop request to arrive", func() bool {
		select {
		case s := <-got:
			if s != want {
				t.Fatalf("received %+v, want %+v", s, want)
			}
			return true
		default:
			return false
		}
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ListenStops after its context ended: %v", err)
	}
}
