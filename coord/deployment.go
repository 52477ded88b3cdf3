package coord

import (
	"context"
	"sync"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	"relaybot/adapters/web"
)

// Deployment is this process's place among the processes that serve the bot: alone on SQLite
// (Local), or one replica of several on one PostgreSQL database (Replica). It owns what the
// deployment decides — which process takes a message, runs a conversation's turn, holds the
// Telegram poller or a Discord shard; how the platforms' budgets are shared; what is swept up
// after a replica dies — and hands the pipeline and the adapters the small interfaces they
// declare (pipeline.Replicas is the Deployment itself; the adapters get a Ledger, leases, shards,
// a web relay and their delivery options). cmd/bot wires it and runs Run among its background
// parts; it holds no policy of its own.
//
// Fencing: the membership (Member) is the one place that knows when the lease was last
// confirmed. Fence is asked before every platform request (the delivery engines' Options.Fence),
// every message taken (the Ledger) and every tool start (ClaimToolCall); work is stamped with
// the epoch it began under (Stamp), and refused for good once that epoch was taken over.
//
// Delivery and AddEngine are called while the bot is built, before Run.
type Deployment interface {
	// Shared reports whether other replicas may serve the bot too.
	Shared() bool

	// Enter, Wait, Leave, Elsewhere and PublishStop are the pipeline's side
	// (pipeline.Replicas); their contracts are written there.
	Enter(ctx context.Context, key string, in adapters.Inbound, limit int, interrupt bool) (ticket int64, admitted bool, err error)
	Wait(ctx context.Context, key string, ticket int64) (run bool, err error)
	Leave(ctx context.Context, key string, ticket int64) error
	Elsewhere(ctx context.Context, key string) (userID string, elsewhere bool, err error)
	PublishStop(ctx context.Context, key, userID string, admin bool) error

	// Fence returns nil when this process may act on the work it holds now; a replica whose
	// lease is not confirmed within the fence deadline waits until it is, or ctx ends. Work
	// stamped with an epoch a survivor took over is refused with ErrTakenOver.
	Fence(ctx context.Context) error
	// Stamp returns ctx carrying the epoch the work done with it begins under.
	Stamp(ctx context.Context) context.Context
	// ClaimToolCall claims, before it starts, a tool call of turn turnID (0: outside a turn):
	// an error means the call must not start.
	ClaimToolCall(ctx context.Context, turnID int64) error

	// Ledger takes each inbound message once for all replicas; nil for a single process,
	// which takes every message it receives.
	Ledger() adapters.Ledger
	// PollLease is the lease of bot's Telegram poller; nil for a single process, which polls.
	PollLease(bot Bot) adapters.Lease
	// Shards shares bot's gateway shards among the replicas; nil for a single process, which
	// connects every shard.
	Shards(bot Bot) adapters.Shards
	// Questions records bot's questions with buttons, so that a press another replica
	// receives is carried to the turn that asked; nil for a single process, which receives
	// every press of its own questions.
	Questions(bot Bot) adapters.QuestionBook
	// AddQuestionCloser hands the deployment bot's adapter, which then closes the questions
	// that replicas taken over left open (their messages say so and lose their buttons).
	AddQuestionCloser(bot Bot, c adapters.QuestionCloser)
	// WebRelay shows every open page of a web chat what the turns of other replicas stream;
	// nil for a single process.
	WebRelay() web.Relay
	// Delivery adds to opts what the delivery engine of bot (whose platform limits are lim)
	// needs to deliver alongside the other replicas.
	Delivery(bot Bot, lim adapters.Limits, opts delivery.Options) delivery.Options
	// AddEngine hands the deployment bot's delivery engine, which then takes its share of the
	// bot-wide budgets and ends the replies the replicas that died left behind.
	AddEngine(bot Bot, e Engine)
	// Instances lists the live replicas, oldest first, each with the leases it holds; none
	// for a single process.
	Instances(ctx context.Context) ([]Instance, error)

	// Run carries what the other replicas ask to turns (stops, freed conversations) and
	// records this replica's replies in flight until ctx ends. Call it after the turns have
	// ended at shutdown: it serves them to the last.
	Run(ctx context.Context, turns Stopper) error
	// Close ends this process's place in the deployment: a replica leaves at once, so the
	// others take over what it left without waiting for its lease to expire. Call it after
	// Run returned; it is safe to call more than once.
	Close(ctx context.Context) error
}

// Stopper is the pipeline as the stops of other replicas reach it (*pipeline.Pipeline).
type Stopper interface {
	// StopFromReplica stops the turn of conversation key this process runs when the asker
	// may stop it, and reports whether it did.
	StopFromReplica(key, userID string, admin bool) bool
	// InterruptFromReplica cancels the turn of conversation key this process runs because a
	// newer message of it reached another replica, and reports whether it did.
	InterruptFromReplica(key string) bool
}

// Engine is a bot's delivery engine as the deployment drives it (*delivery.Engine).
type Engine interface {
	// ShareGlobal divides the engine's bot-wide budgets by n replicas.
	ShareGlobal(n int)
	// MarkInterrupted ends msg, a reply a replica that died was streaming, with a note.
	MarkInterrupted(ctx context.Context, msg adapters.MessageRef, shown string) error
}

// Local is the deployment of a single process on SQLite: it takes every message, runs every
// turn in its own order, holds every role and paces the platforms in memory; a stop it
// publishes reaches its own turns. Nothing is swept: a previous run's leftovers are recovered
// once at start (store.Recover). Its methods are safe for concurrent use.
type Local struct {
	mu    sync.Mutex
	turns Stopper // set by Run
}

// NewLocal returns the deployment of a single process.
func NewLocal() *Local { return &Local{} }

// Shared implements Deployment: no other process serves the bot.
func (*Local) Shared() bool { return false }

// Enter implements Deployment: every message is admitted, with ticket 0 (not queued across
// replicas); the pipeline's own queue orders and limits the conversation.
func (*Local) Enter(context.Context, string, adapters.Inbound, int, bool) (int64, bool, error) {
	return 0, true, nil
}

// Wait implements Deployment: no other process contends for the conversation.
func (*Local) Wait(context.Context, string, int64) (bool, error) { return true, nil }

// Leave implements Deployment: nothing was queued across replicas.
func (*Local) Leave(context.Context, string, int64) error { return nil }

// Elsewhere implements Deployment: no turn runs anywhere else.
func (*Local) Elsewhere(context.Context, string) (string, bool, error) { return "", false, nil }

// PublishStop implements Deployment: the stop reaches this process's turns, the only ones.
func (l *Local) PublishStop(_ context.Context, key, userID string, admin bool) error {
	l.mu.Lock()
	turns := l.turns
	l.mu.Unlock()
	if turns != nil {
		turns.StopFromReplica(key, userID, admin)
	}
	return nil
}

// Fence implements Deployment: a single process holds its file, and is never fenced.
func (*Local) Fence(context.Context) error { return nil }

// Stamp implements Deployment: no epochs in a single process.
func (*Local) Stamp(ctx context.Context) context.Context { return ctx }

// ClaimToolCall implements Deployment: nobody else could start the call.
func (*Local) ClaimToolCall(context.Context, int64) error { return nil }

// Ledger implements Deployment: a single process takes every message it receives.
func (*Local) Ledger() adapters.Ledger { return nil }

// PollLease implements Deployment: a single process polls.
func (*Local) PollLease(Bot) adapters.Lease { return nil }

// Shards implements Deployment: a single process connects every shard.
func (*Local) Shards(Bot) adapters.Shards { return nil }

// Questions implements Deployment: every press reaches this process.
func (*Local) Questions(Bot) adapters.QuestionBook { return nil }

// AddQuestionCloser implements Deployment: no replica is ever taken over.
func (*Local) AddQuestionCloser(Bot, adapters.QuestionCloser) {}

// WebRelay implements Deployment: every page of a chat is served by this process.
func (*Local) WebRelay() web.Relay { return nil }

// Delivery implements Deployment: the engine paces every chat in memory.
func (*Local) Delivery(_ Bot, _ adapters.Limits, opts delivery.Options) delivery.Options { return opts }

// AddEngine implements Deployment: the engine keeps the whole bot-wide budget.
func (*Local) AddEngine(Bot, Engine) {}

// Instances implements Deployment: a single process lists no replicas.
func (*Local) Instances(context.Context) ([]Instance, error) { return nil, nil }

// Run implements Deployment: it hands the stops this process publishes to turns until ctx ends.
func (l *Local) Run(ctx context.Context, turns Stopper) error {
	l.mu.Lock()
	l.turns = turns
	l.mu.Unlock()
	<-ctx.Done()
	return nil
}

// Close implements Deployment: nothing to leave.
func (*Local) Close(context.Context) error { return nil }

var (
	_ Deployment = (*Local)(nil)
	_ Deployment = (*Replica)(nil)
)
