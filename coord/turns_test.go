package coord

import (
	"context"
	"database/sql"
	"relaybot/internal/testkit/wait"
	"slices"
	"strings"
	"testing"
	"time"

	"log/slog"
	"relaybot/internal/testkit/logbuf"
)

// replica is one member of a test deployment with its conversation turns.
type replica struct {
	m     *Member
	turns *Turns
}

// joinReplica registers a live member on db (lease ttl) with its Turns, listening for freed
// conversations until the test ends.
func joinReplica(t *testing.T, db *sql.DB, ttl time.Duration) replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	m, err := Join(ctx, db, Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	logs := &logbuf.Buffer{}
	turns := NewTurns(db, m.ID(), slog.New(slog.NewTextHandler(logs, nil)))
	done := make(chan error, 1)
	go func() { done <- turns.Listen(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		m.Leave(context.Background())
	})
	wait.For(t, "the turns listener to listen", func() bool { return strings.Contains(logs.String(), "listening for free conversations") })
	return replica{m: m, turns: turns}
}

// waitResult is what a Wait returned.
type waitResult struct {
	run bool
	err error
}

// waitAsync starts Wait for ticket and returns where its result arrives.
func waitAsync(ctx context.Context, r replica, key string, ticket int64) <-chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		run, err := r.turns.Wait(ctx, key, ticket)
		ch <- waitResult{run, err}
	}()
	return ch
}

func enter(t *testing.T, r replica, e Entry, limit int, interrupt bool) int64 {
	t.Helper()
	ticket, admitted, err := r.turns.Enter(context.Background(), e, limit, interrupt)
	if err != nil {
		t.Fatal(err)
	}
	if !admitted {
		t.Fatalf("%s refused", e.MessageID)
	}
	return ticket
}

func received(ch <-chan waitResult) (waitResult, bool) {
	select {
	case r := <-ch:
		return r, true
	default:
		return waitResult{}, false
	}
}

// TestAConversationRunsOneTurnAtATimeAcrossReplicasInTheOrderSent has two replicas contend for
// one conversation with messages that reached them out of order: the one sent first runs first
// wherever it arrived, the other waits until it leaves, and another conversation is never held up.
func TestAConversationRunsOneTurnAtATimeAcrossReplicasInTheOrderSent(t *testing.T) {
	st, _ := pgStore(t, "")
	db := pool(t, st)
	a, b := joinReplica(t, db, 6*time.Second), joinReplica(t, db, 6*time.Second)
	ctx := context.Background()
	sent := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const key = "telegram:100::"

	// Same second (Telegram's clock): the message ids order them.
	second := enter(t, a, Entry{Key: key, UserID: "1", MessageID: "11", Sent: sent}, 5, false)
	first := enter(t, b, Entry{Key: key, UserID: "1", MessageID: "10", Sent: sent}, 5, false)
	gotSecond := waitAsync(ctx, a, key, second)
	gotFirst := waitAsync(ctx, b, key, first)
	if r := <-gotFirst; !r.run || r.err != nil {
		t.Fatalf("the message sent first: run %v, err %v", r.run, r.err)
	}
	if _, ok := received(gotSecond); ok {
		t.Fatal("the second message ran while the first one's turn ran on the other replica")
	}
	if user, here, running, err := a.turns.Running(ctx, key); err != nil || !running || here || user != "1" {
		t.Fatalf("replica a sees: user %q here %v running %v err %v; want user 1 running elsewhere", user, here, running, err)
	}
	other := enter(t, a, Entry{Key: "telegram:200::", UserID: "2", MessageID: "5", Sent: sent}, 5, false)
	if run, err := a.turns.Wait(ctx, "telegram:200::", other); !run || err != nil {
		t.Fatalf("another conversation: run %v, err %v", run, err)
	}
	if err := b.turns.Leave(ctx, key, first); err != nil {
		t.Fatal(err)
	}
	if r := <-gotSecond; !r.run || r.err != nil {
		t.Fatalf("the message sent second, after the first left: run %v, err %v", r.run, r.err)
	}
	if _, here, running, err := a.turns.Running(ctx, key); err != nil || !running || !here {
		t.Fatalf("replica a sees here %v running %v err %v; want its own turn running", here, running, err)
	}
}

// TestTheQueueLimitHoldsForTheDeployment fills a conversation's queue from two replicas: with a
// limit of one waiting message, a third message is refused on either replica while one runs and
// one waits, and admitted again once the running one left.
func TestTheQueueLimitHoldsForTheDeployment(t *testing.T) {
	st, _ := pgStore(t, "")
	db := pool(t, st)
	a, b := joinReplica(t, db, 6*time.Second), joinReplica(t, db, 6*time.Second)
	ctx := context.Background()
	const key = "discord:9:1:"
	now := time.Now()
	one := enter(t, a, Entry{Key: key, MessageID: "1", Sent: now}, 1, false)
	if run, err := a.turns.Wait(ctx, key, one); !run || err != nil {
		t.Fatalf("first message: run %v, err %v", run, err)
	}
	enter(t, b, Entry{Key: key, MessageID: "2", Sent: now.Add(time.Second)}, 1, false)
	for _, r := range []replica{a, b} {
		if _, admitted, err := r.turns.Enter(ctx, Entry{Key: key, MessageID: "3", Sent: now.Add(2 * time.Second)}, 1, false); err != nil || admitted {
			t.Fatalf("third message with one running and one waiting: admitted %v, err %v", admitted, err)
		}
	}
	if err := a.turns.Leave(ctx, key, one); err != nil {
		t.Fatal(err)
	}
	if _, admitted, err := a.turns.Enter(ctx, Entry{Key: key, MessageID: "3", Sent: now.Add(2 * time.Second)}, 1, false); err != nil || !admitted {
		t.Fatalf("third message after the first left: admitted %v, err %v", admitted, err)
	}
}

// TestANewerMessageInterruptsTheTurnAnotherReplicaRuns: under busy = "interrupt", a message
// reaching replica b while a runs the conversation's turn asks a to stop it (a Stop with
// Interrupt on the stop channel) and drops a message still waiting on a; the newer message runs
// once a leaves.
func TestANewerMessageInterruptsTheTurnAnotherReplicaRuns(t *testing.T) {
	st, _ := pgStore(t, "")
	db := pool(t, st)
	a, b := joinReplica(t, db, 6*time.Second), joinReplica(t, db, 6*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &logbuf.Buffer{}
	stops := make(chan Stop, 4)
	listened := make(chan error, 1)
	go func() {
		listened <- NewSignals(db, slog.New(slog.NewTextHandler(logs, nil))).ListenStops(ctx, "", func(s Stop) { stops <- s })
	}()
	wait.For(t, "the stop listener to listen", func() bool { return strings.Contains(logs.String(), "listening for stop requests") })

	const key = "web:7::"
	now := time.Now()
	running := enter(t, a, Entry{Key: key, UserID: "u", MessageID: "1", Sent: now}, 0, true)
	if run, err := a.turns.Wait(ctx, key, running); !run || err != nil {
		t.Fatalf("first message: run %v, err %v", run, err)
	}
	waiting := enter(t, a, Entry{Key: key, UserID: "u", MessageID: "2", Sent: now.Add(time.Second)}, 0, true)
	dropped := waitAsync(ctx, a, key, waiting)
	newest := enter(t, b, Entry{Key: key, UserID: "u", MessageID: "3", Sent: now.Add(2 * time.Second)}, 0, true)
	if s := <-stops; s != (Stop{Key: key, Interrupt: true}) {
		t.Fatalf("stop request %+v, want an interrupt of %s", s, key)
	}
	if r := <-dropped; r.run || r.err != nil {
		t.Fatalf("the superseded waiting message: run %v, err %v; want dropped", r.run, r.err)
	}
	gotNewest := waitAsync(ctx, b, key, newest)
	if _, ok := received(gotNewest); ok {
		t.Fatal("the newest message ran before the interrupted turn left")
	}
	if err := a.turns.Leave(ctx, key, running); err != nil {
		t.Fatal(err)
	}
	if r := <-gotNewest; !r.run || r.err != nil {
		t.Fatalf("the newest message: run %v, err %v", r.run, r.err)
	}
	cancel()
	<-listened
}

// TestAConversationHeldByADeadReplicaIsFreedWhenItIsTakenOver: a replica killed while running
// a conversation's turn never leaves; its expired lease alone does not free the conversation (the
// replica may be paused, or back from an outage any moment), and the other's message runs once a
// survivor takes the dead replica over (with no notification: the once-a-second look finds it);
// the takeover removed the dead rows.
func TestAConversationHeldByADeadReplicaIsFreedWhenItIsTakenOver(t *testing.T) {
	st, _ := pgStore(t, "")
	db := pool(t, st)
	ctx := context.Background()
	dead, err := Join(ctx, db, Options{TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	deadTurns := NewTurns(db, dead.ID(), nil)
	survivor := joinReplica(t, db, 6*time.Second)
	const key = "telegram:5::"
	held := enter(t, replica{m: dead, turns: deadTurns}, Entry{Key: key, MessageID: "1"}, 5, false)
	if run, err := deadTurns.Wait(ctx, key, held); !run || err != nil {
		t.Fatalf("dead replica's message: run %v, err %v", run, err)
	}
	next := enter(t, survivor, Entry{Key: key, MessageID: "2"}, 5, false)
	// Killed: the heartbeat stops, the row stays until its lease expires.
	dead.stop()
	<-dead.done
	wait.For(t, "the dead replica's lease to expire", func() bool {
		var expired bool
		err := db.QueryRowContext(ctx, `SELECT expires_at < now() FROM instances WHERE id = $1`, dead.ID()).Scan(&expired)
		return err == nil && expired
	})
	early, cancelEarly := context.WithTimeout(ctx, 2*time.Second)
	run, err := survivor.turns.Wait(early, key, next)
	cancelEarly()
	if run {
		t.Fatal("survivor's message ran while the holder's lease had merely expired: nobody took it over")
	}
	wait.For(t, "the survivor to take the dead replica over", func() bool {
		gone, err := TakeOver(ctx, db, survivor.m.ID(), 0, st.Turns)
		return err == nil && slices.Contains(gone, dead.ID())
	})
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if run, err := survivor.turns.Wait(wctx, key, next); !run || err != nil {
		t.Fatalf("survivor's message after the holder was taken over: run %v, err %v", run, err)
	}
	if n, err := survivor.turns.Purge(ctx); err != nil || n != 0 {
		t.Fatalf("purged %d rows (err %v) after the takeover, want none left", n, err)
	}
}
