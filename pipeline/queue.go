package pipeline

import (
	"context"
	"errors"
	"sync"
	"time"

	"relaybot/store"
)

// queue runs a message's turn once it may: its place in the conversation's queue (this replica's
// order, then the deployment's), then its turn, then a free slot among the turns in flight. Each
// wait may end the message instead: a full queue or no free slot in time tells the user the bot
// is busy; a newer message (busy = "interrupt") or the shutdown drops it.
func (p *Pipeline) queue(r *request) {
	if answeredBefore(p.store, r) || crashedTwice(r, p.outbox) {
		return
	}
	pl, ok := p.takePlace(r)
	if !ok {
		return
	}
	defer pl.leave()
	if why := pl.waitTurn(); why != nil {
		pl.drop(why)
		return
	}
	slot, err := p.slots.take(p.base)
	if err != nil {
		pl.drop(err)
		return
	}
	defer slot.release()
	r.slot = slot

	ctx, cancel := context.WithCancelCause(p.base)
	defer cancel(nil)
	p.turns.started(pl.key, pl.t, cancel)
	// The turn runs with the configuration of its start, kept to its end (Reconfigure).
	r.live = p.begin()
	defer r.live.end()
	if r.in.Command == "compact" {
		r.live.cmds.compact(ctx, r)
		return
	}
	r.live.parts.runTurn(ctx, r)
}

// place is a message's place in its conversation's queue, in this replica (t) and across the
// replicas (ticket, 0 without a gate).
type place struct {
	r      *request
	key    string
	t      *queuedTurn
	ticket int64
	// turns and gate are the queues the place is in, here and across the replicas; the
	// others are what drop needs to tell the user.
	turns  *turnQueue
	gate   *gate
	slots  int
	texts  *Texts
	outbox *outbox
}

// takePlace queues the message in its conversation, here and across the replicas, and tells
// the adapter once it is (or was refused); a full queue tells the user the bot is busy.
func (p *Pipeline) takePlace(r *request) (*place, bool) {
	k := r.key.String()
	t, busy, err := p.turns.enqueue(k, r.in)
	if err != nil {
		r.log.Info("pipeline: message refused: conversation busy", "conversation", k, "message", r.in.MessageID)
		placed(r.in)
		p.outbox.notice(r.out, r.live.opts.Texts.Busy, r.log)
		return nil, false
	}
	ticket, admitted := p.gate.enter(k, r.in, r.log)
	// The deployment's queue holds the message now: the chat's next one, wherever it lands,
	// queues behind it.
	placed(r.in)
	if !admitted {
		p.turns.leave(k, t)
		r.log.Info("pipeline: message refused: conversation busy on the replicas", "conversation", k, "message", r.in.MessageID)
		p.outbox.notice(r.out, r.live.opts.Texts.Busy, r.log)
		return nil, false
	}
	if busy {
		r.log.Debug("pipeline: message waits for its turn", "conversation", k, "message", r.in.MessageID)
	}
	return &place{r: r, key: k, t: t, ticket: ticket, turns: p.turns, gate: p.gate, slots: cap(p.slots.c), texts: &r.live.opts.Texts, outbox: p.outbox}, true
}

// waitTurn waits until the message is first in its conversation here, then across the
// replicas; it returns why the message must not run (superseded, or the shutdown), or nil.
// Waiting ignores the adapter's context: an adapter that stops receiving at shutdown still gets
// its accepted messages answered within the grace period; Shutdown ends the wait when it is over.
func (pl *place) waitTurn() error {
	select {
	case <-pl.t.ready:
	case <-pl.gate.base.Done():
		return ErrShutdown
	}
	switch {
	case pl.t.dropped != nil:
		return pl.t.dropped
	case pl.gate.base.Err() != nil:
		return ErrShutdown
	}
	return pl.gate.wait(pl.key, pl.ticket, pl.r.log)
}

// leave takes the message out of its conversation's queue, across the replicas first.
func (pl *place) leave() {
	pl.gate.leave(pl.key, pl.ticket, pl.r.log)
	pl.turns.leave(pl.key, pl.t)
}

// drop tells the user (at shutdown, or when the bot is too busy) or the log (when superseded)
// that a waiting message will not be answered.
func (pl *place) drop(why error) {
	r := pl.r
	switch {
	case errors.Is(why, errNoSlot):
		r.log.Warn("pipeline: message refused: too many turns in flight", "limit", pl.slots, "message", r.in.MessageID)
		pl.outbox.notice(r.out, pl.texts.Busy, r.log)
	case errors.Is(why, ErrShutdown):
		r.log.Info("pipeline: waiting message dropped", "reason", why, "message", r.in.MessageID)
		pl.outbox.notice(r.out, pl.texts.Shutdown, r.log)
	default:
		r.log.Info("pipeline: waiting message dropped", "reason", why, "message", r.in.MessageID)
	}
}

// errNoSlot: no turn slot came free within TurnWait.
var errNoSlot = errors.New("too many turns in flight")

// slots bound the turns running at once.
type slots struct {
	c    chan struct{}
	wait time.Duration // how long a turn waits for a free slot
}

// take waits for a free slot, at most wait, and returns it held; errNoSlot when none came free
// in time, ErrShutdown when base ended first.
func (s slots) take(base context.Context) (*turnSlot, error) {
	timer := time.NewTimer(s.wait)
	defer timer.Stop()
	select {
	case s.c <- struct{}{}:
		return &turnSlot{c: s.c, held: true}, nil
	case <-timer.C:
		return nil, errNoSlot
	case <-base.Done():
		return nil, ErrShutdown
	}
}

// turnSlot is one turn's place among the turns in flight. A turn gives it back while its
// approval questions wait (away) and takes one again when the last is answered (back).
type turnSlot struct {
	c chan struct{}

	mu   sync.Mutex // held while back waits, so a question opened meanwhile waits for it
	held bool
	away int // questions waiting
}

// release gives the place back for good (the turn ended); it does nothing when not held.
func (t *turnSlot) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held {
		<-t.c
		t.held = false
	}
}

// Leave gives the place back while a question waits (asking.Slot).
func (t *turnSlot) Leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.away++; t.away == 1 && t.held {
		<-t.c
		t.held = false
	}
}

// Back takes a place again once no question of the turn waits; it waits for a free one as long
// as the turn lives, so an answered question goes on as soon as another turn finishes.
func (t *turnSlot) Back(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.away--; t.away > 0 || t.held {
		return nil
	}
	select {
	case t.c <- struct{}{}:
		t.held = true
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// CrashedTwiceText answers a message handed over a second time after the bot stopped while
// answering it: it may be what takes the bot down, so it is not tried a third time.
const CrashedTwiceText = "The bot stopped twice while answering this message, so it will not try again. Send it again in other words, or without its file."

// crashedTwice answers with CrashedTwiceText, and reports true for, a message the adapter
// hands over a second time after a run stopped before finishing it: once more is a retry (a
// deploy, a killed replica), twice is a message that may take the bot down, and a third try
// could be the third crash of a loop. The adapter marks it finished once Handle returns.
func crashedTwice(r *request, o *outbox) bool {
	if !r.in.Redelivered || r.in.Redeliveries < 2 {
		return false
	}
	r.log.Warn("pipeline: message handed over again after two stops while answering it; not answered again",
		"message", r.in.MessageID, "handovers", r.in.Redeliveries)
	o.notice(r.out, CrashedTwiceText, r.log)
	return true
}

// answeredBefore reports whether a message handed over again after a crash was already
// answered: a turn it started ended with a status other than interrupted. A failed lookup
// answers again. A message answered again takes its cut turn out of the history (retried).
func answeredBefore(st Store, r *request) bool {
	finder := st.Turns
	in, log := r.in, r.log
	if !in.Redelivered || in.MessageID == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	lctx, cancelLookup := context.WithTimeout(ctx, store.WriteAttempt)
	t, found, err := finder.TurnByInbound(lctx, in.Chat, in.MessageID)
	cancelLookup()
	if err != nil {
		log.Warn("pipeline: redelivered message not checked against earlier turns; answering it", "message", in.MessageID, "err", err)
		return false
	}
	if !found {
		return false
	}
	if t.Status == store.TurnInterrupted || t.Status == store.TurnRunning {
		// Answered again: the cut turn leaves the history, or the message would reach the
		// model twice (its copy in the cut turn, and the new turn's).
		err := store.Retry(ctx, store.Write{What: "the cut turn's retirement", Idempotent: true, Log: log}, func(ctx context.Context) error {
			_, err := finder.SupersedeTurn(ctx, t.ID)
			return err
		})
		if err != nil {
			log.Warn("pipeline: the cut turn of a redelivered message stays in the history", "turn", t.ID, "err", err)
		}
		// The calls that finished in the cut turn happened: the new turn carries them on
		// rather than have the model ask for them again.
		rctx, cancelRead := context.WithTimeout(ctx, store.WriteAttempt)
		done, err := finishedCalls(rctx, st.ToolCalls, t.ID)
		cancelRead()
		if err != nil {
			log.Warn("pipeline: the tool calls the cut turn finished not read; the model may ask for them again", "turn", t.ID, "err", err)
		}
		r.resumed = done
		return false
	}
	log.Info("pipeline: redelivered message already answered; skipped", "message", in.MessageID, "turn", t.ID, "status", t.Status)
	return true
}
