package delivery

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"relaybot/adapters"
)

// typingCounter is a recorder that counts typing indicators.
type typingCounter struct {
	recorder
	typing atomic.Int32
}

func (m *typingCounter) Typing(context.Context, adapters.ChatRef) error {
	m.typing.Add(1)
	return nil
}

// Working(true) while the indicator already shows (the pipeline calls it for every tool that
// starts) must not send it again: only the renewal interval or an off-then-on change does.
func TestWorkingRepeatsDoNotResendTyping(t *testing.T) {
	m := &typingCounter{recorder: recorder{first: make(chan struct{})}}
	e := New(m, adapters.Limits{MaxLen: 100}, Options{TypingInterval: time.Hour})
	defer e.Close()
	r := e.NewReply(context.Background(), adapters.ChatRef{Platform: "test", ChatID: "1"}, adapters.SendOptions{})
	r.Working(true)
	waitUntil(t, func() bool { return m.typing.Load() == 1 })
	for range 5 {
		r.Working(true)
	}
	// Nothing should follow; give a wrong resend time to show.
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) && m.typing.Load() == 1 {
		time.Sleep(5 * time.Millisecond)
	}
	if n := m.typing.Load(); n != 1 {
		t.Fatalf("%d typing requests for one stretch of work, want 1", n)
	}
	// Off and on again (text was shown in between) shows it again.
	r.Working(false)
	r.Working(true)
	waitUntil(t, func() bool { return m.typing.Load() >= 2 })
	if err := r.Finish(context.Background(), "done", nil); err != nil {
		t.Fatal(err)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
