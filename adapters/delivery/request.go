package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
)

// Class says which of the engine's budgets a request made with Engine.Do draws on, and so
// where it queues.
type Class int

// Classes of Request.
const (
	// ClassMessage is a message the bot posts or edits in a chat outside a streamed reply: a
	// question with buttons, its edit when it is decided or closes. It draws on the chat's
	// budgets (per chat, per group, global; shared with the other replicas delivering to the
	// chat when Options.SharedChats is set) at final priority: ahead of every preview, in turn
	// with the final messages of replies. It carries no paid broadcast, so it draws on the
	// free bot-wide budget (Limits.Global) even when the engine has Options.Paid.
	ClassMessage Class = iota
	// ClassInteraction is an answer to a user's press or command that the platform budgets
	// apart from the chat's messages: Discord's interaction callbacks and interaction webhooks
	// (bound to the interaction's token, counted against neither the channel's budget nor the
	// bot's global one), Telegram's answerCallbackQuery (not a message in the chat). It takes
	// no place in the engine's windows, so nothing queued there delays it: Discord drops an
	// interaction whose first answer has not come within 3 seconds. A 429 waits the request's
	// own retry_after; one that says the whole bot is limited also blocks the global budget
	// for the requests that draw on it.
	ClassInteraction
	// ClassBotWide is a request that is no message in a chat but that the platform counts
	// against the bot's global limit: Discord's channel and member lookups, its gateway's
	// address, the registration of commands. It waits for a place in the free bot-wide
	// budget (Limits.Global, divided among the replicas by ShareGlobal) at final priority,
	// ahead of every preview, and draws on no chat's budget: Request.Chat may be the zero Ref.
	// A 429 for the request's own route waits its retry_after here; one that says the whole
	// bot is limited blocks the global budget for every request that draws on it.
	ClassBotWide
)

// Request is one platform request made with Engine.Do.
type Request struct {
	Chat  chat.Ref
	Class Class
	// Kind is the Event observed when the request succeeds: EventSend for a new message,
	// EventEdit for an edit, EventInteraction for an answer to an interaction, EventLookup
	// for a request of ClassBotWide.
	Kind EventKind
	// Run makes the request: exactly one platform call, reporting failures with the error
	// types of package adapters. Do calls it once per try.
	Run func(ctx context.Context) error
	// Detached lets a try that has begun run to its answer (bounded by Options.CallTimeout)
	// when ctx ends meanwhile; ctx still ends the waits before and between tries. A post cut
	// off midway may have posted a message whose id the caller then never learns: a question
	// whose turn ended as it went out would keep its buttons.
	Detached bool
}

// Do makes req through the engine's one retry stage, the stage the final messages of replies
// go through: it waits for req's place in the budgets of its class, bounds each try by
// Options.CallTimeout, waits out 429s for their scope (retry_after) for as long as ctx allows,
// and retries temporary failures with backoff (Options.Retry). A 429 whose wait would outlast
// ctx's deadline is returned at once, as no try could follow it. Other errors, ErrNotModified
// and ErrMessageGone included, are returned for the caller to act on; ErrClosed once the
// engine is closed. A request whose ctx has already ended is not made.
func (e *Engine) Do(ctx context.Context, req Request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var took time.Duration
	if err := e.do(ctx, req.Chat, req.Class, req.Detached, &took, poolFree, req.Run); err != nil {
		return err
	}
	e.observe(ctx, Event{Kind: req.Kind, Chat: req.Chat, Final: true, Took: took})
	return nil
}

// Place waits for one request's place in the budgets of class, as Do does before each try, for
// a request made outside Do: one a library makes on its own (discordgo asks Discord for the
// gateway's address before each connection). It returns the func to call once the request's
// answer has come back, or ctx's error or ErrClosed. It neither retries nor observes: the
// caller owns the request and what its answer says.
func (e *Engine) Place(ctx context.Context, c chat.Ref, class Class) (release func(), err error) {
	return e.place(ctx, c, class, poolFree)
}

// do is Do without the event of success: the replies' final messages observe what they
// delivered themselves. It takes Request's fields one by one: fn, only called, then stays off
// the heap (a struct would carry it along with the chat, which the events keep). took is set
// to how long the latest try ran; p is the bot-wide pool the request draws on.
func (e *Engine) do(ctx context.Context, c chat.Ref, class Class, detached bool, took *time.Duration, p pool, fn func(context.Context) error) error {
	tryCtx := ctx
	if detached {
		tryCtx = context.WithoutCancel(ctx)
	}
	attempt := 0
	for {
		release, err := e.place(ctx, c, class, p)
		if err != nil {
			return err
		}
		if err := e.fenced(ctx); err != nil {
			release()
			return err
		}
		cctx, cancel := context.WithTimeout(tryCtx, e.opts.CallTimeout)
		begun := time.Now()
		err = fn(cctx)
		*took = time.Since(begun)
		cancel()
		release()
		var rl *adapters.RateLimitError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &rl):
			e.observe(ctx, Event{Kind: EventRateLimited, Chat: c, Final: true, RetryAfter: rl.RetryAfter, Took: *took})
			if dl, ok := ctx.Deadline(); ok && time.Now().Add(rl.RetryAfter).After(dl) {
				return fmt.Errorf("%w (its wait outlasts the request's deadline)", err)
			}
			if class == ClassMessage || rl.Global {
				e.sched.block(c, rl.Global, rl.RetryAfter, p)
			}
			if class == ClassInteraction || class == ClassBotWide && !rl.Global {
				// Its own limit, which no bucket of the engine holds: wait for it here.
				if err := e.sleep(ctx, rl.RetryAfter); err != nil {
					return err
				}
			}
		case isTemporary(err, ctx):
			attempt++
			if attempt >= e.opts.Retry.MaxAttempts {
				e.observe(ctx, Event{Kind: EventFailed, Chat: c, Final: true, Err: err, Took: *took})
				return fmt.Errorf("after %d attempts: %w", attempt, err)
			}
			e.observe(ctx, Event{Kind: EventRetry, Chat: c, Final: true, Err: err, Took: *took})
			if err := e.sleep(ctx, e.backoffDelay(attempt)); err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// place waits for a request's place in the budgets of its class and returns the func that
// gives it back once the request's answer has come.
func (e *Engine) place(ctx context.Context, c chat.Ref, class Class, p pool) (func(), error) {
	switch class {
	case ClassMessage:
		return e.sched.acquire(ctx, c, true, p)
	case ClassBotWide:
		return e.sched.acquireLocal(ctx, c, true, true, p)
	}
	select {
	case <-e.done:
		return nil, ErrClosed
	default:
		return func() {}, nil
	}
}

// sleep waits d; it returns ctx's error or ErrClosed when either ends first.
func (e *Engine) sleep(ctx context.Context, d time.Duration) error {
	return sleepUntilDone(ctx, e.done, d)
}

// sleepUntilDone waits d; it returns ctx's error, or ErrClosed when done (the engine's) is
// closed first.
func sleepUntilDone(ctx context.Context, done <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-done:
		return ErrClosed
	}
}
