package pipeline

import (
	"sync"

	"relaybot/tools"
)

// progressFeed hands a turn's progress reports to its view without ever blocking the tools that
// send them (tools.ProgressFunc must not block: an MCP session's reader delivers them). Reports
// are merged per call until the feed's goroutine applies them, so a flood of progress costs one
// view update per wake-up, and the delivery engine sends only what the next preview carries.
type progressFeed struct {
	mu      sync.Mutex
	pending map[string]tools.Progress // by call id
	order   []string
	wake    chan struct{}
}

func newProgressFeed() *progressFeed {
	return &progressFeed{pending: map[string]tools.Progress{}, wake: make(chan struct{}, 1)}
}

// report takes a call's report; it never blocks.
func (f *progressFeed) report(call tools.Call, p tools.Progress) {
	f.mu.Lock()
	old, seen := f.pending[call.ID]
	if !seen {
		f.order = append(f.order, call.ID)
	}
	if p.Total <= 0 { // a message alone keeps the count reported before it
		p.Done, p.Total = old.Done, old.Total
	}
	if p.Message == "" {
		p.Message = old.Message
	}
	f.pending[call.ID] = p
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// run applies the pending reports with apply (which may block, the view's lock) until done is
// closed.
func (f *progressFeed) run(done <-chan struct{}, apply func(ids []string, ps []tools.Progress)) {
	for {
		select {
		case <-done:
			return
		case <-f.wake:
		}
		f.mu.Lock()
		ids, pending := f.order, f.pending
		f.order, f.pending = nil, map[string]tools.Progress{}
		f.mu.Unlock()
		ps := make([]tools.Progress, len(ids))
		for i, id := range ids {
			ps[i] = pending[id]
		}
		apply(ids, ps)
	}
}
