package tools

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"

	"relaybot/audit"
)

// ParallelMode says which rounds may run their calls side by side (tools.parallel).
type ParallelMode string

// Parallel modes. ParallelReadOnly runs a round side by side when every call of it is safe: a tool
// declared read-only (Spec.ReadOnly), or configured parallel (Spec.Parallel,
// ManagerOptions.ParallelTools). ParallelOff runs every round one call after another.
const (
	ParallelReadOnly ParallelMode = "read_only"
	ParallelOff      ParallelMode = "off"
)

// DefaultMaxParallel bounds the calls of a round running at once when ManagerOptions.MaxParallel
// is 0.
const DefaultMaxParallel = 4

// ErrSiblingFailed is why the calls of a parallel round still running are cancelled when one of
// them fails: the model gets every error of the round at once and decides what to run again.
var ErrSiblingFailed = errors.New("another call of the round failed")

func (m *Manager) setParallel(opts ManagerOptions) error {
	switch opts.Parallel {
	case "":
		m.parallel = ParallelReadOnly
	case ParallelReadOnly, ParallelOff:
		m.parallel = opts.Parallel
	default:
		return fmt.Errorf("tools: NewManager: parallel must be %q or %q, got %q", ParallelOff, ParallelReadOnly, opts.Parallel)
	}
	switch {
	case opts.MaxParallel < 0:
		return fmt.Errorf("tools: NewManager: max_parallel must not be negative, got %d", opts.MaxParallel)
	case opts.MaxParallel == 0:
		m.maxParallel = DefaultMaxParallel
	default:
		m.maxParallel = opts.MaxParallel
	}
	for _, g := range opts.ParallelTools {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("tools: NewManager: parallel_tools: %q is not a valid glob: %w", g, err)
		}
	}
	m.parallelTools = append([]string(nil), opts.ParallelTools...)
	return nil
}

// safe reports whether calls to the tool may run side by side with other safe calls.
func (m *Manager) safe(s Spec) bool {
	if s.ReadOnly || s.Parallel {
		return true
	}
	for _, g := range m.parallelTools {
		if ok, _ := path.Match(g, s.Name); ok {
			return true
		}
	}
	return false
}

// Parallel reports whether a round's calls run side by side: the round has more than one call,
// parallel rounds are on, and every call goes to a tool offered in this turn that is safe. A
// round with any other call runs one call after another.
func (t *Turn) Parallel(calls []Call) bool {
	if len(calls) < 2 || t.m.parallel == ParallelOff || t.m.maxParallel < 2 {
		return false
	}
	for _, c := range calls {
		i, ok := t.index[c.Name]
		if !ok || !t.offered[c.Name] || !t.m.safe(t.all[i].spec) {
			return false
		}
	}
	return true
}

// RunParallel runs a round's calls side by side, at most MaxParallel at once. The calls' audit
// rows are started in the model's order and their approvals asked one after another before any
// call runs; then the calls that may run start together. done is called once per call, with its
// index and outcome, as it ends (from the call's goroutine, one at a time). When a call that ran
// fails, the ones still running are cancelled with ErrSiblingFailed as the cause (their servers
// are told). RunParallel returns when every call has ended; the outcomes are in the model's order.
func (t *Turn) RunParallel(ctx context.Context, calls []Call, done func(i int, out Outcome)) []Outcome {
	t.m.calls.add()
	defer t.m.calls.done()
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ps := make([]*prepared, len(calls))
	for i, c := range calls {
		ps[i] = t.prepare(rctx, c)
	}
	outs := make([]Outcome, len(calls))
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex // serialises done
		slot = make(chan struct{}, t.m.maxParallel)
	)
	finish := func(i int) {
		out := t.complete(ps[i].ctx, ps[i])
		mu.Lock()
		defer mu.Unlock()
		outs[i] = out
		if done != nil {
			done(i, out)
		}
	}
	for i, p := range ps {
		if p.out != nil {
			finish(i)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case slot <- struct{}{}:
				defer func() { <-slot }()
			case <-p.ctx.Done():
			}
			var out Outcome
			failed := false
			if err := p.ctx.Err(); err != nil {
				out = Failed(audit.StatusCancelled, fmt.Errorf("tool %s was not run: %w", p.call.Name, context.Cause(p.ctx)))
			} else {
				out = t.invoke(p.ctx, p)
				failed = out.Status != audit.StatusOK && out.Status != audit.StatusCancelled
			}
			p.out = &out
			finish(i)
			if failed {
				// After the failed call is reported, so the chat shows the failure before the
				// siblings it cancels.
				cancel(fmt.Errorf("%w: %s", ErrSiblingFailed, p.call.Name))
			}
		}()
	}
	wg.Wait()
	return outs
}
