package coord

import (
	"context"
	"slices"
	"testing"
	"time"

	"relaybot/internal/testkit/wait"
)

// TestTheLeasesOfAReplicaTakenOverAreFreedAtOnce: a replica holding the poller lease and a
// Discord shard is paused (its heartbeat stops; its connections stay open, as PostgreSQL sees a
// SIGSTOPped process). Once a survivor takes it over, both locks are free for the survivor at
// once, not when TCP gives up; the paused replica, waking, finds its leases lost and does not take
// the shard's lock again under its new registration.
func TestTheLeasesOfAReplicaTakenOverAreFreedAtOnce(t *testing.T) {
	st, _ := pgStore(t, "")
	db := pool(t, st)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	paused, err := Join(ctx, db, Options{TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	poller := NewLease(db, "telegram poller test")
	poller.member, poller.RetryEvery = paused, 200*time.Millisecond
	pollHeld, releasePoll, err := poller.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer releasePoll()
	shards := NewShards(db, "discord test")
	shards.member, shards.RetryEvery = paused, 200*time.Millisecond
	leases, err := shards.Join(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	shardHeld, releaseShard, err := leases[0].Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseShard()

	paused.stop() // paused: no renewal, its sessions (and locks) stay
	<-paused.done
	survivor := joinReplica(t, db, 6*time.Second)
	wait.For(t, "the survivor to take the paused replica over", func() bool {
		gone, err := TakeOver(ctx, db, survivor.m.ID(), 0, st.Turns)
		return err == nil && slices.Contains(gone, paused.ID())
	})
	holders := func(key int64) int {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_locks WHERE `+holdersOf, key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	wait.For(t, "the paused replica's poller and shard locks to be free after the takeover", func() bool {
		return holders(poller.key) == 0 && holders(leases[0].lease.key) == 0
	})

	// Waking: the renewal finds the row gone and registers again; the leases are lost and the
	// shard is not taken again for work that is no longer this replica's.
	if err := paused.renew(ctx); err != nil {
		t.Fatal(err)
	}
	for what, held := range map[string]context.Context{"poller": pollHeld, "shard": shardHeld} {
		select {
		case <-held.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("the woken replica still holds its %s lease", what)
		}
	}
	if n := holders(leases[0].lease.key); n != 0 {
		t.Fatalf("the woken replica took its shard's lock again (%d holders)", n)
	}
	taker := NewLease(db, "telegram poller test")
	taker.member = survivor.m
	conn, ok, err := taker.try(ctx, survivor.m.Epoch())
	if err != nil || !ok {
		t.Fatalf("the survivor could not take the poller lease: ok %v, err %v", ok, err)
	}
	discard(conn)
}
