package pipeline

import (
	"context"
	"log/slog"

	"relaybot/adapters"
	"relaybot/chat"
	"relaybot/store"
)

// Replicas is the deployment the pipeline serves the bot in: this process alone, or one replica
// of several on one database (coord.Replica). Its methods may block on the database; the
// pipeline bounds each call.
type Replicas interface {
	TurnGate
	StopPublisher
	// Shared reports whether other replicas may serve the bot too: the first message of an idle
	// conversation then settles for DefaultReplicaSettle.
	Shared() bool
}

// Stamper is what a deployment that fences its replicas gives the pipeline (coord.Replica): Stamp
// marks a turn's context with the epoch the turn begins under, so the deployment refuses its
// platform requests and tool calls for good once another replica took the turn over.
type Stamper interface {
	Stamp(ctx context.Context) context.Context
}

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

// gate orders the turns of each conversation across the replicas of the deployment
// (Options.Replicas), and carries /stop to them, within the pipeline's life (base).
type gate struct {
	replicas Replicas
	base     context.Context
	// size and interrupt are the deployment's queue limit and busy policy per conversation.
	size      int
	interrupt bool
	outbox    *outbox
}

// stopElsewhere hands a /stop for a turn this replica does not run to the other replicas, and
// reports whether it did. The replica running the turn ends it, and its reply shows it stopped;
// when none runs one, nothing is said.
func (g *gate) stopElsewhere(key chat.Key, in adapters.Inbound, admin bool, log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	err := store.Retry(ctx, store.Write{What: "a /stop for another replica", Log: log}, func(ctx context.Context) error {
		return g.replicas.PublishStop(ctx, key.String(), in.UserID, admin)
	})
	if err != nil {
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
// newer message dropped it. A ticket of 0 was queued nowhere but in this process: it needs no
// Wait and no Leave. Elsewhere says whether another replica runs the conversation's turn, and
// for whom.
type TurnGate interface {
	Enter(ctx context.Context, key string, in adapters.Inbound, limit int, interrupt bool) (ticket int64, admitted bool, err error)
	Wait(ctx context.Context, key string, ticket int64) (run bool, err error)
	Leave(ctx context.Context, key string, ticket int64) error
	Elsewhere(ctx context.Context, key string) (userID string, elsewhere bool, err error)
}

// InterruptFromReplica cancels the turn of conversation key that this replica runs because a
// newer message of it reached another replica (busy = "interrupt"); it reports whether it did.
func (p *Pipeline) InterruptFromReplica(key string) bool {
	_, stopped := p.turns.stop(key, ErrInterrupted, nil)
	return stopped
}

// enter enters a message in the deployment's queue of its conversation. A database failure
// admits the message (ticket 0): the reply matters more than the order across replicas, which
// then holds within this one only.
func (g *gate) enter(key string, in adapters.Inbound, log *slog.Logger) (ticket int64, admitted bool) {
	ctx, cancel := context.WithTimeout(g.base, saveTimeout)
	defer cancel()
	err := store.Retry(ctx, store.Write{What: "the message's place in its conversation's queue", Log: log}, func(ctx context.Context) error {
		var err error
		ticket, admitted, err = g.replicas.Enter(ctx, key, in, g.size, g.interrupt)
		return err
	})
	if err != nil {
		log.Warn("pipeline: message not ordered across replicas; answering it", "conversation", key, "message", in.MessageID, "err", err)
		return 0, true
	}
	return ticket, admitted
}

// wait waits for the conversation's turn across replicas; it returns why the message must
// not run (a newer message superseded it, or the shutdown), or nil.
func (g *gate) wait(key string, ticket int64, log *slog.Logger) error {
	if ticket == 0 {
		return nil
	}
	run, err := g.replicas.Wait(g.base, key, ticket)
	switch {
	case g.base.Err() != nil:
		return ErrShutdown
	case err != nil:
		log.Warn("pipeline: turn not ordered across replicas; running it", "conversation", key, "err", err)
		return nil
	case !run:
		return ErrInterrupted
	}
	return nil
}

// leave takes a message out of the deployment's queue of its conversation.
func (g *gate) leave(key string, ticket int64, log *slog.Logger) {
	if ticket == 0 {
		return
	}
	// Left even at shutdown: the others must not wait for this replica's lease to expire.
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	err := store.Retry(ctx, store.Write{What: "the message's leaving its conversation's queue", Idempotent: true, Log: log}, func(ctx context.Context) error {
		return g.replicas.Leave(ctx, key, ticket)
	})
	if err != nil {
		log.Warn("pipeline: conversation not freed for the other replicas; they take it when this replica's lease expires", "conversation", key, "err", err)
	}
}

// stopAcrossReplicas answers a /stop when the conversation's turn runs on another replica:
// passed on, or refused when the asker may not stop it (handled). Otherwise the local rules
// answer it, and askOthers says whether they should pass it on when no turn runs here: when the
// deployment could not say where the turn runs.
func (g *gate) stopAcrossReplicas(key chat.Key, in adapters.Inbound, admin bool, out adapters.Responder, log *slog.Logger) (handled, askOthers bool) {
	ctx, cancel := context.WithTimeout(context.Background(), store.WriteAttempt)
	defer cancel()
	userID, elsewhere, err := g.replicas.Elsewhere(ctx, key.String())
	switch {
	case err != nil:
		log.Warn("pipeline: /stop: which replica runs the turn not known; asking them all", "err", err)
		return false, true
	case !elsewhere:
		return false, false
	case !admin && userID != in.UserID:
		log.Info("pipeline: /stop refused: not the asker's turn (on another replica)")
		g.outbox.notice(out, "Only the person who asked, or an admin, can stop this answer.", log)
		return true, false
	}
	return g.stopElsewhere(key, in, admin, log), false
}

// alone is the deployment of a process that serves the bot by itself (Options.Replicas nil):
// its own queue orders every conversation, and no other replica runs a turn.
type alone struct{}

func (alone) Shared() bool { return false }

func (alone) Enter(context.Context, string, adapters.Inbound, int, bool) (int64, bool, error) {
	return 0, true, nil
}

func (alone) Wait(context.Context, string, int64) (bool, error) { return true, nil }

func (alone) Leave(context.Context, string, int64) error { return nil }

func (alone) Elsewhere(context.Context, string) (string, bool, error) { return "", false, nil }

// PublishStop is never asked: no turn runs elsewhere.
func (alone) PublishStop(context.Context, string, string, bool) error { return nil }
