package coord

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/internal/testkit/wait"
)

// TestAShardGivenUpIsHandedOverOnceItsNewHolderServesIt: a replica holding both of two shards
// gives shard 1 up when a second replica joins; its held context says so (an
// *adapters.GivenUp, not a loss), the freed lock goes to the second replica, and HandedOver
// returns only once the second replica serves the shard (Serving), not while it merely holds
// it. With nobody serving, it gives up after its limit.
func TestAShardGivenUpIsHandedOverOnceItsNewHolderServesIt(t *testing.T) {
	ctx := context.Background()
	_, dsn := pgStore(t, "")
	join := func() []*ShardLease {
		t.Helper()
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		s := NewShards(db, "handoff")
		// Checks every 0.5 s, each ping allowed as long: at 0.1 s a ping on a loaded CI machine
		// timed out, and the lease's retake moved its connections under the test's feet.
		s.RetryEvery = 500 * time.Millisecond
		jctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		leases, err := s.Join(jctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		return leases
	}
	a := join()
	var helds []context.Context
	var releases []func()
	for _, l := range a {
		held, release, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		if err := l.Serving(ctx); err != nil {
			t.Fatalf("shard %d not marked served: %v", l.ID(), err)
		}
		helds, releases = append(helds, held), append(releases, release)
	}
	b := join()
	wait.For(t, "the first replica to give shard 1 up", func() bool { return helds[1].Err() != nil })
	var given *adapters.GivenUp
	if !errors.As(context.Cause(helds[1]), &given) {
		t.Fatalf("shard 1 ended with %v, want it given up", context.Cause(helds[1]))
	}
	if helds[0].Err() != nil {
		t.Fatalf("shard 0 ended too: %v", context.Cause(helds[0]))
	}
	// Released at once, as a holder that gave a lease up does: its own served lock goes with it.
	releases[1]()
	if err := a[1].Serving(ctx); err == nil {
		t.Error("a shard given up could still be marked served")
	}

	_, releaseB, err := b[1].Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseB()
	early, cancel := context.WithTimeout(ctx, 2*handOffCheck+handOffCheck/2)
	err = given.HandedOver(early)
	cancel()
	if err == nil {
		t.Fatal("handed over while the new holder held the shard but did not serve it yet")
	}
	if err := b[1].Serving(ctx); err != nil {
		t.Fatal(err)
	}
	if err := given.HandedOver(ctx); err != nil {
		t.Fatalf("not handed over once the new holder serves the shard: %v", err)
	}

	releaseB()
	err = b[1].lease.handedOver(ctx, 0, 3*handOffCheck/2)
	if err == nil || !strings.Contains(err.Error(), "did not serve it within") {
		t.Errorf("a hand-off nobody serves returned %v, want it to give up after its limit", err)
	}
}
