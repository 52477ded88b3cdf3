package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
)

// sent is one message of a reply and the text it shows.
type sent struct {
	ref  adapters.MessageRef
	text string
	// done: the message's part of a long answer is complete; previews never edit it again.
	done bool
	// controls: the message shows a Stop control that its next Edit takes off.
	controls bool
}

// Reply is one answer streamed into a chat. It implements adapters.Reply.
//
// Previews go out from a goroutine that runs only while there is newer text to show; Finish
// stops it (waiting for a request already in flight) and delivers the final state itself.
type Reply struct {
	e    *Engine
	ctx  context.Context
	chat chat.Ref
	opts adapters.SendOptions
	id   string // for Options.InFlight; set by the first message shown

	mu         sync.Mutex
	latest     string // newest preview text
	running    bool   // a preview worker runs; it reads latest each time it gets a slot
	stopWorker context.CancelFunc
	workerDone chan struct{}
	failed     string // preview text that failed for good; not retried until the text changes
	finishing  bool
	finished   bool

	// The typing indicator: a goroutine only while a request shows it (typingRunning), a timer
	// between renewals (typingTimer), so a reply that waits costs no parked goroutine.
	typingOn      bool
	typingRunning bool
	typingAgain   bool // turned on again while a request was in flight: show it once more
	typingTimer   *time.Timer

	// Drafts (nil drafter: the chat streams by edits), under mu. The chat shows draftText as
	// the draft of part draftPart, or no draft when draftText is empty; persist asks the
	// worker to turn that draft into a message before a tool runs.
	// took is how long the latest request of call ran; only the goroutine finishing the reply
	// (the one running call) reads and writes it.
	took time.Duration

	drafter   adapters.Drafter
	draftBase int64
	draftPart int
	draftText string
	persist   bool

	// Owned by the preview worker, then by Finish once the worker has stopped.
	msgs       []sent
	previewMax int
	roll       rolling

	// opens counts the messages this reply started as previews in the paid pool, whose later
	// text will be edits in the free pool (pools.go); given back when it ends.
	opens atomic.Int32
}

// rolling is how a streamed reply has rolled over so far: its first frozen messages hold the
// source text up to consumed (which read srcDone when they were frozen), and the next message
// continues there in fence state st. A text that changes under frozen messages (a tool line
// folding away) sets aligned: previews then split the whole text, and the final pass edits
// the messages whose text really changed.
type rolling struct {
	frozen   int
	consumed int
	srcDone  string
	st       fence
	aligned  bool
	// The live part's size at its last preview, and how much it grew since the one before:
	// a part about to outgrow its message by the next preview is finished a little early, so
	// the final text needs one request, not two.
	liveIdx, lastLive, grew int
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
	r.startWorkerLocked()
}

// startWorkerLocked starts the preview worker unless it runs; with r.mu held. The worker runs
// on a goroutine only while it has a request to make: while it waits for a call slot, the
// scheduler holds its ticket and starts a goroutine when the slot is granted. Close waits for
// the worker however it waits (Engine.hold).
func (r *Reply) startWorkerLocked() {
	if r.running || !r.e.hold() {
		return
	}
	wctx, cancel := context.WithCancel(r.ctx)
	done := make(chan struct{})
	r.running = true
	r.stopWorker = cancel
	r.workerDone = done
	go r.previewNext(wctx, done, 0)
}

// endWorkerLocked ends the preview worker; with r.mu held, which it releases.
func (r *Reply) endWorkerLocked(done chan struct{}) {
	r.running = false
	r.stopWorker()
	close(done)
	r.mu.Unlock()
	r.e.wg.Done()
}

// step is the next preview request: message i of the reply shows text; done when its part of
// the answer is complete, so previews never edit it again.
type step struct {
	i     int
	text  string
	done  bool
	draft bool // show text as the part's draft instead of a message
	// Where a done part ends in src (rolling); nil when previews split the whole text.
	cut  *rollPart
	base int
	src  string
}

// parts divides src into the reply's messages of at most max units: the frozen messages as
// they are, then the rest rolled over message by message. anticipate finishes the last part
// early when it would outgrow its message by the next preview. cuts and base describe the
// parts after the frozen ones (offsets from base in src); cuts is nil when the text changed
// under frozen messages and src is split as a whole instead.
func (r *Reply) parts(src string, max int, anticipate bool) (texts []string, cuts []rollPart, base int) {
	unit := r.e.limits.Unit
	if r.roll.aligned || !strings.HasPrefix(src, r.roll.srcDone) {
		r.roll.aligned = true
		return SplitLines(src, max, r.e.limits.MaxLines, unit), nil, 0
	}
	base = r.roll.consumed
	if base == 0 {
		base = len(src) - len(strings.TrimLeft(src, "\n"))
	}
	live := src[base:]
	lines := r.e.limits.MaxLines
	cuts = rollParts(live, max, lines, unit, r.roll.st)
	if margin := min(r.roll.grew*5/4, max/2); anticipate && len(cuts) == 1 && margin > 0 &&
		Length(cuts[0].text, unit)+margin > max && Length(cuts[0].text, unit) >= max/2 {
		if first, ok := rollCut(live, max-margin, lines, unit, r.roll.st); ok {
			more := rollParts(live[first.end:], max, lines, unit, first.next)
			for i := range more {
				more[i].end += first.end
			}
			cuts = append([]rollPart{first}, more...)
		}
	}
	for _, m := range r.msgs[:min(r.roll.frozen, len(r.msgs))] {
		texts = append(texts, m.text)
	}
	for _, c := range cuts {
		texts = append(texts, c.text)
	}
	return texts, cuts, base
}

// freeze marks message i done; when it is the next message of a rolling reply, the source it
// holds is frozen with it.
func (r *Reply) freeze(i int, cut *rollPart, base int, src string) {
	r.msgs[i].done = true
	if cut == nil || r.roll.aligned || i != r.roll.frozen {
		return
	}
	r.roll.frozen++
	r.roll.consumed = base + cut.end
	r.roll.srcDone = src[:r.roll.consumed]
	r.roll.st = cut.next
}

// draftsLocked reports whether the live part streams as a draft; with r.mu held.
func (r *Reply) draftsLocked() bool { return r.drafter != nil && !r.e.draftsOff.Load() }

// nextStepLocked returns the preview request to make next, or false when there is none; with
// r.mu held. A text longer than a message rolls over: the message is finished at a clean
// boundary (Split's cut, fences closed and reopened) and streaming continues in a new message.
// A finished message that needs no request (its text and controls are already right) is
// marked done here without one.
func (r *Reply) nextStepLocked() (step, bool) {
	if r.finishing || strings.TrimSpace(r.latest) == "" {
		return step{}, false
	}
	src := r.latest
	// A live part streamed as a draft is not finished early: a draft is no message that could
	// overflow, and the final's parts go out as sends the chat's burst takes at once. Finishing
	// it early would split an answer that fits one message (3,200 characters cut at 2,047
	// once previews came every second).
	parts, cuts, base := r.parts(src, r.previewMax, !r.draftsLocked())
	for i, part := range parts {
		last := i == len(parts)-1
		var cut *rollPart
		if cuts != nil && i >= r.roll.frozen && i-r.roll.frozen < len(cuts) {
			c := cuts[i-r.roll.frozen]
			cut = &c
		}
		if i < len(r.msgs) {
			m := &r.msgs[i]
			if m.done {
				continue
			}
			if m.text == part && (last || !m.controls) {
				if last {
					return step{}, false
				}
				r.freeze(i, cut, base, src)
				continue
			}
		}
		if part == r.failed {
			return step{}, false
		}
		if last && r.draftsLocked() {
			shown := r.draftText != "" && r.draftPart == i
			if r.persist && shown {
				return step{i: i, text: part}, true // a message now: a tool may outlast the draft
			}
			r.persist = false
			if shown && r.draftText == part {
				return step{}, false
			}
			return step{i: i, text: part, draft: true}, true
		}
		return step{i: i, text: part, done: !last, cut: cut, base: base, src: src}, true
	}
	return step{}, false
}

// previewNext asks for a slot for the next preview, or ends the worker when there is nothing
// newer to show. failures counts the temporary failures in a row so far.
func (r *Reply) previewNext(ctx context.Context, done chan struct{}, failures int) {
	r.mu.Lock()
	st, ok := r.nextStepLocked()
	if !ok || ctx.Err() != nil {
		r.endWorkerLocked(done)
		return
	}
	first := len(r.msgs) == 0 && r.draftText == "" // the reply shows nothing yet
	r.mu.Unlock()
	p, draft := r.stepPool(st), st.draft
	then := func(release func(), err error) {
		r.previewGranted(ctx, done, failures, p, draft, release, err)
	}
	if draft {
		r.e.sched.acquireDraftFunc(ctx, r.chat, first, then)
		return
	}
	r.e.sched.acquireFunc(ctx, r.chat, false, first, p, then)
}

// previewGranted makes the preview request the slot in pool p (a draft's slot when draft) was
// granted for, then asks for the next.
func (r *Reply) previewGranted(ctx context.Context, done chan struct{}, failures int, p pool, draft bool, release func(), err error) {
	if err != nil {
		r.mu.Lock()
		r.endWorkerLocked(done)
		return
	}
	// Coalesce: whatever is newest now is what goes out with this slot.
	r.mu.Lock()
	st, ok := r.nextStepLocked()
	r.mu.Unlock()
	if !ok || r.stepPool(st) != p || st.draft != draft { // nothing to show, or another kind of request now
		release()
		r.previewNext(ctx, done, failures)
		return
	}
	if p == poolPaid {
		r.opened()
	}
	err = r.showPreview(st)
	release()
	var rl *adapters.RateLimitError
	switch {
	case err == nil:
		failures = 0
	case errors.As(err, &rl):
		r.observe(Event{Kind: EventRateLimited, Chat: r.chat, RetryAfter: rl.RetryAfter})
		if st.draft && !rl.Global {
			r.e.sched.blockDrafts(r.chat, rl.RetryAfter)
		} else {
			r.e.sched.block(r.chat, rl.Global, rl.RetryAfter, p)
		}
	case st.draft && errors.Is(err, adapters.ErrDraftsRefused):
		// The next slot shows the same text by Send and edits; the draft text is not lost.
		r.observe(Event{Kind: EventFallback, Chat: r.chat, Err: err})
		r.e.refuseDrafts(r.chat, err)
	case errors.Is(err, adapters.ErrMessageGone):
		r.observe(Event{Kind: EventFallback, Chat: r.chat, Err: err})
		r.msgs = r.msgs[:min(st.i, len(r.msgs))] // the next preview starts a new message
	case errors.Is(err, adapters.ErrTooLong):
		// The platform counts differently than we do: show less.
		r.previewMax = max(r.previewMax*3/4, 64)
		if r.previewMax == 64 {
			r.mu.Lock()
			r.failed = st.text
			r.mu.Unlock()
		}
	case isTemporary(err, ctx):
		failures++
		r.observe(Event{Kind: EventRetry, Chat: r.chat, Err: err})
		if failures >= r.e.opts.Retry.MaxAttempts {
			r.observe(Event{Kind: EventFailed, Chat: r.chat, Err: err})
			r.e.log.Warn("preview delivery failing; waiting for newer text", "chat", r.chat.String(), "err", err)
			r.mu.Lock()
			r.failed = st.text
			r.mu.Unlock()
			failures = 0
			break
		}
		r.e.backoff(ctx, failures) // a stop meanwhile is seen by previewNext
	default:
		r.observe(Event{Kind: EventFailed, Chat: r.chat, Err: err})
		r.e.log.Warn("preview not delivered", "chat", r.chat.String(), "err", err)
		r.mu.Lock()
		r.failed = st.text
		r.mu.Unlock()
	}
	r.previewNext(ctx, done, failures)
}

// partOptions are the options of message i of a reply posted while it streams: the first
// carries the reply's options, later ones name the message the reply answers instead of
// referencing it; only a message still streaming (live) asks for the Stop control.
func (r *Reply) partOptions(i int, live bool) adapters.SendOptions {
	o := adapters.SendOptions{Answers: r.opts.ReplyTo}
	if i == 0 {
		o = r.opts
	}
	o.Stoppable = r.opts.Stoppable && live
	return o
}

// showPreview makes one platform request for st: a new message, a streaming edit that keeps
// the message's controls, or the edit that finishes the message (and takes its controls off).
func (r *Reply) showPreview(st step) error {
	if err := r.e.fenced(r.ctx); err != nil {
		return err
	}
	// The request is not cancelled with the turn: a send cut off midway may still have posted a
	// message we would then not know about.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.e.opts.CallTimeout)
	defer cancel()
	begun := time.Now()
	se, streamEdits := r.e.m.(adapters.StreamEditor)
	if !st.done {
		units := Length(st.text, r.e.limits.Unit)
		if st.i == r.roll.liveIdx {
			r.roll.grew = max(units-r.roll.lastLive, 0)
		} else {
			r.roll.grew = 0
		}
		r.roll.liveIdx, r.roll.lastLive = st.i, units
	}
	if st.draft {
		if err := r.drafter.Draft(cctx, r.chat, r.draftBase+int64(st.i)+1, st.text, r.opts.Stoppable); err != nil {
			return err
		}
		r.observe(Event{Kind: EventDraft, Chat: r.chat, Took: time.Since(begun)})
		r.mu.Lock()
		r.draftPart, r.draftText = st.i, st.text
		r.mu.Unlock()
		return nil
	}
	if st.i >= len(r.msgs) {
		opts := r.partOptions(st.i, !st.done)
		ref, err := r.e.m.Send(cctx, r.chat, st.text, opts)
		if err != nil {
			return err
		}
		r.observe(Event{Kind: EventSend, Chat: r.chat, Took: time.Since(begun)})
		r.msgs = append(r.msgs, sent{ref: ref, text: st.text, controls: opts.Stoppable && streamEdits})
		r.showing(ref, st.text)
		if st.done {
			r.freeze(st.i, st.cut, st.base, st.src)
		}
		r.mu.Lock()
		r.draftText, r.persist = "", false // a message from the bot ends the chat's draft
		r.mu.Unlock()
		return nil
	}
	m := &r.msgs[st.i]
	var err error
	if m.controls && !st.done {
		err = se.EditStreaming(cctx, m.ref, st.text)
	} else {
		err = r.e.m.Edit(cctx, m.ref, st.text)
	}
	if err != nil && !errors.Is(err, adapters.ErrNotModified) {
		return err
	}
	if err != nil {
		r.observe(Event{Kind: EventNotModified, Chat: r.chat, Took: time.Since(begun)})
	} else {
		r.observe(Event{Kind: EventEdit, Chat: r.chat, Took: time.Since(begun)})
	}
	m.text = st.text
	r.showing(m.ref, st.text)
	if st.done {
		m.controls = false
		r.freeze(st.i, st.cut, st.base, st.src)
	}
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
	changed := r.typingOn != on
	r.typingOn = on
	if on && r.drafter != nil && r.draftText != "" {
		// A tool may run longer than the platform shows a draft: make it a message first.
		r.persist = true
		r.startWorkerLocked()
	}
	// Only turning it on shows it at once: the indicator already shows, and renewing it on
	// every call (one per tool started) would spend the platform's budget on repeats. Off
	// needs no request (each renewal checks first), and sending for it too sent the indicator
	// twice when off and on came back to back.
	if !on {
		return
	}
	if r.typingRunning {
		if changed {
			r.typingAgain = true
		}
		return
	}
	if r.typingTimer != nil {
		if !changed || !r.typingTimer.Stop() {
			return // it shows, or the renewal is firing now
		}
		r.typingTimer = nil
	}
	r.typingRunning = r.e.spawn(r.showTyping)
}

// typingSlot takes the global place of one typing indicator, unless a 429 holds the chat.
func (r *Reply) typingSlot() (release func(), ok bool) {
	if r.e.sched.blocked(r.chat) {
		return nil, false
	}
	return r.e.sched.tryGlobal()
}

// showTyping shows the typing indicator (again, if it was turned on again meanwhile) and arms
// the timer of its renewal.
func (r *Reply) showTyping() {
	for {
		r.mu.Lock()
		if !r.typingOn || r.finishing || r.ctx.Err() != nil {
			r.typingRunning = false
			r.mu.Unlock()
			return
		}
		r.typingAgain = false
		r.mu.Unlock()
		// The indicator counts against the bot's global limit (Discord counts every request):
		// it takes a place in the global window, and is skipped when none is free now.
		if release, ok := r.typingSlot(); ok && r.e.fenced(r.ctx) == nil {
			cctx, cancel := context.WithTimeout(r.ctx, r.e.opts.CallTimeout)
			err := r.e.m.Typing(cctx, r.chat)
			cancel()
			release()
			if err == nil {
				r.observe(Event{Kind: EventTyping, Chat: r.chat})
			} else {
				r.e.log.Debug("typing indicator not shown", "chat", r.chat.String(), "err", err)
			}
		}
		r.mu.Lock()
		if r.typingAgain {
			r.mu.Unlock()
			continue
		}
		r.typingRunning = false
		if r.typingOn && !r.finishing {
			r.typingTimer = time.AfterFunc(r.e.opts.TypingInterval, r.renewTyping)
		}
		r.mu.Unlock()
		return
	}
}

// renewTyping runs when the indicator is due again; an engine closed meanwhile starts nothing.
func (r *Reply) renewTyping() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.typingTimer = nil
	if !r.typingRunning && r.typingOn && !r.finishing && r.ctx.Err() == nil {
		r.typingRunning = r.e.spawn(r.showTyping)
	}
}

// Finish delivers the final text, split into as many messages as the platform's limit needs,
// and the files, and returns once everything is delivered or has definitively failed. 429s
// are waited out for as long as ctx allows; temporary failures are retried a bounded number of
// times. When the Messenger is an adapters.FileAttacher, the files (as many as one message may
// carry) go with the last message of the final text, in the request that sets its text, and
// the rest follow in messages of their own; otherwise every file follows in a message of its
// own. Finish may be called once.
func (r *Reply) Finish(ctx context.Context, text string, files []chat.File) error {
	r.mu.Lock()
	if r.finishing {
		r.mu.Unlock()
		return errors.New("delivery: reply already finished")
	}
	r.finishing = true
	r.typingOn = false
	if r.typingTimer != nil {
		r.typingTimer.Stop()
		r.typingTimer = nil
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
	r.closeOpens()
	r.ended()
	r.mu.Lock()
	r.finished = true
	r.mu.Unlock()
	if err != nil {
		return fmt.Errorf("delivery: final text for %s: %w", r.chat, err)
	}
	return nil
}

func (r *Reply) deliverFinal(ctx context.Context, text string, files []chat.File) error {
	lim := r.e.limits
	att, _ := r.e.m.(adapters.FileAttacher)
	attach := att != nil && len(files) > 0
	rest, batch := files, 1 // files still to post on their own, and how many per message
	if !attach {
		if done, err := r.richFinal(ctx, text); done {
			if err != nil {
				return err
			}
			return r.sendFiles(ctx, rest, batch)
		}
	}
	parts := r.finalParts(text)
	for i := 0; i < len(parts); i++ {
		part := parts[i]
		var err error
		switch {
		case attach && i == len(parts)-1:
			var attached bool
			attached, err = r.finalAttach(ctx, att, i, part, files)
			if attached {
				rest, batch = files[min(len(files), r.maxFiles()):], r.maxFiles()
			}
		case i < len(r.msgs):
			if r.msgs[i].text == part && !r.msgs[i].controls {
				continue // identical text is never sent again
			}
			err = r.finalEdit(ctx, i, part)
		default:
			err = r.finalSend(ctx, part)
		}
		if errors.Is(err, adapters.ErrTooLong) {
			// The platform counts differently than we do: cut this part smaller and go on.
			sub := SplitLines(part, Length(part, lim.Unit)*3/4, lim.MaxLines, lim.Unit)
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
	return r.sendFiles(ctx, rest, batch)
}

// finalParts splits the final text into messages: where previews rolled the answer over, the
// messages they finished keep their text and the rest is rolled over the same way. Previews
// may have rolled a long answer over into more messages than the final text needs (it came out
// shorter than its last preview); it is then cut finer, so that each of those messages gets
// part of it and none keeps text the answer no longer has.
func (r *Reply) finalParts(text string) []string {
	lim := r.e.limits
	parts, _, _ := r.parts(text, lim.MaxLen, false)
	if len(parts) >= len(r.msgs) {
		return parts
	}
	parts = SplitLines(text, lim.MaxLen, lim.MaxLines, lim.Unit)
	for m := lim.MaxLen; len(parts) > 0 && len(parts) < len(r.msgs) && m > 1; {
		m = min(m-1, Length(text, lim.Unit)/len(r.msgs))
		parts = SplitLines(text, max(m, 1), lim.MaxLines, lim.Unit)
	}
	return parts
}

// maxFiles is how many files one message may carry.
func (r *Reply) maxFiles() int { return max(r.e.limits.MaxFiles, 1) }

// finalAttach makes message i, the last of the final text, show part together with the first
// files (as many as one message may carry), in the one request that sets its text: an edit
// with files when the message exists (even when it already shows part), else a new message
// with part as the files' caption. A message that cannot be edited any more is replaced by a
// new one carrying part and the files.
//
// attached reports whether the files went out. When the platform refuses them for good (too
// large, a bad file, retries used up), part is delivered without them and attached is false,
// so the caller posts the files on their own and nothing is lost. ErrTooLong, the caller's
// cancellation and ErrClosed are returned as they are.
func (r *Reply) finalAttach(ctx context.Context, att adapters.FileAttacher, i int, part string, files []chat.File) (attached bool, err error) {
	batch := files[:min(len(files), r.maxFiles())]
	if i < len(r.msgs) {
		err := r.call(ctx, func(cctx context.Context) error {
			return att.EditWithFiles(cctx, r.msgs[i].ref, part, batch)
		})
		switch {
		case err == nil:
			r.observe(Event{Kind: EventFiles, Chat: r.chat, Final: true, Took: r.took})
			r.msgs[i].text, r.msgs[i].controls = part, false
			return true, nil
		case errors.Is(err, adapters.ErrMessageGone):
			r.observe(Event{Kind: EventFallback, Chat: r.chat, Final: true, Err: err, Took: r.took})
			r.e.log.Debug("message gone; sending the text and files as a new message", "chat", r.chat.String(), "err", err)
		case !r.attachRefused(ctx, err):
			return false, err
		default:
			r.e.log.Warn("files not attached to the final message; posting them on their own",
				"chat", r.chat.String(), "files", len(batch), "err", err)
			if r.msgs[i].text == part && !r.msgs[i].controls {
				return false, nil
			}
			return false, r.finalEdit(ctx, i, part)
		}
	}
	ref, err := r.postFiles(ctx, batch, part, i == 0)
	if err != nil {
		if !r.attachRefused(ctx, err) {
			return false, err
		}
		r.e.log.Warn("files not posted with the final text; posting them on their own",
			"chat", r.chat.String(), "files", len(batch), "err", err)
		ref, err = r.sendFinalPart(ctx, part, i == 0)
		if err != nil {
			return false, err
		}
	} else {
		attached = true
	}
	if i < len(r.msgs) {
		r.msgs[i] = sent{ref: ref, text: part}
	} else {
		r.msgs = append(r.msgs, sent{ref: ref, text: part})
	}
	return attached, nil
}

// attachRefused reports whether err, from a request carrying files, is the platform's final
// answer to those files, so the files should go out another way: not a text that is too long
// (the caller splits it), nor the end of ctx or of the engine.
func (r *Reply) attachRefused(ctx context.Context, err error) bool {
	return !errors.Is(err, adapters.ErrTooLong) && !errors.Is(err, ErrClosed) && ctx.Err() == nil
}

// sendFiles posts files in messages of up to batch files each. A message of several files the
// platform refuses for good is posted again one file per message, so one bad file does not
// hold back the others.
func (r *Reply) sendFiles(ctx context.Context, files []chat.File, batch int) error {
	for len(files) > 0 {
		n := min(batch, len(files))
		_, err := r.postFiles(ctx, files[:n], "", len(r.msgs) == 0)
		if err != nil && n > 1 && r.attachRefused(ctx, err) {
			r.e.log.Warn("files refused together; posting them one by one", "chat", r.chat.String(), "files", n, "err", err)
			err = r.sendFiles(ctx, files[:n], 1)
		}
		if err != nil {
			if n == 1 {
				return fmt.Errorf("file %q: %w", files[0].Name, err)
			}
			if !r.attachRefused(ctx, err) {
				return fmt.Errorf("%d files from %q on: %w", n, files[0].Name, err)
			}
			return err // already named by the one-by-one attempt
		}
		files = files[n:]
	}
	return nil
}

// postFiles posts files with caption as one new message; the first message of a reply carries
// the reply's send options.
func (r *Reply) postFiles(ctx context.Context, files []chat.File, caption string, first bool) (adapters.MessageRef, error) {
	opts := r.sendOptions(first)
	var ref adapters.MessageRef
	err := r.post(ctx, func(cctx context.Context) error {
		var err error
		if vs, ok := r.e.m.(adapters.VoiceSender); ok && len(files) == 1 && files[0].IsVoice() && caption == "" {
			ref, err = vs.SendVoice(cctx, r.chat, files[0], opts)
			return err
		}
		ref, err = r.e.m.SendFiles(cctx, r.chat, files, caption, opts)
		return err
	})
	if err != nil {
		return adapters.MessageRef{}, err
	}
	r.observe(Event{Kind: EventFiles, Chat: r.chat, Final: true, Took: r.took})
	return ref, nil
}

// sendOptions are the options of a new message of the final text: only the reply's first
// message references the user's message, and none carries the Stop control any more.
func (r *Reply) sendOptions(first bool) adapters.SendOptions {
	o := adapters.SendOptions{Answers: r.opts.ReplyTo}
	if first {
		o = r.opts
	}
	o.Stoppable = false
	return o
}

// finalEdit puts part into message i; a message that cannot be edited any more is replaced by
// a new message carrying the part.
func (r *Reply) finalEdit(ctx context.Context, i int, part string) error {
	err := r.call(ctx, func(cctx context.Context) error {
		return r.e.m.Edit(cctx, r.msgs[i].ref, part)
	})
	switch {
	case err == nil:
		r.observe(Event{Kind: EventEdit, Chat: r.chat, Final: true, Took: r.took})
		r.msgs[i].text, r.msgs[i].controls = part, false
		return nil
	case errors.Is(err, adapters.ErrNotModified):
		r.observe(Event{Kind: EventNotModified, Chat: r.chat, Final: true, Took: r.took})
		r.msgs[i].text, r.msgs[i].controls = part, false
		return nil
	case errors.Is(err, adapters.ErrMessageGone):
		r.observe(Event{Kind: EventFallback, Chat: r.chat, Final: true, Err: err, Took: r.took})
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
	opts := r.sendOptions(first)
	var ref adapters.MessageRef
	err := r.post(ctx, func(cctx context.Context) error {
		var err error
		ref, err = r.e.m.Send(cctx, r.chat, part, opts)
		return err
	})
	if err != nil {
		return adapters.MessageRef{}, err
	}
	r.observe(Event{Kind: EventSend, Chat: r.chat, Final: true, Took: r.took})
	return ref, nil
}

// call runs one final-priority platform request through the engine's retry stage (Engine.Do):
// a slot, 429s waited out for their scope, temporary failures retried. Other errors,
// ErrNotModified and ErrMessageGone included, are returned for the caller to act on.
//
// The request is for the reply's work: the fence (Options.Fence) is asked with ctx's deadline
// and cancellation but the values of the context the reply was made with (the turn it answers,
// and the epoch that turn began under), whatever context the caller finishes it with.
func (r *Reply) call(ctx context.Context, fn func(context.Context) error) error {
	return r.e.do(workContext{Context: ctx, work: r.ctx}, r.chat, ClassMessage, false, &r.took, poolFree, fn)
}

// workContext is a context with the deadline and cancellation of its Context and the values of
// work.
type workContext struct {
	context.Context
	work context.Context
}

// Value implements context.Context with the values of the work.
func (w workContext) Value(key any) any { return w.work.Value(key) }
