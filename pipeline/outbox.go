package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"relaybot/adapters"
)

// outbox bounds the delivery of answers and notices: while the pipeline runs, a delivery waits
// for the platform's rate limits as long as they last; once the shutdown's grace period is
// over, for ShutdownDeliverWait more at most.
type outbox struct {
	// ctx ends ShutdownDeliverWait after the grace period is over, never while the pipeline runs.
	ctx  context.Context
	stop context.CancelCauseFunc
	wait time.Duration

	mu      sync.Mutex
	drained bool // Shutdown has seen every turn end
}

func newOutbox(wait time.Duration) *outbox {
	ctx, stop := context.WithCancelCause(context.Background())
	return &outbox{ctx: ctx, stop: stop, wait: wait}
}

// context returns the context a final answer or a notice is delivered with. Once Shutdown has
// seen every turn end, a new delivery (a notice to a message that came too late) may wait
// ShutdownDeliverWait at most.
func (o *outbox) context() (context.Context, context.CancelFunc) {
	o.mu.Lock()
	drained := o.drained
	o.mu.Unlock()
	if drained {
		return context.WithTimeout(o.ctx, o.wait)
	}
	return context.WithCancel(o.ctx)
}

// giveUpAfter ends the deliveries still waiting for the platform ShutdownDeliverWait from now
// (they are saved as not delivered); the returned function cancels that.
func (o *outbox) giveUpAfter() (cancel func() bool) {
	return time.AfterFunc(o.wait, func() {
		o.stop(fmt.Errorf("%w: answers still waiting for the platform %s after the grace period", ErrShutdown, o.wait))
	}).Stop
}

// drain records that every turn has ended; deliveries from now on are bounded by
// ShutdownDeliverWait.
func (o *outbox) drain(closeNow bool) {
	if closeNow {
		o.stop(ErrShutdown)
	}
	o.mu.Lock()
	o.drained = true
	o.mu.Unlock()
}

// notice sends a short message, logging a failure. Like a final answer, it waits for the
// platform's rate limits as long as the pipeline runs.
func (o *outbox) notice(out adapters.Responder, text string, log *slog.Logger) {
	ctx, cancel := o.context()
	defer cancel()
	if err := out.Notice(ctx, text); err != nil {
		log.Warn("pipeline: notice not delivered", "err", err)
	}
}
