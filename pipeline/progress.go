package pipeline

import (
	"sync"

	"relaybot/tools"
)

// progressFeed hands a turn's progress reports to its view without ever blocking the tools that
// send them (tools.ProgressFunc must not block: an MCP session's reader delivers them). Reports
// are merged per call until a goroutine applies them, so a flood of progress costs one view
// update per wake-up, and the delivery engine sends only what the next preview carries. That
// goroutine runs only while reports wait: a turn whose tools report nothing (most) holds none.
type progressFeed struct {
	apply func(ids []string, ps []tools.Progress) // may block (the view's lock)

	mu       sync.Mutex
	pending  map[string]tools.Progress // by call id
	order    []string
	draining bool // a goroutine is applying the pending reports
	stopped  bool
}

func newProgressFeed(apply func(ids []string, ps []tools.Progress)) *progressFeed {
	return &progressFeed{apply: apply}
}

// report takes a call's report; it never blocks.
func (f *progressFeed) report(call tools.Call, p tools.Progress) {
	f.mu.Lock()
	if f.stopped {
		f.mu.Unlock()
		return
	}
	if f.pending == nil {
		f.pending = map[string]tools.Progress{}
	}
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
	start := !f.draining
	f.draining = true
	f.mu.Unlock()
	if start {
		go f.drain()
	}
}

// drain applies the pending reports, in the order their calls first reported, until none
// wait or the feed is stopped.
func (f *progressFeed) drain() {
	for {
		f.mu.Lock()
		if f.stopped || len(f.order) == 0 {
			f.draining = false
			f.mu.Unlock()
			return
		}
		ids, pending := f.order, f.pending
		f.order, f.pending = nil, nil
		f.mu.Unlock()
		ps := make([]tools.Progress, len(ids))
		for i, id := range ids {
			ps[i] = pending[id]
		}
		f.apply(ids, ps)
	}
}

// stop drops the reports not applied yet and every later one.
func (f *progressFeed) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
}
