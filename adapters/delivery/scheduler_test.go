package delivery

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
)

var testChat = chat.Ref{Platform: "test", ChatID: "1"}

func grant(t *testing.T, s *scheduler, final bool) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	release, err := s.acquire(ctx, testChat, final, poolFree)
	if err != nil {
		t.Fatal(err)
	}
	return release
}

func TestFinalGoesAheadOfWaitingPreview(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScheduler(adapters.Limits{PerChat: adapters.Rate{N: 2, Per: 200 * time.Millisecond}}, nil, time.Millisecond)
		defer s.close()
		grant(t, s, true)()
		grant(t, s, true)() // the window is full

		order := make(chan string, 2)
		acquire := func(name string, final bool) {
			release, err := s.acquire(context.Background(), testChat, final, poolFree)
			if err != nil {
				order <- err.Error()
				return
			}
			release()
			order <- name
		}
		go acquire("preview", false)
		synctest.Wait() // the preview waits first
		go acquire("final", true)
		if first := <-order; first != "final" {
			t.Fatalf("%s went first; the final must go ahead of a waiting preview", first)
		}
		if second := <-order; second != "preview" {
			t.Fatalf("then %s", second)
		}
	})
}

func TestPreviewsLeaveRoomForFinals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScheduler(adapters.Limits{Global: adapters.Rate{N: 3, Per: time.Hour}}, nil, time.Millisecond)
		defer s.close()
		grant(t, s, true)()
		grant(t, s, true)()
		// A preview would take the window's last place: it waits for the whole window...
		ctx, cancel := context.WithTimeout(context.Background(), 59*time.Minute)
		defer cancel()
		if _, err := s.acquire(ctx, testChat, false, poolFree); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("preview: %v", err)
		}
		// ...while a final gets it at once.
		start := time.Now()
		grant(t, s, true)()
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("the final waited %s for the place kept for it", waited)
		}
	})
}

func TestRateLimitBlocksTheChat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScheduler(adapters.Limits{}, nil, time.Millisecond)
		defer s.close()
		const retryAfter = 150 * time.Millisecond
		s.block(testChat, false, retryAfter, poolFree)
		if !s.blocked(testChat) {
			t.Fatal("chat not blocked")
		}
		other := chat.Ref{Platform: "test", ChatID: "2"}
		start := time.Now()
		release, err := s.acquire(context.Background(), other, false, poolFree)
		if err != nil {
			t.Fatal(err)
		}
		release()
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("a 429 in one chat held up another chat for %s", waited)
		}
		grant(t, s, true)()
		if waited := time.Since(start); waited < retryAfter {
			t.Fatalf("the blocked chat went after %s, before retry_after (%s) passed", waited, retryAfter)
		}
	})
}

func TestCloseFailsWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScheduler(adapters.Limits{PerChat: adapters.Rate{N: 1, Per: time.Hour}}, nil, time.Millisecond)
		grant(t, s, true)()
		errc := make(chan error, 1)
		go func() {
			_, err := s.acquire(context.Background(), testChat, true, poolFree)
			errc <- err
		}()
		synctest.Wait() // the waiter is queued
		s.close()
		if err := <-errc; !errors.Is(err, ErrClosed) {
			t.Fatalf("waiter got %v", err)
		}
	})
}

// Previews of a stream move at a steady pace: spaced evenly over the window's places that are
// not kept for finals, never two quick steps and then a long stall while the window drains
// (Telegram's 3 per 3 s used to give 1.05 s, 2 s, 1.05 s, 2 s...).
func TestPreviewsAreSpacedEvenly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const slack = 50 * time.Millisecond
		s := newScheduler(adapters.Limits{PerChat: adapters.Rate{N: 3, Per: 3 * time.Second}}, nil, slack)
		defer s.close()
		var times []time.Time
		for range 8 {
			release, err := s.acquire(context.Background(), testChat, false, poolFree)
			if err != nil {
				t.Fatal(err)
			}
			times = append(times, time.Now())
			time.Sleep(10 * time.Millisecond) // the request's round trip
			release()
		}
		want := 1500*time.Millisecond + slack
		for i := 1; i < len(times); i++ {
			if gap := times[i].Sub(times[i-1]); gap > want {
				t.Errorf("preview %d waited %s after the previous one; the text stood still longer than the steady %s", i, gap, want)
			}
		}
	})
}
