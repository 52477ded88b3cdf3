// Package pipeline takes a user's message from an adapter to a delivered, persisted turn: access
// rules, rate limits and commands first; then one turn at a time per conversation (queued or
// interrupting), history from the store, the agent's run, and what the user sees of it (the
// response wrapper); finally the turn's messages and model calls go to the store.
package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"relaybot/adapters"
	"relaybot/agent"
	"relaybot/chat"
	"relaybot/pipeline/access"
	"relaybot/pipeline/asking"
	"relaybot/pipeline/history"
	"relaybot/pipeline/quota"
	"relaybot/store"
	"relaybot/tools"
)

// Runner runs one turn of the agent, reporting events as they happen (agent.Runner).
type Runner interface {
	Run(ctx context.Context, req agent.Request, emit func(agent.Event)) *agent.Result
}

// Store is the part of the bot's database the pipeline keeps its conversations and turns in:
// one query type a field, as *store.Database has them. Every field is required.
type Store struct {
	Conversations Conversations    // *store.ConversationQuery
	Turns         Turns            // *store.TurnQuery
	Messages      HistoryRounds    // *store.MessageQuery
	ModelCalls    quota.CallLedger // *store.ModelCallQuery
	ToolCalls     CutCalls         // *store.ToolCallQuery
}

// check reports the first field of s that is missing.
func (s Store) check() error {
	switch {
	case s.Conversations == nil:
		return errors.New("pipeline: Store.Conversations is required")
	case s.Turns == nil:
		return errors.New("pipeline: Store.Turns is required")
	case s.Messages == nil:
		return errors.New("pipeline: Store.Messages is required")
	case s.ModelCalls == nil:
		return errors.New("pipeline: Store.ModelCalls is required")
	case s.ToolCalls == nil:
		return errors.New("pipeline: Store.ToolCalls is required")
	}
	return nil
}

// Conversations keeps the conversations of each chat and their choices (model, system prompt,
// summary).
type Conversations interface {
	Conversation(ctx context.Context, key chat.Key) (store.Conversation, error)
	ResetConversation(ctx context.Context, key chat.Key) (store.Conversation, error)
	// SaveSummary records the summary of the rounds up to throughTurnID.
	SaveSummary(ctx context.Context, conversationID int64, summary string, throughTurnID int64) error
	SetConversationModel(ctx context.Context, conversationID int64, model string) error
	SetConversationSystemPrompt(ctx context.Context, conversationID int64, prompt string) error
}

// Turns keeps the turns. A turn's id is taken ahead (NewTurnID), so that its start (its row and
// the user's message) rides in its first model call's reservation, one commit for both; the
// message is still saved before the model is called, and a turn that makes no call (stopped
// before it) has its start written alone (StartTurn). A message an adapter hands over again
// after a crash (adapters.Inbound.Redelivered) is answered again only when its earlier turn
// never ended (TurnByInbound), and its cut turn then leaves the history (SupersedeTurn).
type Turns interface {
	NewTurnID(ctx context.Context) (int64, error)
	StartTurn(ctx context.Context, t store.TurnStart) (int64, error)
	FinishTurn(ctx context.Context, e store.TurnEnd) error
	// RetryLastTurn takes the newest finished turn (of userID, or of anyone when empty) out of
	// history and returns its user message and sender.
	RetryLastTurn(ctx context.Context, conversationID int64, userID string) (store.Retried, error)
	// TurnByInbound returns the newest turn started by message inboundMessageID of the chat
	// (any of its conversations), and false when there is none.
	TurnByInbound(ctx context.Context, ref chat.Ref, inboundMessageID string) (store.Turn, bool, error)
	// SupersedeTurn takes the cut turn of a message answered again out of the history (status
	// retried), so the message is in the model's context once.
	SupersedeTurn(ctx context.Context, turnID int64) (bool, error)
}

// HistoryRounds reads a conversation's history.
type HistoryRounds interface {
	// Rounds returns the finished rounds after turn afterTurnID, the newest limit of them,
	// oldest first.
	Rounds(ctx context.Context, conversationID, afterTurnID int64, limit int) ([]store.Round, error)
}

// Toolbox offers the tools of a turn (tools.Manager).
type Toolbox interface {
	ForTurn(info tools.TurnInfo, allowed func(name string) bool) *tools.Turn
}

// Observer is told about every turn (metrics, traces). Its methods are called from the turn's
// goroutine and must not block.
type Observer interface {
	// TurnStarted is told that a turn begins, once it has its id (its row exists, or is
	// written with the turn's first model call's reservation, before the call); the turn runs
	// (model calls, tools, its reply) in the context it returns, which may carry what the
	// observer keeps for the turn (a trace span).
	TurnStarted(ctx context.Context, t TurnStart) context.Context
	// TurnFinished is told how the turn ended, with the context TurnStarted returned, before
	// the turn is saved: the observer may fill end's TraceID and Deliveries, saved with it.
	TurnFinished(ctx context.Context, end *TurnFinish, took time.Duration)
}

// TurnFinish describes how a turn ended, as its observers see it.
type TurnFinish struct {
	TurnID int64
	Status chat.Status
	// Model is the model that answered; Rounds how many model calls the turn made.
	Model               string
	Rounds              int
	TokensIn, TokensOut int
	// Error is what went wrong, when Status is not chat.StatusOK.
	Error string
	// Answer is the text of the turn's last assistant message; empty when it has none.
	Answer string

	// TraceID is the turn's OpenTelemetry trace id (32 hex digits), filled by an observer that
	// traces; Deliveries the platform requests of the turn's reply, in order (at most
	// chat.MaxDeliveries), filled by an observer that keeps them.
	TraceID    string
	Deliveries []chat.Delivery
}

// TurnStart describes a turn that begins.
type TurnStart struct {
	TurnID, ConversationID int64
	Chat                   chat.Ref
	UserID                 string
	// Text is the user's message.
	Text string
	// Begun is when the pipeline took the message up (before its quota check and the save).
	Begun time.Time
}

// saveTimeout bounds a command's store operation (a reset, /usage, /audit), whose own context
// may have ended, and on the message path all the tries of a write made outside a turn (the
// turn queue, a redelivered message's cut turn, a /stop passed on); each try there, and every
// write of a turn, has store.WriteAttempt (store.Retry).
const saveTimeout = 60 * time.Second

// Pipeline handles the messages of every adapter. It implements adapters.Handler. It checks
// access and the rate limit, answers the command table (commands.go), and queues each message
// for its conversation's turn (queue.go); a turn (turn.go) is run with the pipeline's parts,
// each a package that knows nothing of the pipeline: the history a turn is given
// (pipeline/history), the quotas its model calls are held to (pipeline/quota), the questions it
// asks in the chat (pipeline/asking), and who may talk to the bot (pipeline/access). A new part
// (memory, knowledge, scheduled tasks) is a package of the same kind that the turn or the
// command table takes.
type Pipeline struct {
	// first are the options New took: their queue, scope, rate limit, approval and shutdown
	// fields hold for the pipeline's life. The rest is live: what a message is answered with
	// now, replaced whole by Reconfigure.
	first Options
	live  atomic.Pointer[live]
	store Store
	log   *slog.Logger
	rate  *quota.RateLimiter
	// idleStops limits "Nothing to stop." to one a minute per user.
	idleStops *quota.RateLimiter
	commands  map[string]command
	// turns orders each conversation's turns here, gate across the replicas; slots bound the
	// turns in flight.
	turns  *turnQueue
	gate   *gate
	slots  slots
	outbox *outbox
	// asking holds the approval questions waiting and the tools' questions open in chats.
	asking *asking.Questions

	base     context.Context // parent of every turn; cancelled when the grace period ends
	stopBase context.CancelCauseFunc

	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup // Handle calls in progress
}

// request is one message being handled, with what every part needs of it.
type request struct {
	ctx context.Context
	in  adapters.Inbound
	key chat.Key
	out adapters.Responder
	log *slog.Logger
	// sender names the user across platforms ("telegram:42").
	sender string
	// live is the configuration the message is answered with: the one of its arrival for a
	// command, the one of its turn's start for a turn (queue).
	live *live
	// slot is the message's place among the turns in flight, once it has one (queue).
	slot *turnSlot
	// resumed are the tool calls (the assistant's messages asking for them, and their results)
	// that finished in the cut turn of a message answered again: the turn's transcript goes on
	// from them, and its record keeps them (finishedCalls).
	resumed []chat.Message
}

// New returns a Pipeline. runner and st are required; toolbox may be nil (no tools).
func New(runner Runner, st Store, toolbox Toolbox, opts Options) (*Pipeline, error) {
	if runner == nil {
		return nil, errors.New("pipeline: a Runner is required")
	}
	if err := st.check(); err != nil {
		return nil, err
	}
	if err := opts.fill(); err != nil {
		return nil, err
	}
	base, stop := context.WithCancelCause(context.Background())
	p := &Pipeline{
		first:     opts,
		store:     st,
		log:       opts.Logger,
		rate:      quota.NewRateLimiter(opts.RateLimitPerMinute, time.Minute),
		idleStops: quota.NewRateLimiter(1, time.Minute),
		turns:     newTurnQueue(opts.Queue.Size, opts.Queue.interrupt(), opts.Queue.Settle),
		slots:     slots{c: make(chan struct{}, opts.Queue.MaxTurnsInFlight), wait: opts.Queue.TurnWait},
		outbox:    newOutbox(opts.ShutdownDeliverWait),
		base:      base,
		stopBase:  stop,
	}
	p.gate = &gate{replicas: opts.Replicas, base: base, size: opts.Queue.Size, interrupt: opts.Queue.interrupt(), outbox: p.outbox}
	p.asking = asking.New(asking.Options{Timeout: opts.Tools.ApprovalTimeout, MaxOpen: opts.Tools.MaxOpenQuestions,
		Admins: access.Compile(opts.Access).Admins(), Relay: opts.Prompts, Now: opts.Now, Recorder: opts.Recorder, Logger: opts.Logger})
	l, err := p.build(runner, toolbox, opts)
	if err != nil {
		return nil, err
	}
	p.live.Store(l)
	p.commands = map[string]command{}
	for _, c := range commandTable() {
		p.commands[c.spec.Name] = c
		for _, a := range c.spec.Aliases {
			p.commands[a] = c
		}
	}
	return p, nil
}

// enter registers a Handle call; it fails once Shutdown has begun.
func (p *Pipeline) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.running.Add(1)
	return true
}

// Shutdown stops taking new messages and waits for the running turns (and the messages already
// waiting for their turn) to finish. When ctx ends first, it cancels them: each delivers and
// saves its partial answer (status interrupted), and Shutdown returns once they have.
func (p *Pipeline) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		p.running.Wait()
		close(done)
	}()
	select {
	case <-done:
		p.stopBase(ErrShutdown)
		p.outbox.drain(false)
		return nil
	case <-ctx.Done():
	}
	p.log.Info("pipeline: grace period over; cancelling running turns", "deliver_wait", p.first.ShutdownDeliverWait)
	p.stopBase(ErrShutdown)
	p.turns.cancelAll(ErrShutdown)
	// The cancelled turns deliver their partial answers; answers the platform still holds back
	// after ShutdownDeliverWait are given up (and saved as not delivered).
	stopLate := p.outbox.giveUpAfter()
	defer stopLate()
	<-done
	p.outbox.drain(true)
	return nil
}

// Queued returns how many messages wait for their conversation's turn.
func (p *Pipeline) Queued() int { return p.turns.depth() }

// Handle implements adapters.Handler: it answers one message and returns when the turn (if any)
// has been delivered and saved. A message passes the access rules and the user's rate limit
// (commands count too: a flood of /stop is a flood like any other); a command of the table is
// answered by it, any other message waits for its conversation's turn. The adapter hears that
// the message has its place in that order (in.Placed) before anything it waits for: once the
// deployment's queue holds it, before a command's answer or a refusal's notice.
func (p *Pipeline) Handle(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	defer placed(in) // the paths that wait for nothing
	log := p.log.With("platform", in.Chat.Platform, "chat", in.Chat.ChatID, "user", in.UserID)
	l := p.now()
	if ok, why := l.access.Allowed(in); !ok {
		log.Warn("pipeline: message refused by access rules", "reason", why, "message", in.MessageID)
		return
	}
	if !p.enter() {
		// A message the adapter accepted just before it stopped receiving.
		log.Info("pipeline: message refused: shutting down", "message", in.MessageID)
		placed(in)
		p.outbox.notice(out, l.opts.Texts.Shutdown, log)
		return
	}
	defer p.running.Done()
	r := &request{ctx: ctx, in: in, key: history.KeyOf(in, p.first.Scope == ScopeUser), out: out, log: log, live: l,
		sender: chat.User{Platform: in.Chat.Platform, ID: in.UserID}.String()}
	if ok, first := p.rate.Allow(r.sender, l.opts.Now()); !ok {
		log.Info("pipeline: message refused: rate limit", "message", in.MessageID)
		placed(in)
		if first {
			p.outbox.notice(out, l.opts.Texts.RateLimited, log)
		}
		return
	}
	if p.asking.Take(ctx, in) {
		// The answer to a tool's question the running turn asked here, or on another replica.
		return
	}
	// The adapter parsed the command (adapters.ParseCommand) and dropped commands naming another
	// bot; text that merely starts with "/" is not one, nor is a command the table lacks.
	if c, ok := p.commands[in.Command]; ok {
		if !c.queued {
			placed(in)
		}
		c.run(p, r)
		return
	}
	if strings.TrimSpace(in.Text) == "" && len(in.Images) == 0 && len(in.Attachments) == 0 {
		return
	}
	p.queue(r)
}

// placed tells the adapter that in has its place in its conversation's order, or takes none
// (adapters.Inbound.Placed).
func placed(in adapters.Inbound) {
	if in.Placed != nil {
		in.Placed()
	}
}
