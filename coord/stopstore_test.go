package coord

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"testing"
	"time"

	"relaybot/internal/testkit/logbuf"
	"relaybot/internal/testkit/wait"
)

// TestAStopSentWhileTheListenerReconnectsStopsTheTurn: the connection of replica a's stop
// listener is terminated by the server, and another replica sends a /stop for the turn a runs at once,
// before a listens again: a misses the notification, reads the stored stop when it listens again,
// and stops the turn.
func TestAStopSentWhileTheListenerReconnectsStopsTheTurn(t *testing.T) {
	st, dsn := pgStore(t, "")
	db := pool(t, st)
	a := joinReplica(t, db, 6*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const key = "telegram:77::"
	running := enter(t, a, Entry{Key: key, UserID: "u", MessageID: "1", Sent: time.Now()}, 0, false)
	if run, err := a.turns.Wait(ctx, key, running); !run || err != nil {
		t.Fatalf("a's message: run %v, err %v", run, err)
	}

	app := "stops_" + strings.NewReplacer("-", "_", ".", "_").Replace(a.m.ID())
	listenDB, err := sql.Open("pgx", dsn+"&application_name="+app)
	if err != nil {
		t.Fatal(err)
	}
	defer listenDB.Close()
	logs := &logbuf.Buffer{}
	stops := make(chan Stop, 4)
	listened := make(chan error, 1)
	go func() {
		listened <- NewSignals(listenDB, slog.New(slog.NewTextHandler(logs, nil))).ListenStops(ctx, a.m.ID(), func(s Stop) { stops <- s })
	}()
	wait.For(t, "a's stop listener to listen", func() bool { return strings.Contains(logs.String(), "listening for stop requests") })

	var killed int
	// The second argument waits for the backend to be gone, so the stop below cannot reach it.
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = $1 AND query LIKE 'LISTEN%' AND pg_terminate_backend(pid, 10000)`, app).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d listener connections (err %v), want 1", killed, err)
	}
	if err := NewSignals(db, nil).PublishStop(ctx, key, "u", false); err != nil {
		t.Fatal(err)
	}
	want := Stop{Key: key, UserID: "u"}
	select {
	case s := <-stops:
		if s != want {
			t.Fatalf("a received %+v, want %+v", s, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the /stop sent while a's listener reconnected never reached a; its log:\n%s", logs.String())
	}
	cancel()
	<-listened
}

// TestStoredStopsAreForTheRunningTurnOnly: a stop sent while no turn of the conversation runs is
// not stored, and one stored for a turn that has ended is not handed to its replica when its
// listener listens again (it would stop the conversation's next turn); old ones are purged.
func TestStoredStopsAreForTheRunningTurnOnly(t *testing.T) {
	st, _ := pgStore(t, "")
	db := pool(t, st)
	a := joinReplica(t, db, 6*time.Second)
	ctx := context.Background()
	sig := NewSignals(db, nil)
	const key = "web:9::"
	if err := sig.PublishStop(ctx, key, "u", false); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM stop_requests`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("%d stops stored with no turn running, want none", n)
	}
	first := enter(t, a, Entry{Key: key, UserID: "u", MessageID: "1", Sent: time.Now()}, 0, false)
	if run, err := a.turns.Wait(ctx, key, first); !run || err != nil {
		t.Fatalf("first message: run %v, err %v", run, err)
	}
	if err := sig.PublishStop(ctx, key, "u", false); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d stops stored for the running turn, want 1", n)
	}
	if err := a.turns.Leave(ctx, key, first); err != nil {
		t.Fatal(err)
	}
	next := enter(t, a, Entry{Key: key, UserID: "u", MessageID: "2", Sent: time.Now()}, 0, false)
	if run, err := a.turns.Wait(ctx, key, next); !run || err != nil {
		t.Fatalf("next message: run %v, err %v", run, err)
	}
	var got []Stop
	sig.missed(ctx, a.m.ID(), func(s Stop) { got = append(got, s) })
	if len(got) != 0 {
		t.Fatalf("the next turn was handed the ended turn's stop: %+v", got)
	}
	if _, err := db.ExecContext(ctx, `UPDATE stop_requests SET created_at = now() - interval '2 minutes'`); err != nil {
		t.Fatal(err)
	}
	if err := sig.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d stops left after the purge, want none", n)
	}
}
