package pipeline

import (
	"context"
	"log/slog"
	"relaybot/chat"

	"relaybot/adapters"
)

// StopPublisher carries a /stop (or the Stop button) to the other replicas of a deployment, one
// of which may be running the conversation's turn; each replica hands what it receives to
// Pipeline.StopFromReplica. PublishStop returns once the request is sent, not when it is acted on.
type StopPublisher interface {
	PublishStop(ctx context.Context, key, userID string, admin bool) error
}

// StopFromReplica stops the turn of conversation key when this replica runs it and the asker
// (userID, or an admin) may stop it, as a /stop sent here would; it reports whether it did.
func (p *Pipeline) StopFromReplica(key, userID string, admin bool) bool {
	_, stopped := p.turns.stop(key, ErrStopped, func(started adapters.Inbound) bool {
		return admin || started.UserID == userID
	})
	return stopped
}

// stopElsewhere hands a /stop for a turn this replica does not run to the other replicas, and
// reports whether it did (false for a single process). The replica running the turn ends it,
// and its reply shows it stopped; when none runs one, nothing is said.
func (p *Pipeline) stopElsewhere(key chat.Key, in adapters.Inbound, admin bool, log *slog.Logger) bool {
	if p.opts.Stops == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	if err := p.opts.Stops.PublishStop(ctx, key.String(), in.UserID, admin); err != nil {
		log.Warn("pipeline: /stop not passed to the other replicas", "err", err)
		return false
	}
	return true
}

// TurnGate keeps one turn at a time per conversation across the replicas of a deployment, in
// the order the messages were sent. Each message that waits for its conversation's turn enters
// (Enter, which may refuse it when the deployment's queue for the conversation is full; with
// interrupt it drops the earlier waiting messages and interrupts a turn another replica runs),
// and leaves when done (Leave). A replica's earliest message of a conversation then waits
// (Wait) until no replica runs a turn of it and no earlier message contends: run false means a
// newer message dropped it. Running says whether and where the conversation's turn runs.
type TurnGate interface {
	Enter(ctx context.Context, key string, in adapters.Inbound, limit int, interrupt bool) (ticket int64, admitted bool, err error)
	Wait(ctx context.Context, key string, ticket int64) (run bool, err error)
	Leave(ctx context.Context, key string, ticket int64) error
	Running(ctx context.Context, key string) (userID string, here, running bool, err error)
}

// InterruptFromReplica cancels the turn of conversation key that this replica runs because a
// newer message of it reached another replica (busy = "interrupt"); it reports whether it did.
func (p *Pipeline) InterruptFromReplica(key string) bool {
	_, stopped := p.turns.stop(key, ErrInterrupted, nil)
	return stopped
}

// gateEnter enters a message in the deployment's queue of its conversation; without a gate
// every message is admitted. A database failure admits the message (ticket 0): the reply
// matters more than the order across replicas, which then holds within this one only.
func (p *Pipeline) gateEnter(key string, in adapters.Inbound, log *slog.Logger) (ticket int64, admitted bool) {
	if p.opts.Gate == nil {
		return 0, true
	}
	ctx, cancel := context.WithTimeout(p.base, saveTimeout)
	defer cancel()
	ticket, admitted, err := p.opts.Gate.Enter(ctx, key, in, p.opts.Queue.Size, p.opts.Queue.interrupt())
	if err != nil {
		log.Warn("pipeline: message not ordered across replicas; answering it", "conversation", key, "message", in.MessageID, "err", err)
		return 0, true
	}
	return ticket, admitted
}

// gateWait waits for the conversation's turn across replicas; it returns why the message must
// not run (a newer message superseded it, or the shutdown), or nil.
func (p *Pipeline) gateWait(key string, ticket int64, log *slog.Logger) error {
	if p.opts.Gate == nil || ticket == 0 {
		return nil
	}
	run, err := p.opts.Gate.Wait(p.base, key, ticket)
	switch {
	case p.base.Err() != nil:
		return ErrShutdown
	case err != nil:
		log.Warn("pipeline: turn not ordered across replicas; running it", "conversation", key, "err", err)
		return nil
	case !run:
		return ErrInterrupted
	}
	return nil
}

// gateLeave takes a message out of the deployment's queue of its conversation.
func (p *Pipeline) gateLeave(key string, ticket int64, log *slog.Logger) {
	if p.opts.Gate == nil || ticket == 0 {
		return
	}
	// Left even at shutdown: the others must not wait for this replica's lease to expire.
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	if err := p.opts.Gate.Leave(ctx, key, ticket); err != nil {
		log.Warn("pipeline: conversation not freed for the other replicas; they take it when this replica's lease expires", "conversation", key, "err", err)
	}
}

// stopAcrossReplicas answers a /stop when replicas share the bot and the conversation's turn
// runs on another one: passed on, or refused when the asker may not stop it (handled). Otherwise
// the local rules answer it, and askOthers says whether they should pass it on when no turn runs
// here: without a gate, or when the gate could not say where the turn runs.
func (p *Pipeline) stopAcrossReplicas(key chat.Key, in adapters.Inbound, admin bool, out adapters.Responder, log *slog.Logger) (handled, askOthers bool) {
	if p.opts.Gate == nil {
		return false, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	userID, here, running, err := p.opts.Gate.Running(ctx, key.String())
	switch {
	case err != nil:
		log.Warn("pipeline: /stop: which replica runs the turn not known; asking them all", "err", err)
		return false, true
	case !running || here:
		return false, false
	case !admin && userID != in.UserID:
		log.Info("pipeline: /stop refused: not the asker's turn (on another replica)")
		p.notice(out, "Only the person who asked, or an admin, can stop this answer.", log)
		return true, false
	}
	if !p.stopElsewhere(key, in, admin, log) {
		return false, false
	}
	return true, false
}
