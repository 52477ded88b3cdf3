package coord

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"relaybot/internal/testkit/wait"
)

// TestAReplicaBackFromAPauseKeepsItsWorkUnlessItWasTakenOver pauses a replica (its heartbeat
// stops) until its lease expires, lets a survivor sweep, and resumes it: where the lease was still
// within the grace period, nothing was taken over and the work begun before the pause goes on
// under the same epoch; where the survivor took it over, the replica registers under a new epoch
// and everything begun before the pause is refused (ErrTakenOver), while new work goes through.
func TestAReplicaBackFromAPauseKeepsItsWorkUnlessItWasTakenOver(t *testing.T) {
	st, _ := pgStore(t, "")
	db := pool(t, st)
	ctx := context.Background()
	cases := []struct {
		name      string
		grace     time.Duration
		takenOver bool
	}{
		{"expired within the grace period", time.Hour, false},
		{"expired past the grace period", 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			paused, err := Join(ctx, db, Options{TTL: 600 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer paused.Leave(ctx)
			before := paused.Stamp(ctx)
			epoch := paused.Epoch()
			paused.stop() // paused: no renewal from now on
			<-paused.done
			wait.For(t, "the paused replica's lease to expire", func() bool {
				var expired bool
				err := db.QueryRowContext(ctx, `SELECT expires_at < now() FROM instances WHERE id = $1`, paused.ID()).Scan(&expired)
				return err == nil && expired
			})
			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			err = paused.Fence(short)
			cancel()
			if !errors.Is(err, ErrFenced) {
				t.Fatalf("fence of a replica whose lease expired: %v, want ErrFenced", err)
			}
			gone, err := TakeOver(ctx, db, "survivor", tc.grace, st.Turns)
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(gone, paused.ID()); got != tc.takenOver {
				t.Fatalf("taken over: %v, want %v", got, tc.takenOver)
			}
			if err := paused.renew(ctx); err != nil { // it wakes and renews
				t.Fatal(err)
			}
			err = paused.Fence(before)
			if tc.takenOver {
				if !errors.Is(err, ErrTakenOver) {
					t.Fatalf("work begun before a takeover: %v, want ErrTakenOver", err)
				}
				if paused.Epoch() == epoch {
					t.Fatal("the replica registered again under its old epoch")
				}
			} else if err != nil {
				t.Fatalf("work of a replica nobody took over, after it renewed: %v, want nil", err)
			}
			if err := paused.Fence(paused.Stamp(ctx)); err != nil {
				t.Fatalf("work begun after the renewal: %v, want nil", err)
			}
		})
	}
}
