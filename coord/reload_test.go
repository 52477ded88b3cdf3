package coord

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"relaybot/internal/testkit/wait"
)

// TestAReplicaThatMissedAReloadReadsItsConfigAgain: no announcement reaches the second replica
// (as when its listener was reconnecting), yet once the first runs another config digest, the
// second is told to read its file again, once for that digest however many heartbeats pass;
// when its own digest moves (its reload took the new file) and the first changes again, it is
// told again.
func TestAReplicaThatMissedAReloadReadsItsConfigAgain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, _ := pgStore(t, "")
	db := pool(t, st)
	first, second := newTestReplica(t, db, storeOf(st)), newTestReplica(t, db, storeOf(st))
	for r, d := range map[*Replica]string{first: "aaaaaaaaaaaa", second: "bbbbbbbbbbbb"} {
		if err := r.SetConfigDigest(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var told []string
	calls := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(told)
	}
	done := make(chan error, 1)
	go func() {
		done <- second.ListenReloads(ctx, func(from string) {
			mu.Lock()
			defer mu.Unlock()
			told = append(told, from)
		})
	}()
	wait.For(t, "the second replica told the first runs another config", func() bool { return len(calls()) > 0 })
	heartbeat := func() time.Time {
		var at time.Time
		if err := db.QueryRowContext(ctx, `SELECT heartbeat_at FROM instances WHERE id = $1`, second.member.ID()).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	for range 3 {
		last := heartbeat()
		wait.For(t, "the second replica's next heartbeat", func() bool { return heartbeat().After(last) })
	}
	if got := calls(); !slices.Equal(got, []string{first.member.ID()}) {
		t.Fatalf("over several heartbeats the second replica was told %q, want the first's id once", got)
	}
	// The reload took the first's file: the second runs its digest; then the first changes again.
	for r, d := range map[*Replica]string{second: "aaaaaaaaaaaa", first: "cccccccccccc"} {
		if err := r.SetConfigDigest(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "the second replica told of the first's next config", func() bool { return len(calls()) == 2 })
	if got := calls(); got[1] != first.member.ID() {
		t.Errorf("told by %q, want the first replica", got[1])
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("ListenReloads ended with %v", err)
	}
}
