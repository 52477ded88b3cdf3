package tools

import (
	"context"
	"strings"
	"sync"
)

// Progress is what a running call says about how far it got: MCP's notifications/progress, or a
// log message the server sent about the call (then only Message is set).
type Progress struct {
	// Done and Total count the work as the tool does (Total 0: unknown).
	Done, Total float64
	// Message says what the call is doing now; empty when the report carries none.
	Message string
}

// Percent returns how far the call got in whole percent, and false when the total is unknown.
func (p Progress) Percent() (int, bool) {
	if p.Total <= 0 {
		return 0, false
	}
	pc := int(p.Done / p.Total * 100)
	return min(max(pc, 0), 100), true
}

// Running is what a running call may do besides return: report progress and ask the user a
// question. Loaders get one with every Invocation (never nil when the Manager calls) and may use
// it from any goroutine while the call runs; it is inert once the call has returned.
type Running interface {
	// Progress reports how far the call got. It never blocks: a flood of reports only changes
	// what the next status update shows.
	Progress(p Progress)
	// Elicit asks the user of the turn a question for the call and waits for the answer (MCP
	// elicitation). It returns an answer whose Action is accept, decline or cancel, never an
	// error the caller must map: a chat that cannot ask, a timeout and the end of the turn come
	// back as cancel, schema violations that persist as decline.
	Elicit(ctx context.Context, q Elicitation) ElicitAnswer
}

// ProgressFunc receives the progress of the turn's running calls, by call; it must not block (it
// is called from the tools' goroutines, concurrently).
type ProgressFunc func(call Call, p Progress)

// SetProgress gives the turn the place its calls' progress goes (the status lines). Call it
// before Execute.
func (t *Turn) SetProgress(f ProgressFunc) {
	t.progress = f
}

// running is the Running of one call: it forwards progress to the turn and keeps the last
// message for the audit row, and asks the turn's elicitor.
type running struct {
	t    *Turn
	call Call
	tool string
	srv  string

	mu    sync.Mutex
	ended bool
	done  float64 // the highest progress reported
	last  string  // the last progress message
	asked []Asked // the questions asked, for the audit row
}

func newRunning(t *Turn, call Call, server string) *running {
	return &running{t: t, call: call, tool: call.Name, srv: server}
}

func (r *running) Progress(p Progress) {
	p.Message = strings.TrimSpace(p.Message)
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return
	}
	if p.Done > 0 || p.Total > 0 {
		// Progress only grows (MCP says it must): a report that arrives after a later one
		// (streamable HTTP delivers a session's notifications on two streams) is stale.
		if p.Done < r.done {
			r.mu.Unlock()
			return
		}
		r.done = p.Done
	}
	if p.Message != "" {
		r.last = p.Message
	}
	r.mu.Unlock()
	if f := r.t.progress; f != nil {
		f(r.call, p)
	}
}

// end makes the Running inert and returns what the audit row keeps of it.
func (r *running) end() (last string, asked []Asked) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = true
	return r.last, r.asked
}

func (r *running) note(a Asked) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, a)
}
