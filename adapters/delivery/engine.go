// Package delivery streams replies into chats for every platform: one Engine per platform
// connection paces every send and edit of every reply in flight against the platform's budgets
// (per chat, per group, global), coalesces previews to the newest text, puts final messages
// ahead of previews, rides out 429s, retries temporary failures, and splits long final answers
// into as many messages as the platform's length limit needs, so the final text always arrives
// whole, once and in order. The adapters' other requests (questions with buttons, answers to
// presses and commands) go through the same budgets and retry stage with Engine.Do: no
// platform request retries a 429 anywhere else.
package delivery

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
)

// RetryPolicy bounds the retries of temporary failures (5xx, timeouts). 429s are not retries:
// they wait for the platform's retry_after and do not count against MaxAttempts.
type RetryPolicy struct {
	MaxAttempts int           // tries per request, first included; default 5
	BaseDelay   time.Duration // wait before the first retry, doubled each time; default 500ms
	MaxDelay    time.Duration // longest wait between retries; default 10s
}

// Options tune an Engine. The zero value works.
type Options struct {
	Logger *slog.Logger
	Retry  RetryPolicy
	// TypingInterval is how often the typing indicator is renewed while a reply is working
	// (platforms expire it after about 5 s); default 4s.
	TypingInterval time.Duration
	// CallTimeout bounds one platform request; a request that runs out counts as a temporary
	// failure. Default 30s.
	CallTimeout time.Duration
	// Slack widens every budget window a little, so requests that arrive late at the platform
	// still fit its windows; default 50ms.
	Slack time.Duration
	// DraftInterval is the shortest time between two drafts in a chat (adapters.Drafter): the
	// next draft goes once the previous one was answered and at least this long after it was
	// made; 429s on drafts widen it (drafts.go). Default 250ms.
	DraftInterval time.Duration
	// Paid, when set, is the platform's paid broadcast: a bot-wide budget apart from
	// Limits.Global for the requests that carry it, which the Messenger marks as paid on every
	// new message it posts (Send, SendFiles, adapters.VoiceSender's SendVoice,
	// adapters.RichMessenger's SendRich) and on nothing else. Those draw on Paid; drafts,
	// edits, deletions, typing and Engine.Do's requests stay within Limits.Global (Telegram's
	// free 30 a second). Each budget has its own spacing, finals first within it. Zero: one
	// budget, Limits.Global, for everything.
	Paid adapters.Rate
	// IsGroup reports whether a chat is a group, which then also draws on Limits.PerGroup.
	// Nil means no chat is a group.
	IsGroup func(chat.Ref) bool
	// Observer receives an Event for every platform request outcome (for metrics); may be nil.
	Observer Observer
	// SharedChats, when several replicas deliver for the bot, shares each chat's own budgets
	// with the other replicas delivering to the same chat; nil paces every chat in this
	// process's memory alone.
	SharedChats SharedChats
	// ShareCheck is how often an engine with SharedChats asks whether another replica entered
	// a chat it paces alone, and leaves the chats that went quiet; default 2s.
	ShareCheck time.Duration
	// ShareLinger is how long a chat stays entered after its last request; default 10s.
	ShareLinger time.Duration
	// InFlight, when several replicas serve the bot, records the message each reply is
	// streaming into, for a survivor to mark should this process die; nil records nothing.
	InFlight InFlight
	// Fence, when several replicas serve the bot, is asked right before every platform request:
	// it waits while this replica's lease is not confirmed and refuses a request of work another
	// replica took over (the error is returned, the request never made). Nil makes every request.
	Fence func(ctx context.Context) error
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Retry.MaxAttempts <= 0 {
		o.Retry.MaxAttempts = 5
	}
	if o.Retry.BaseDelay <= 0 {
		o.Retry.BaseDelay = 500 * time.Millisecond
	}
	if o.Retry.MaxDelay <= 0 {
		o.Retry.MaxDelay = 10 * time.Second
	}
	if o.TypingInterval <= 0 {
		o.TypingInterval = 4 * time.Second
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 30 * time.Second
	}
	if o.Slack <= 0 {
		o.Slack = 50 * time.Millisecond
	}
	if o.DraftInterval <= 0 {
		o.DraftInterval = 250 * time.Millisecond
	}
	if o.ShareCheck <= 0 {
		o.ShareCheck = 2 * time.Second
	}
	if o.ShareLinger <= 0 {
		o.ShareLinger = 10 * time.Second
	}
}

// EventKind names what happened to one platform request.
type EventKind int

// Kinds of Event.
const (
	EventSend        EventKind = iota // a new message was posted
	EventEdit                         // a message was edited
	EventFiles                        // files were posted, on their own or with a message of the final text
	EventNotModified                  // an edit found the text already there (counts as delivered)
	EventRateLimited                  // the platform answered 429
	EventRetry                        // a temporary failure is being retried
	EventFallback                     // a message could not be edited any more; a new one replaces it
	EventFailed                       // a request failed for good
	EventTyping                       // a typing indicator was shown
	EventDraft                        // a draft was shown (adapters.Drafter)
	// EventInteraction: a user's press or command was answered (Engine.Do, ClassInteraction).
	EventInteraction
	// EventLookup: a request the platform counts against the bot's global limit, no message
	// in a chat, was answered (Engine.Do, ClassBotWide).
	EventLookup
)

var eventNames = [...]string{"send", "edit", "files", "not_modified", "rate_limited", "retry", "fallback", "failed", "typing", "draft", "interaction", "lookup"}

// String returns the event's metric name ("send", "edit", "rate_limited", ...).
func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown"
}

// Event describes the outcome of one platform request.
type Event struct {
	Kind       EventKind
	Chat       chat.Ref
	Final      bool          // the request carried final text (not a preview)
	RetryAfter time.Duration // for EventRateLimited
	Err        error         // for EventRetry, EventFailed, EventFallback
	// At is when the request ended (when the engine saw its outcome); Took how long the request
	// itself ran, zero when unknown (a 429's wait is RetryAfter, from At on).
	At   time.Time
	Took time.Duration
}

// Observer receives delivery events. Observe is called synchronously from delivery goroutines
// and must not block. ctx is the context the reply was started with (Engine.NewReply): the
// turn's, with what the turn's observers put in it (a trace span); context.Background for a
// request of no reply.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// Engine delivers every reply of one platform connection through one shared scheduler.
type Engine struct {
	m      adapters.Messenger
	limits adapters.Limits
	opts   Options
	sched  *scheduler
	log    *slog.Logger

	// draftsOff: the platform refused a draft; replies stream by edits from then on.
	draftsOff atomic.Bool
	draftSeq  atomic.Int64
	// richOff holds the chats (chat.Ref.String()) that refused a rich message: their finals go
	// out as plain messages from then on.
	richOff  sync.Map
	replySeq atomic.Int64 // names replies for Options.InFlight

	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
	mu        sync.Mutex // orders spawn's wg.Add before Close's wg.Wait
	closed    bool
}

// New returns an Engine that sends through m within limits.
func New(m adapters.Messenger, limits adapters.Limits, opts Options) *Engine {
	opts.defaults()
	e := &Engine{
		m:      m,
		limits: limits,
		opts:   opts,
		sched:  newScheduler(limits, opts.IsGroup, opts.Slack).withPaid(opts.Paid),
		log:    opts.Logger,
		done:   make(chan struct{}),
	}
	e.sched.draftEvery = opts.DraftInterval
	if opts.SharedChats != nil {
		c := &chatShares{s: e.sched, sc: opts.SharedChats, log: opts.Logger, isGroup: opts.IsGroup,
			linger: opts.ShareLinger, done: e.done, chats: map[string]*chatShare{}}
		e.sched.shares = c
		e.spawn(func() { c.watch(opts.ShareCheck) })
	}
	return e
}

// Limits returns the platform limits the engine paces by.
func (e *Engine) Limits() adapters.Limits { return e.limits }

// NewReply starts a reply in chat. ctx bounds its previews and typing indicator; Finish takes
// its own context. opts apply to the first message of the reply.
func (e *Engine) NewReply(ctx context.Context, chat chat.Ref, opts adapters.SendOptions) *Reply {
	r := &Reply{
		e:          e,
		ctx:        ctx,
		chat:       chat,
		opts:       opts,
		previewMax: e.limits.MaxLen,
	}
	if d, ok := e.m.(adapters.Drafter); ok && d.DraftsIn(chat) {
		r.drafter = d
		r.draftBase = e.draftSeq.Add(1) << 16
	}
	return r
}

// Notice sends a one-off message at final priority, split if too long, and returns once it is
// delivered or has definitively failed.
func (e *Engine) Notice(ctx context.Context, chat chat.Ref, text string, opts adapters.SendOptions) error {
	return e.NewReply(ctx, chat, opts).Finish(ctx, text, nil)
}

// Close stops the engine: requests still waiting for a slot fail with ErrClosed, and Close
// returns once every delivery goroutine has ended.
func (e *Engine) Close() {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		close(e.done)
		e.mu.Unlock()
		e.sched.close()
	})
	e.wg.Wait()
}

// spawn runs fn on a goroutine that Close waits for, unless the engine is closed (then it
// returns false and fn does not run).
func (e *Engine) spawn(fn func()) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		fn()
	}()
	return true
}

// hold counts one piece of work that Close waits for until it calls e.wg.Done, unless the
// engine is closed (then it returns false).
func (e *Engine) hold() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.wg.Add(1)
	return true
}

// fenced asks Options.Fence, when set, whether a request of ctx's work may be made now.
func (e *Engine) fenced(ctx context.Context) error {
	if e.opts.Fence == nil {
		return nil
	}
	return e.opts.Fence(ctx)
}

func (e *Engine) observe(ctx context.Context, ev Event) {
	if e.opts.Observer != nil {
		if ev.At.IsZero() {
			ev.At = time.Now()
		}
		e.opts.Observer.Observe(ctx, ev)
	}
}

// observe reports an event of the reply's requests, with the reply's context.
func (r *Reply) observe(ev Event) {
	r.e.observe(r.ctx, ev)
}

// refuseDrafts turns drafts off for the engine's life after the platform refused one; said once.
func (e *Engine) refuseDrafts(chat chat.Ref, err error) {
	if e.draftsOff.CompareAndSwap(false, true) {
		e.log.Warn("drafts refused; streaming by edits from now on", "chat", chat.String(), "err", err)
	}
}

// refuseRich remembers that chat refused a rich message; said once per chat.
func (e *Engine) refuseRich(chat chat.Ref, err error) {
	if _, had := e.richOff.LoadOrStore(chat.String(), true); !had {
		e.log.Warn("rich message refused; this chat gets plain messages from now on", "chat", chat.String(), "err", err)
	}
}

// richRefused reports whether chat refused a rich message before.
func (e *Engine) richRefused(chat chat.Ref) bool {
	_, ok := e.richOff.Load(chat.String())
	return ok
}

// backoff waits before retry number attempt (1-based); false when ctx or the engine ended first.
func (e *Engine) backoff(ctx context.Context, attempt int) bool {
	return e.sleep(ctx, e.backoffDelay(attempt)) == nil
}

// backoffDelay is the wait before retry number attempt (1-based): Retry.BaseDelay, doubled for
// each retry before, at most Retry.MaxDelay.
func (e *Engine) backoffDelay(attempt int) time.Duration {
	d := e.opts.Retry.BaseDelay << (attempt - 1)
	if d > e.opts.Retry.MaxDelay || d <= 0 {
		d = e.opts.Retry.MaxDelay
	}
	return d
}
