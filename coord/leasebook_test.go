package coord

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"relaybot/internal/testkit/wait"
)

// heldLease is a lease that is held at once, until lose is called or it is released.
type heldLease struct{ lose context.CancelFunc }

func (l *heldLease) Acquire(ctx context.Context) (context.Context, func(), error) {
	held, cancel := context.WithCancel(ctx)
	l.lose = cancel
	return held, cancel, nil
}

// TestTheAdminPagesSeeWhoHoldsALease: a replica holding a lease is recorded as its holder until
// it releases the lease or loses it.
func TestTheAdminPagesSeeWhoHoldsALease(t *testing.T) {
	ctx := context.Background()
	st, _ := pgStore(t, "")
	book := NewLeaseBook(pool(t, st))
	holders := func() []string {
		t.Helper()
		got, err := book.Holders(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return got["replica-a"]
	}
	for _, end := range []string{"released", "lost"} {
		t.Run(end, func(t *testing.T) {
			inner := &heldLease{}
			l := recordedLease{Lease: inner, name: "telegram poller 01", instance: "replica-a", book: book, log: slog.New(slog.DiscardHandler)}
			_, release, err := l.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := holders(); !slices.Equal(got, []string{"telegram poller 01"}) {
				t.Fatalf("while held, replica-a is shown holding %v", got)
			}
			if end == "released" {
				release()
			} else {
				inner.lose()
				defer release()
			}
			wait.For(t, "the lease to be shown free once "+end, func() bool { return len(holders()) == 0 })
		})
	}
}

// TestTheLeaseBookNamesTheLatestHolder: a lease taken over is recorded under its new holder, and
// the old holder's late release leaves that record alone.
func TestTheLeaseBookNamesTheLatestHolder(t *testing.T) {
	ctx := context.Background()
	st, _ := pgStore(t, "")
	book := NewLeaseBook(pool(t, st))
	for _, step := range []struct{ instance, name string }{{"a", "telegram poller"}, {"a", "discord shard 0"}, {"b", "telegram poller"}} {
		if err := book.Hold(ctx, step.instance, step.name); err != nil {
			t.Fatal(err)
		}
	}
	if err := book.Release(ctx, "a", "telegram poller"); err != nil {
		t.Fatal(err)
	}
	got, err := book.Holders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got["a"], []string{"discord shard 0"}) || !slices.Equal(got["b"], []string{"telegram poller"}) {
		t.Errorf("lease holders = %v, want a: discord shard 0, b: telegram poller", got)
	}
}
