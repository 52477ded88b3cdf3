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

// TestAStopInAnotherSchemaOfTheDatabaseIsNotHeard: two deployments keep their tables in two
// schemas of one database, each with a turn of a conversation of the same key (the same chat
// and user on the same platform). A /stop in one must not reach the other's replicas: NOTIFY
// channels are the database's, so a stop heard across schemas stopped a turn nobody asked to
// stop (TestDiscordButtonsAfterTheShardChangesHands failed so while another run of it shared the
// test database).
func TestAStopInAnotherSchemaOfTheDatabaseIsNotHeard(t *testing.T) {
	here, _ := pgStore(t, "")
	elsewhere, _ := pgStore(t, "")
	logs := &logbuf.Buffer{}
	listener := NewSignals(pool(t, here), slog.New(slog.NewTextHandler(logs, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan Stop, 4)
	done := make(chan error, 1)
	go func() { done <- listener.ListenStops(ctx, "", func(s Stop) { got <- s }) }()
	wait.For(t, "the listener to listen", func() bool { return strings.Contains(logs.String(), "listening for stop requests") })

	const key = "discord:600000000000000002::"
	if err := NewSignals(pool(t, elsewhere), nil).PublishStop(ctx, key, "elsewhere", false); err != nil {
		t.Fatal(err)
	}
	// Notifications arrive in the order their transactions committed: the stop published here
	// after the other schema's comes after it, had that one been heard.
	if err := NewSignals(pool(t, here), nil).PublishStop(ctx, key, "here", false); err != nil {
		t.Fatal(err)
	}
	var heard []string
	wait.For(t, "this schema's stop to arrive", func() bool {
		select {
		case s := <-got:
			heard = append(heard, s.UserID)
			return s.UserID == "here"
		default:
			return false
		}
	})
	if len(heard) != 1 {
		t.Errorf("the listener heard the stops of %q, want only this schema's", heard)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ListenStops after its context ended: %v", err)
	}
}
