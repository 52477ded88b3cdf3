package coord

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestFenceClosesAtItsDeadlineAndOpensOnTheNextConfirmedRenewal drives the fence on a fake
// clock: open until the deadline after the last confirmed renewal, closed after it (a waiter
// blocks, one whose context ends is refused with ErrFenced), open again the moment a renewal is
// confirmed, releasing the waiter.
func TestFenceClosesAtItsDeadlineAndOpensOnTheNextConfirmedRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFence(4*time.Second, time.Now(), 7)
		ctx := context.Background()
		time.Sleep(3999 * time.Millisecond)
		if err := f.wait(ctx); err != nil {
			t.Fatalf("fence before its deadline: %v, want open", err)
		}
		time.Sleep(time.Millisecond)
		short, cancel := context.WithTimeout(ctx, time.Second)
		err := f.wait(short)
		cancel()
		if !errors.Is(err, ErrFenced) {
			t.Fatalf("fence at its deadline: %v, want ErrFenced", err)
		}
		released := make(chan error, 1)
		go func() { released <- f.wait(ctx) }()
		synctest.Wait()
		select {
		case err := <-released:
			t.Fatalf("a waiter went through a closed fence: %v", err)
		default:
		}
		time.Sleep(10 * time.Second) // a long pause: no timer of the fence lets the waiter out
		synctest.Wait()
		select {
		case err := <-released:
			t.Fatalf("a waiter went through a closed fence after a pause: %v", err)
		default:
		}
		f.confirm(time.Now(), 7)
		if err := <-released; err != nil {
			t.Fatalf("waiter after a confirmed renewal: %v, want nil", err)
		}
		if got := f.liveFor(); got != 0 {
			t.Errorf("live for %v right after coming back, want 0", got)
		}
		time.Sleep(2 * time.Second)
		f.confirm(time.Now(), 7)
		if got := f.liveFor(); got != 2*time.Second {
			t.Errorf("live for %v after two seconds back, want 2s", got)
		}
	})
}

// TestFenceMeasuresFromWhenTheRenewalWasSent keeps a renewal whose answer came late from
// extending the fence past the deadline counted from when it was sent.
func TestFenceMeasuresFromWhenTheRenewalWasSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFence(4*time.Second, time.Now(), 1)
		sent := time.Now()
		time.Sleep(3 * time.Second) // the database answers three seconds later
		f.confirm(sent, 1)
		time.Sleep(time.Second)
		if ok, _ := f.open(); ok {
			t.Fatal("fence open four seconds after the renewal was sent")
		}
		// An older confirmation arriving late never moves the fence back.
		f.confirm(sent.Add(-time.Second), 1)
		if ok, _ := f.open(); ok {
			t.Fatal("a stale confirmation opened the fence")
		}
	})
}

// TestFenceRefusesWorkOfAnEpochTakenOver: work stamped before a takeover is refused for good,
// work begun after it goes through.
func TestFenceRefusesWorkOfAnEpochTakenOver(t *testing.T) {
	cases := []struct {
		name  string
		epoch int64
		want  error
	}{
		{"same epoch", 1, nil},
		{"taken over", 2, ErrTakenOver},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFence(4*time.Second, time.Now(), 1)
				old := f.stamp(context.Background())
				f.confirm(time.Now(), tc.epoch)
				if err := f.wait(old); !errors.Is(err, tc.want) && err != tc.want {
					t.Fatalf("work of epoch 1 after a renewal of epoch %d: %v, want %v", tc.epoch, err, tc.want)
				}
				if err := f.wait(f.stamp(context.Background())); err != nil {
					t.Fatalf("work begun now: %v, want nil", err)
				}
				if err := f.wait(context.Background()); err != nil {
					t.Fatalf("unstamped request: %v, want nil", err)
				}
			})
		})
	}
}
