package coord

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

// holdersOf selects the pg_locks rows of the sessions holding advisory lock $1 (a bigint key is
// split into classid, the high half, and objid).
const holdersOf = `locktype = 'advisory' AND granted AND objsubid = 1
	AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND ((classid::bigint << 32) | objid::bigint) = $1::bigint`

// TestALeaseHasOneHolderAndPassesOnWhenItsHolderDies runs the poller lease in two "replicas"
// (two connection pools): the second waits while the first holds it; when the first one's
// database session dies (as when its process is killed) the first sees the lease lost and the
// second takes it.
func TestALeaseHasOneHolderAndPassesOnWhenItsHolderDies(t *testing.T) {
	ctx := context.Background()
	_, dsn := pgStore(t, "")
	pools := make([]*sql.DB, 3)
	for i := range pools {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		pools[i] = db
	}
	a, b := NewLease(pools[0], dsn), NewLease(pools[1], dsn)
	a.RetryEvery, b.RetryEvery = 100*time.Millisecond, 100*time.Millisecond

	heldA, releaseA, err := a.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseA()
	type acquired struct {
		held    context.Context
		release func()
	}
	gotB := make(chan acquired, 1)
	bctx, cancelB := context.WithCancel(ctx)
	defer cancelB()
	go func() {
		held, release, err := b.Acquire(bctx)
		if err == nil {
			gotB <- acquired{held, release}
		}
	}()

	// The second replica cannot hold it while the first does.
	var holders int
	if err := pools[2].QueryRow(`SELECT COUNT(*) FROM pg_locks WHERE `+holdersOf, a.key).Scan(&holders); err != nil {
		t.Fatal(err)
	}
	if holders != 1 {
		t.Fatalf("%d sessions hold the lease, want 1", holders)
	}
	select {
	case <-gotB:
		t.Fatal("the second replica took the lease while the first held it")
	default:
	}

	// The first replica's session dies.
	if _, err := pools[2].Exec(`SELECT pg_terminate_backend(pid) FROM pg_locks WHERE `+holdersOf, a.key); err != nil {
		t.Fatal(err)
	}
	select {
	case <-heldA.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the first replica was not told it lost the lease")
	}
	select {
	case b := <-gotB:
		defer b.release()
		if b.held.Err() != nil {
			t.Fatal("the second replica's lease ended at once")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the second replica did not take the lease after the first one's session died")
	}
}
