package delivery

import (
	"context"
	"errors"
	"testing"
	"time"

	"relaybot/adapters"
)

var testChat = adapters.ChatRef{Platform: "test", ChatID: "1"}

func grant(t *testing.T, s *scheduler, final bool) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	release, err := s.acquire(ctx, testChat, final)
	if err != nil {
		t.Fatal(err)
	}
	return release
}

func TestFinalGoesAheadOfWaitingPreview(t *testing.T) {
	s := newScheduler(adapters.Limits{PerChat: adapters.Rate{N: 2, Per: 200 * time.Millisecond}}, nil, time.Millisecond)
	defer s.close()
	grant(t, s, true)()
	grant(t, s, true)() // the window is full

	order := make(chan string, 2)
	acquire := func(name string, final bool) {
		release, err := s.acquire(context.Background(), testChat, final)
		if err != nil {
			order <- err.Error()
			return
		}
		release()
		order <- name
	}
	go acquire("preview", false)
	// Make sure the preview waits first.
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		n := len(s.waiting)
		s.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("preview never queued")
		}
		time.Sleep(time.Millisecond)
	}
	go acquire("final", true)
	if first := <-order; first != "final" {
		t.Fatalf("%s went first; the final must go ahead of a waiting preview", first)
	}
	if second := <-order; second != "preview" {
		t.Fatalf("then %s", second)
	}
}

func TestPreviewsLeaveRoomForFinals(t *testing.T) {
	s := newScheduler(adapters.Limits{Global: adapters.Rate{N: 3, Per: time.Hour}}, nil, time.Millisecond)
	defer s.close()
	grant(t, s, true)()
	grant(t, s, true)()
	// A preview would take the window's last place: it must wait...
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.acquire(ctx, testChat, false); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("preview: %v", err)
	}
	// ...while a final gets it at once.
	grant(t, s, true)()
}

func TestRateLimitBlocksTheChat(t *testing.T) {
	s := newScheduler(adapters.Limits{}, nil, time.Millisecond)
	defer s.close()
	s.block(testChat, false, 150*time.Millisecond)
	if !s.blocked(testChat) {
		t.Fatal("chat not blocked")
	}
	other := adapters.ChatRef{Platform: "test", ChatID: "2"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	release, err := s.acquire(ctx, other, false)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if time.Since(start) > 100*time.Millisecond {
		t.Fatal("a 429 in one chat held up another chat")
	}
	grant(t, s, true)()
	if time.Since(start) < 150*time.Millisecond {
		t.Fatal("the blocked chat went before retry_after passed")
	}
}

func TestCloseFailsWaiters(t *testing.T) {
	s := newScheduler(adapters.Limits{PerChat: adapters.Rate{N: 1, Per: time.Hour}}, nil, time.Millisecond)
	grant(t, s, true)()
	errc := make(chan error, 1)
	go func() {
		_, err := s.acquire(context.Background(), testChat, true)
		errc <- err
	}()
	for {
		s.mu.Lock()
		n := len(s.waiting)
		s.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	s.close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("waiter got %v", err)
	}
}
