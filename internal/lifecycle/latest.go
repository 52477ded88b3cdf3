package lifecycle

import (
	"context"
	"sync"
)

// Latest runs in the background the latest job given under each key: a job given again under
// its key (a reload's re-embedding with a new model) cancels the one it replaces, and starts
// once that one has returned, so two jobs of one key never run at once. Jobs given before the
// part runs wait for it. The zero value is not usable: use NewLatest.
type Latest struct {
	mu      sync.Mutex
	ctx     context.Context // the part's, while it runs; nil before
	ended   bool
	pending map[string]func(context.Context)
	running map[string]*latestJob
	wg      sync.WaitGroup
}

// latestJob is a started job: cancel stops it, done is closed when it returned.
type latestJob struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// NewLatest returns a Latest with no job.
func NewLatest() *Latest {
	return &Latest{pending: map[string]func(context.Context){}, running: map[string]*latestJob{}}
}

// Start makes fn the job of key: the one running under key is cancelled, and fn runs once it
// has returned (and once the part runs). A nil fn only cancels. It does not block; after the
// part ended it does nothing.
func (l *Latest) Start(key string, fn func(context.Context)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	if l.ctx == nil {
		if fn == nil {
			delete(l.pending, key)
		} else {
			l.pending[key] = fn
		}
		return
	}
	l.launch(key, fn)
}

// launch starts fn under key after the job it replaces; l.mu is held.
func (l *Latest) launch(key string, fn func(context.Context)) {
	prev := l.running[key]
	delete(l.running, key)
	if prev != nil {
		prev.cancel()
	}
	if fn == nil {
		return
	}
	ctx, cancel := context.WithCancel(l.ctx)
	j := &latestJob{cancel: cancel, done: make(chan struct{})}
	l.running[key] = j
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer close(j.done)
		defer cancel()
		if prev != nil {
			<-prev.done
		}
		if ctx.Err() == nil {
			fn(ctx)
		}
	}()
}

// Part is the background part that runs the jobs: it returns once ctx ends and every job has
// returned.
func (l *Latest) Part(name string) Part {
	return Part{Name: name, Run: func(ctx context.Context) error {
		l.mu.Lock()
		l.ctx = ctx
		for key, fn := range l.pending {
			l.launch(key, fn)
		}
		clear(l.pending)
		l.mu.Unlock()
		<-ctx.Done()
		l.mu.Lock()
		l.ended = true
		l.mu.Unlock()
		l.wg.Wait()
		return nil
	}}
}
