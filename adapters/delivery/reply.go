package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"relaybot/adapters"
)

// sent is one message of a reply and the text it shows.
type sent struct {
	ref  adapters.MessageRef
	text string
}

// Reply is one answer streamed into a chat. It implements adapters.Reply.
//
// Previews go out from a goroutine that runs only while there is newer text to show; Finish
// stops it (waiting for a request already in flight) and delivers the final state itself.
type Reply struct {
	e    *Engine
	ctx  context.Context
	chat adapters.ChatRef
	opts adapters.SendOptions

	mu         sync.Mutex
	latest     string // newest preview text
	running    bool   // a preview worker runs; it reads latest each time it gets a slot
	stopWorker context.CancelFunc
	workerDone chan struct{}
	failed     string // preview text that failed for good; not retried until the text changes
	finishing  bool
	finished   bool

	typingOn      bool
	typingRunning bool
	typingWake    chan struct{}

	// Owned by the preview worker, then by Finish once the worker has stopped.
	msgs       []sent
	previewMax int
}

var _ adapters.Reply = (*Reply)(nil)

// Update shows text as the newest preview. It never blocks; previews that wait coalesce to the
// newest text, and text already shown is not sent again.
func (r *Reply) Update(text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finishing {
		return
	}
	r.latest = text
	if r.running {
		return
	}
	select {
	case <-r.e.done:
		return
	default:
	}
	r.running = true
	wctx, cancel := context.WithCancel(r.ctx)
	r.stopWorker = cancel
	r.workerDone = make(chan struct{})
	r.e.wg.Add(1)
	go r.previewLoop(wctx, r.workerDone)
}

// nextPreviewLocked returns the preview to show next, or false when there is none; with r.mu held.
func (r *Reply) nextPreviewLocked() (string, bool) {
	if r.finishing || strings.TrimSpace(r.latest) == "" {
		return "", false
	}
	text := Preview(r.latest, r.previewMax, r.e.limits.Unit)
	if text == r.failed || (len(r.msgs) > 0 && r.msgs[0].text == text) {
		return "", false
	}
	return text, true
}

func (r *Reply) previewLoop(ctx context.Context, done chan struct{}) {
	defer r.e.wg.Done()
	exit := func() {
		r.running = false
		r.stopWorker()
		close(done)
		r.mu.Unlock()
	}
	failures := 0
	for {
		r.mu.Lock()
		if _, ok := r.nextPreviewLocked(); !ok || ctx.Err() != nil {
			exit()
			return
		}
		r.mu.Unlock()

		release, err := r.e.sched.acquire(ctx, r.chat, false)
		if err != nil {
			r.mu.Lock()
			exit()
			return
		}
		// Coalesce: whatever is newest now is what goes out with this slot.
		r.mu.Lock()
		text, ok := r.nextPreviewLocked()
		r.mu.Unlock()
		if !ok {
			release()
			continue
		}
		err = r.showPreview(text)
		release()
		var rl *adapters.RateLimitError
		switch {
		case err == nil:
			failures = 0
		case errors.As(err, &rl):
			r.e.observe(Event{Kind: EventRateLimited, Chat: r.chat, RetryAfter: rl.RetryAfter})
			r.e.sched.block(r.chat, rl.Global, rl.RetryAfter)
		case errors.Is(err, adapters.ErrMessageGone):
			r.e.observe(Event{Kind: EventFallback, Chat: r.chat, Err: err})
			r.msgs = nil // the next preview starts a new message
		case errors.Is(err, adapters.ErrTooLong):
			// The platform counts differently than we do: show less.
			r.previewMax = max(r.previewMax*3/4, 64)
			if r.previewMax == 64 {
				r.mu.Lock()
				r.failed = text
				r.mu.Unlock()
			}
		case isTemporary(err, ctx):
			failures++
			r.e.observe(Event{Kind: EventRetry, Chat: r.chat, Err: err})
			if failures >= r.e.opts.Retry.MaxAttempts {
				r.e.observe(Event{Kind: EventFailed, Chat: r.chat, Err: err})
				r.e.log.Warn("preview delivery failing; waiting for newer text", "chat", r.chat.String(), "err", err)
				r.mu.Lock()
				r.failed = text
				r.mu.Unlock()
				failures = 0
				continue
			}
			if !r.e.backoff(ctx, failures) {
				continue // the loop head sees the stop
			}
		default:
			r.e.observe(Event{Kind: EventFailed, Chat: r.chat, Err: err})
			r.e.log.Warn("preview not delivered", "chat", r.chat.String(), "err", err)
			r.mu.Lock()
			r.failed = text
			r.mu.Unlock()
		}
	}
}

// showPreview sends or edits the preview message; one platform request.
func (r *Reply) showPreview(text string) error {
	// The request is not cancelled with the turn: a send cut off midway may still have posted a
	// message we would then not know about.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.e.opts.CallTimeout)
	defer cancel()
	if len(r.msgs) == 0 {
		ref, err := r.e.m.Send(cctx, r.chat, text, r.opts)
		if err != nil {
			return err
		}
		r.e.observe(Event{Kind: EventSend, Chat: r.chat})
		r.msgs = []sent{{ref: ref, text: text}}
		return nil
	}
	err := r.e.m.Edit(cctx, r.msgs[0].ref, text)
	if err != nil && !errors.Is(err, adapters.ErrNotModified) {
		return err
	}
	if err != nil {
		r.e.observe(Event{Kind: EventNotModified, Chat: r.chat})
	} else {
		r.e.observe(Event{Kind: EventEdit, Chat: r.chat})
	}
	r.msgs[0].text = text
	return nil
}

// isTemporary reports whether err may pass when retried: a platform 5xx or a request timeout
// (not the caller's own cancellation).
func isTemporary(err error, ctx context.Context) bool {
	if errors.Is(err, adapters.ErrTemporary) {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil
}

// Working turns the typing indicator on or off. It never blocks.
func (r *Reply) Working(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finishing {
		return
	}
	r.typingOn = on
	if r.typingRunning {
		select {
		case r.typingWake <- struct{}{}:
		default:
		}
		return
	}
	if !on {
		return
	}
	select {
	case <-r.e.done:
		return
	default:
	}
	r.typingRunning = true
	r.typingWake = make(chan struct{}, 1)
	r.e.wg.Add(1)
	go r.typingLoop(r.typingWake)
}

func (r *Reply) typingLoop(wake chan struct{}) {
	defer r.e.wg.Done()
	for {
		r.mu.Lock()
		if !r.typingOn || r.finishing || r.ctx.Err() != nil {
			r.typingRunning = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		if !r.e.sched.blocked(r.chat) {
			cctx, cancel := context.WithTimeout(r.ctx, r.e.opts.CallTimeout)
			err := r.e.m.Typing(cctx, r.chat)
			cancel()
			if err == nil {
				r.e.observe(Event{Kind: EventTyping, Chat: r.chat})
			} else {
				r.e.log.Debug("typing indicator not shown", "chat", r.chat.String(), "err", err)
			}
		}
		t := time.NewTimer(r.e.opts.TypingInterval)
		select {
		case <-t.C:
		case <-wake:
		case <-r.ctx.Done():
		case <-r.e.done:
			t.Stop()
			r.mu.Lock()
			r.typingRunning = false
			r.mu.Unlock()
			return
		}
		t.Stop()
	}
}

// Finish delivers the final text, split into as many messages as the platform's limit needs,
// then the files, and returns once everything is delivered or has definitively failed. 429s
// are waited out for as long as ctx allows; temporary failures are retried a bounded number of
// times. Finish may be called once.
func (r *Reply) Finish(ctx context.Context, text string, files []adapters.File) error {
	r.mu.Lock()
	if r.finishing {
		r.mu.Unlock()
		return errors.New("delivery: reply already finished")
	}
	r.finishing = true
	r.typingOn = false
	if r.typingRunning {
		select {
		case r.typingWake <- struct{}{}:
		default:
		}
	}
	running, done := r.running, r.workerDone
	if running {
		r.stopWorker()
	}
	r.mu.Unlock()
	if running {
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("delivery: final text for %s: %w", r.chat, ctx.Err())
		}
	}
	err := r.deliverFinal(ctx, text, files)
	r.mu.Lock()
	r.finished = true
	r.mu.Unlock()
	if err != nil {
		return fmt.Errorf("delivery: final text for %s: %w", r.chat, err)
	}
	return nil
}

func (r *Reply) deliverFinal(ctx context.Context, text string, files []adapters.File) error {
	lim := r.e.limits
	parts := Split(text, lim.MaxLen, lim.Unit)
	for i := 0; i < len(parts); i++ {
		part := parts[i]
		var err error
		if i < len(r.msgs) {
			if r.msgs[i].text == part {
				continue // identical text is never sent again
			}
			err = r.finalEdit(ctx, i, part)
		} else {
			err = r.finalSend(ctx, part)
		}
		if errors.Is(err, adapters.ErrTooLong) {
			// The platform counts differently than we do: cut this part smaller and go on.
			sub := Split(part, Length(part, lim.Unit)*3/4, lim.Unit)
			if len(sub) < 2 {
				return err
			}
			parts = append(parts[:i], append(sub, parts[i+1:]...)...)
			i--
			continue
		}
		if err != nil {
			return err
		}
	}
	for _, f := range files {
		opts := adapters.SendOptions{}
		if len(r.msgs) == 0 {
			opts = r.opts
		}
		err := r.call(ctx, func(cctx context.Context) error {
			_, err := r.e.m.SendFiles(cctx, r.chat, []adapters.File{f}, "", opts)
			return err
		})
		if err != nil {
			return fmt.Errorf("file %q: %w", f.Name, err)
		}
		r.e.observe(Event{Kind: EventFiles, Chat: r.chat, Final: true})
	}
	return nil
}

// finalEdit puts part into message i; a message that cannot be edited any more is replaced by
// a new message carrying the part.
func (r *Reply) finalEdit(ctx context.Context, i int, part string) error {
	err := r.call(ctx, func(cctx context.Context) error {
		return r.e.m.Edit(cctx, r.msgs[i].ref, part)
	})
	switch {
	case err == nil:
		r.e.observe(Event{Kind: EventEdit, Chat: r.chat, Final: true})
		r.msgs[i].text = part
		return nil
	case errors.Is(err, adapters.ErrNotModified):
		r.e.observe(Event{Kind: EventNotModified, Chat: r.chat, Final: true})
		r.msgs[i].text = part
		return nil
	case errors.Is(err, adapters.ErrMessageGone):
		r.e.observe(Event{Kind: EventFallback, Chat: r.chat, Final: true, Err: err})
		r.e.log.Debug("message gone; sending the text as a new message", "chat", r.chat.String(), "err", err)
		ref, err := r.sendFinalPart(ctx, part, i == 0)
		if err != nil {
			return err
		}
		r.msgs[i] = sent{ref: ref, text: part}
		return nil
	}
	return err
}

func (r *Reply) finalSend(ctx context.Context, part string) error {
	ref, err := r.sendFinalPart(ctx, part, len(r.msgs) == 0)
	if err != nil {
		return err
	}
	r.msgs = append(r.msgs, sent{ref: ref, text: part})
	return nil
}

// sendFinalPart posts part of the final text as a new message; the first message of a reply
// carries the reply's send options (the reference to the user's message, the Stop control).
func (r *Reply) sendFinalPart(ctx context.Context, part string, first bool) (adapters.MessageRef, error) {
	opts := adapters.SendOptions{}
	if first {
		opts = r.opts
	}
	var ref adapters.MessageRef
	err := r.call(ctx, func(cctx context.Context) error {
		var err error
		ref, err = r.e.m.Send(cctx, r.chat, part, opts)
		return err
	})
	if err != nil {
		return adapters.MessageRef{}, err
	}
	r.e.observe(Event{Kind: EventSend, Chat: r.chat, Final: true})
	return ref, nil
}

// call runs one final-priority platform request: it waits for a slot, waits out 429s for their
// scope (as long as ctx allows) and retries temporary failures with backoff. Other errors,
// ErrNotModified and ErrMessageGone included, are returned for the caller to act on.
func (r *Reply) call(ctx context.Context, fn func(context.Context) error) error {
	attempt := 0
	for {
		release, err := r.e.sched.acquire(ctx, r.chat, true)
		if err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, r.e.opts.CallTimeout)
		err = fn(cctx)
		cancel()
		release()
		var rl *adapters.RateLimitError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &rl):
			r.e.observe(Event{Kind: EventRateLimited, Chat: r.chat, Final: true, RetryAfter: rl.RetryAfter})
			r.e.sched.block(r.chat, rl.Global, rl.RetryAfter)
		case isTemporary(err, ctx):
			attempt++
			if attempt >= r.e.opts.Retry.MaxAttempts {
				r.e.observe(Event{Kind: EventFailed, Chat: r.chat, Final: true, Err: err})
				return fmt.Errorf("after %d attempts: %w", attempt, err)
			}
			r.e.observe(Event{Kind: EventRetry, Chat: r.chat, Final: true, Err: err})
			if !r.e.backoff(ctx, attempt) {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return ErrClosed
			}
		default:
			return err
		}
	}
}
