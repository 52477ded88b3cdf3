package tools

import (
	"context"
	"fmt"
	"sync"
)

// inflight counts the calls a Manager is running, from the start of their audit row to its
// finish, so that shutdown can wait for them (Manager.Wait). The zero value has none.
type inflight struct {
	mu   sync.Mutex
	n    int
	idle []chan struct{} // closed when n drops to zero
}

func (f *inflight) add() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
}

func (f *inflight) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 {
		for _, ch := range f.idle {
			close(ch)
		}
		f.idle = nil
	}
}

// Wait returns once no call is running: every call the Manager's turns started has ended and
// its audit row is finished. A turn cancelled at shutdown stops waiting for its calls at once,
// while each call ends on its own goroutine and then finishes its row; the store must stay open
// until then. It returns an error naming how many calls still run when ctx ends first (a tool
// that ignores its cancellation): their rows stay running until the next start marks them.
func (m *Manager) Wait(ctx context.Context) error {
	f := &m.calls
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	f.idle = append(f.idle, ch)
	f.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		f.mu.Lock()
		n := f.n
		f.mu.Unlock()
		return fmt.Errorf("tools: %d calls still running: %w", n, ctx.Err())
	}
}
