package coord

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrFenced is the cause a fence wait ends with when its context ends first: this replica had
// not renewed its lease within the fence deadline, and nothing it holds may act meanwhile.
var ErrFenced = errors.New("coord: this replica's lease is not confirmed (fenced)")

// ErrTakenOver refuses an action of work that this replica began under an epoch a survivor has
// since taken over: the work is someone else's now, and this replica drops it without a word.
var ErrTakenOver = errors.New("coord: the work was taken over by another replica while this one was cut off")

// epochKey is the context key of the epoch work was begun under (Member.Stamp).
type epochKey struct{}

// fence is a member's view of its own lease, on its own monotonic clock: open while the last
// renewal the database confirmed was sent less than the deadline ago, closed otherwise. The
// deadline is shorter than the lease, so a replica stops acting before any other could take its
// work over. It is asked before every action rather than kept by a timer: a process that was
// paused wakes with its timers late, and the first thing it asks must already be refused.
type fence struct {
	deadline time.Duration

	mu        sync.Mutex
	confirmed time.Time     // when the last confirmed renewal was sent (monotonic reading)
	since     time.Time     // when the fence last opened after being closed
	epoch     int64         // the epoch of this replica's registration
	changed   chan struct{} // closed and replaced at every confirmation
}

func newFence(deadline time.Duration, sent time.Time, epoch int64) *fence {
	return &fence{deadline: deadline, confirmed: sent, since: sent, epoch: epoch, changed: make(chan struct{})}
}

// confirm records a renewal the database confirmed, sent at sent, for epoch.
func (f *fence) confirm(sent time.Time, epoch int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.confirmed) >= f.deadline || epoch != f.epoch {
		f.since = sent
	}
	if sent.After(f.confirmed) {
		f.confirmed = sent
	}
	f.epoch = epoch
	close(f.changed)
	f.changed = make(chan struct{})
}

// open reports whether the fence is open now, and the epoch.
func (f *fence) open() (bool, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Since(f.confirmed) < f.deadline, f.epoch
}

// liveFor is how long the fence has been open without a break; 0 while it is closed.
func (f *fence) liveFor() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.confirmed) >= f.deadline {
		return 0
	}
	return time.Since(f.since)
}

// stamp returns ctx carrying the epoch of the registration now: work begun under it.
func (f *fence) stamp(ctx context.Context) context.Context {
	f.mu.Lock()
	epoch := f.epoch
	f.mu.Unlock()
	return context.WithValue(ctx, epochKey{}, epoch)
}

// wait returns nil once the fence is open, at once when it is; ErrTakenOver when ctx carries an
// epoch other than the registration's; ctx's cause, wrapping ErrFenced, when ctx ends first.
func (f *fence) wait(ctx context.Context) error {
	stamped, hasEpoch := ctx.Value(epochKey{}).(int64)
	for {
		f.mu.Lock()
		ok := time.Since(f.confirmed) < f.deadline
		epoch, ch := f.epoch, f.changed
		f.mu.Unlock()
		if hasEpoch && stamped != epoch {
			return ErrTakenOver
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(ErrFenced, context.Cause(ctx))
		case <-ch:
		}
	}
}
