// Package pipeline takes a user's message from an adapter to a delivered, persisted turn: access
// rules, rate limits and commands first; then one turn at a time per conversation (queued or
// interrupting), history from the store, the agent's run, and what the user sees of it (the
// response wrapper); finally the turn's messages and model calls go to the store.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"relaybot/adapters"
	"relaybot/agent"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/store"
	"relaybot/tools"
)

// Runner runs one turn of the agent, reporting events as they happen (agent.Runner).
type Runner interface {
	Run(ctx context.Context, req agent.Request, emit func(agent.Event)) *agent.Result
}

// Store keeps conversations and turns (store.Store).
type Store interface {
	Conversation(ctx context.Context, key chat.Key) (store.Conversation, error)
	ResetConversation(ctx context.Context, key chat.Key) (store.Conversation, error)
	StartTurn(ctx context.Context, t store.TurnStart) (int64, error)
	FinishTurn(ctx context.Context, e store.TurnEnd) error
	// Rounds returns the finished rounds after turn afterTurnID, the newest limit of them,
	// oldest first.
	Rounds(ctx context.Context, conversationID, afterTurnID int64, limit int) ([]store.Round, error)
	// SaveSummary records the summary of the rounds up to throughTurnID.
	SaveSummary(ctx context.Context, conversationID int64, summary string, throughTurnID int64) error
	SetConversationModel(ctx context.Context, conversationID int64, model string) error
	SetConversationSystemPrompt(ctx context.Context, conversationID int64, prompt string) error
	// RetryLastTurn takes the newest finished turn out of history and returns its user message.
	RetryLastTurn(ctx context.Context, conversationID int64) (store.Message, error)
}

// InboundTurns is implemented by stores that can find the turn a user's message started. With
// it, a message an adapter hands over again after a crash (adapters.Inbound.Redelivered) is
// answered only when its earlier turn never ended (it was still running, so the crash
// recovery marked it interrupted); without it, such a message is answered again.
type InboundTurns interface {
	// TurnByInbound returns the newest turn started by message inboundMessageID of the chat
	// (any of its conversations), and false when there is none.
	TurnByInbound(ctx context.Context, platform, chatID, inboundMessageID string) (store.Turn, bool, error)
	// SupersedeTurn takes the cut turn of a message answered again out of the history (status
	// retried), so the message is in the model's context once.
	SupersedeTurn(ctx context.Context, turnID int64) (bool, error)
}

// Toolbox offers the tools of a turn (tools.Manager).
type Toolbox interface {
	ForTurn(info tools.TurnInfo, allowed func(name string) bool) *tools.Turn
}

// Observer is told about every finished turn (metrics). TurnFinished is called from the turn's
// goroutine and must not block.
type Observer interface {
	TurnFinished(status string, took time.Duration)
}

// Options configure a Pipeline. Zero values take the documented defaults.
type Options struct {
	// Stops, when replicas share the bot, passes a /stop for a turn this replica does not run to
	// the others; nil for a single process.
	Stops StopPublisher
	// Gate, when replicas share the bot, keeps one turn at a time per conversation across them,
	// with the queue limit and busy policy holding for the deployment; nil for a single process,
	// whose conversations are ordered in its memory.
	Gate TurnGate
	// SystemPrompt starts every transcript; SystemPromptExtra, when set, returns text appended to
	// it at each turn (the skill index).
	SystemPrompt      string
	SystemPromptExtra func() string
	// HistoryRounds caps the whole user rounds of history considered for each message (0: none);
	// the token budget usually binds first.
	HistoryRounds int

	// Models are the configured models' token budgets, the primary first; empty: one model of
	// DefaultContextWindow.
	Models []ModelBudget
	// SelectableModels are the models /model may pick (by name); empty: all of Models.
	SelectableModels []string
	// CompactAt is the share of the history's room (the window less the answer, the system
	// prompt, the new message, the tools' schemas and room for one tool result) past which older
	// rounds are summarised (default DefaultCompactAt; negative: never, older rounds are left
	// out instead).
	CompactAt float64
	// ToolResultShare is the share of the history's room older tool results may fill, newest
	// first; the others are sent as a short elision note (default DefaultToolResultShare).
	ToolResultShare float64
	// ToolResultMaxChars is the cap of one tool result (agent.tool_result_max_chars): room for
	// one is kept free for the turn's own tool calls.
	ToolResultMaxChars int
	// IdleReset starts a fresh conversation when the last turn is older than this (0: never).
	IdleReset time.Duration
	// MaxImageBytes drops larger images a user sent (0: no limit).
	MaxImageBytes int

	// TrackFunctionCalls shows one status line per tool call.
	TrackFunctionCalls bool
	// Reasoning is how the model's reasoning is shown: ReasoningCollapsed (default: folded
	// under "Thinking", the way each surface folds), ReasoningHidden or ReasoningInline. The
	// agent's RemoveThink removes it before it gets here.
	Reasoning string
	// ExceptionHandling is "show-hint" (default: FailureHint), "show-error" or "hide".
	ExceptionHandling string
	FailureHint       string

	// Scope says who shares a group conversation (default ScopeChat).
	Scope Scope
	// Interrupt makes a new message cancel the conversation's running turn instead of waiting.
	Interrupt bool
	// QueueSize is how many messages may wait per conversation; past it the user is told the bot
	// is busy. Unlike the other fields, 0 is taken as given (nothing waits); the config's default
	// is DefaultQueueSize.
	QueueSize int
	// Settle is how long the first message of an idle conversation waits for messages the user
	// sent just before it that are still on their way (adapters hand each message over on its own
	// goroutine, so two quick messages may arrive swapped); default DefaultSettle
	// (DefaultReplicaSettle with a Gate), negative: none.
	Settle time.Duration
	// MaxTurnsInFlight bounds turns running at once (default 64); TurnWait bounds the wait for a
	// free slot (default 60 s) before the user is told the bot is busy.
	MaxTurnsInFlight int
	TurnWait         time.Duration
	// RateLimitPerMinute is the messages one user may send per minute; 0 turns the limit off.
	RateLimitPerMinute int
	// TurnTimeout bounds one turn, tool rounds included (default 15 min).
	TurnTimeout time.Duration

	// Texts the bot sends.
	HelpText        string
	BusyText        string
	RateLimitedText string
	StoppedMarker   string
	ShutdownText    string

	// Access lists who may talk to the bot and who is an admin.
	Access Access
	// ToolAllow, when not empty, are the tools offered in every chat; ToolsPerChat maps
	// "platform:chat_id" (the platform in any case) to the tools offered there instead.
	ToolAllow    []string
	ToolsPerChat map[string][]string

	// ApprovalTimeout is how long a tool call an "ask" policy covers waits for an answer in the
	// chat before it is denied (default DefaultApprovalTimeout).
	ApprovalTimeout time.Duration

	// Usage answers /usage and feeds the quotas; Prices are the models' prices per million
	// tokens, by configured model name.
	Usage  UsageLog
	Prices map[string]store.Price
	// Quotas cap what users and chats may spend; checked before each turn's model call.
	Quotas Quotas

	// Audit answers the /audit command; nil makes /audit say it is unavailable.
	Audit audit.Log
	// Recorder keeps refused /audit commands in the audit log; nil only logs them.
	Recorder tools.Recorder

	// ShutdownDeliverWait is how long final answers (the partial answers of cancelled turns
	// among them) and notices may still wait for the platform after Shutdown's grace period is
	// over (default DefaultShutdownDeliverWait). While the pipeline runs, a final answer waits
	// for the platform's rate limits as long as they last: it is never dropped for taking long.
	ShutdownDeliverWait time.Duration

	// Observer, when set, is told the status and duration of every finished turn (metrics).
	Observer Observer

	// Media says how voice notes, audio, documents and image files are read, and whether
	// answers are spoken too (media.go).
	Media MediaOptions

	// Logger receives one line per turn and per refused message; nil means slog.Default().
	Logger *slog.Logger
	// Now returns the current time (tests); nil means time.Now.
	Now func() time.Time
}

// Defaults of Options.
const (
	DefaultQueueSize        = 8
	DefaultMaxTurnsInFlight = 64
	DefaultTurnWait         = 60 * time.Second
	DefaultTurnTimeout      = 15 * time.Minute
	DefaultSettle           = 50 * time.Millisecond
	// DefaultReplicaSettle is Settle when replicas share the bot (Options.Gate): a message sent
	// just before may reach another replica and its database round trips first.
	DefaultReplicaSettle   = 200 * time.Millisecond
	DefaultApprovalTimeout = 300 * time.Second
	DefaultStoppedMarker   = "[stopped]"
	DefaultFailureHint     = "Request failed."
	DefaultShutdownText    = "The bot is restarting; please send that again in a minute."
	DefaultHelpText        = "Talk to me and I will answer. Commands: /reset starts a new conversation, /stop cancels the answer in progress, /retry answers your last message again, /compact summarises the conversation so far, /model lists or picks the model, /system shows or (admins) sets the system prompt, /usage shows what you have used, /help shows this."
	DefaultBusyText        = "I am still busy with earlier messages in this chat; please try again in a moment."
	DefaultRateLimitedText = "You are sending messages too fast; please wait a minute."
)

// DefaultShutdownDeliverWait is how long, by default, answers still being delivered may wait for
// the platform once the shutdown grace period is over.
const DefaultShutdownDeliverWait = 10 * time.Second

// saveTimeout bounds one store operation of a turn (its start, its end, a reset), whose own
// context may have ended.
const saveTimeout = 60 * time.Second

// Pipeline handles the messages of every adapter. It implements adapters.Handler.
type Pipeline struct {
	runner Runner
	store  Store
	tools  Toolbox
	opts   Options
	log    *slog.Logger
	access accessRules
	rate   *rateLimiter
	// idleStops limits "Nothing to stop." to one a minute per user.
	idleStops *rateLimiter
	turns     *turnQueue
	// usage corrects the token estimate by what providers report.
	usage *usageCorrection
	slots chan struct{}

	base     context.Context // parent of every turn; cancelled when the grace period ends
	stopBase context.CancelCauseFunc
	// deliver bounds the delivery of answers and notices: it ends ShutdownDeliverWait after the
	// grace period is over, never while the pipeline runs.
	deliver     context.Context
	stopDeliver context.CancelCauseFunc

	mu      sync.Mutex
	closed  bool
	drained bool           // Shutdown has seen every turn end
	running sync.WaitGroup // Handle calls in progress
}

// New returns a Pipeline. runner and st are required; toolbox may be nil (no tools).
func New(runner Runner, st Store, toolbox Toolbox, opts Options) (*Pipeline, error) {
	if runner == nil {
		return nil, errors.New("pipeline: a Runner is required")
	}
	if st == nil {
		return nil, errors.New("pipeline: a Store is required")
	}
	switch opts.ExceptionHandling {
	case "":
		opts.ExceptionHandling = "show-hint"
	case "show-hint", "show-error", "hide":
	default:
		return nil, fmt.Errorf("pipeline: exception handling must be show-hint, show-error or hide, got %q", opts.ExceptionHandling)
	}
	switch opts.Scope {
	case "":
		opts.Scope = ScopeChat
	case ScopeChat, ScopeUser:
	default:
		return nil, fmt.Errorf("pipeline: scope must be chat or user, got %q", opts.Scope)
	}
	if opts.QueueSize < 0 {
		return nil, fmt.Errorf("pipeline: queue size must not be negative, got %d", opts.QueueSize)
	}
	if opts.MaxTurnsInFlight <= 0 {
		opts.MaxTurnsInFlight = DefaultMaxTurnsInFlight
	}
	if opts.TurnWait <= 0 {
		opts.TurnWait = DefaultTurnWait
	}
	if opts.Settle == 0 {
		opts.Settle = DefaultSettle
		if opts.Gate != nil {
			opts.Settle = DefaultReplicaSettle
		}
	}
	if opts.ApprovalTimeout <= 0 {
		opts.ApprovalTimeout = DefaultApprovalTimeout
	}
	if opts.TurnTimeout <= 0 {
		opts.TurnTimeout = DefaultTurnTimeout
	}
	switch {
	case opts.CompactAt == 0:
		opts.CompactAt = DefaultCompactAt
	case opts.CompactAt > 1:
		return nil, fmt.Errorf("pipeline: CompactAt must be at most 1, got %v", opts.CompactAt)
	}
	switch {
	case opts.ToolResultShare == 0:
		opts.ToolResultShare = DefaultToolResultShare
	case opts.ToolResultShare < 0 || opts.ToolResultShare > 1:
		return nil, fmt.Errorf("pipeline: ToolResultShare must be between 0 and 1, got %v", opts.ToolResultShare)
	}
	for i, m := range opts.Models {
		if m.ContextWindow <= 0 || m.MaxOutputTokens < 0 || m.MaxOutputTokens >= m.ContextWindow {
			return nil, fmt.Errorf("pipeline: model %d (%s): context window %d and max output %d do not leave room for a prompt", i, m.Name, m.ContextWindow, m.MaxOutputTokens)
		}
	}
	if opts.ShutdownDeliverWait <= 0 {
		opts.ShutdownDeliverWait = DefaultShutdownDeliverWait
	}
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&opts.FailureHint, DefaultFailureHint)
	def(&opts.StoppedMarker, DefaultStoppedMarker)
	def(&opts.ShutdownText, DefaultShutdownText)
	def(&opts.HelpText, DefaultHelpText)
	def(&opts.BusyText, DefaultBusyText)
	def(&opts.RateLimitedText, DefaultRateLimitedText)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if len(opts.ToolsPerChat) > 0 {
		// Keys are matched like access entries: the platform in any case, no surrounding blanks.
		perChat := make(map[string][]string, len(opts.ToolsPerChat))
		for k, v := range opts.ToolsPerChat {
			plat, chat, _ := strings.Cut(k, ":")
			perChat[strings.ToLower(strings.TrimSpace(plat))+":"+strings.TrimSpace(chat)] = v
		}
		opts.ToolsPerChat = perChat
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	base, stop := context.WithCancelCause(context.Background())
	deliver, stopDeliver := context.WithCancelCause(context.Background())
	return &Pipeline{
		deliver:     deliver,
		stopDeliver: stopDeliver,
		runner:      runner,
		store:       st,
		tools:       toolbox,
		opts:        opts,
		log:         log,
		access:      compileAccess(opts.Access),
		rate:        newRateLimiter(opts.RateLimitPerMinute, time.Minute),
		idleStops:   newRateLimiter(1, time.Minute),
		turns:       newTurnQueue(opts.QueueSize, opts.Interrupt, opts.Settle),
		usage:       &usageCorrection{},
		slots:       make(chan struct{}, opts.MaxTurnsInFlight),
		base:        base,
		stopBase:    stop,
	}, nil
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
		p.markDrained()
		return nil
	case <-ctx.Done():
	}
	p.log.Info("pipeline: grace period over; cancelling running turns", "deliver_wait", p.opts.ShutdownDeliverWait)
	p.stopBase(ErrShutdown)
	p.turns.cancelAll(ErrShutdown)
	// The cancelled turns deliver their partial answers; answers the platform still holds back
	// after ShutdownDeliverWait are given up (and saved as not delivered).
	late := time.AfterFunc(p.opts.ShutdownDeliverWait, func() {
		p.stopDeliver(fmt.Errorf("%w: answers still waiting for the platform %s after the grace period", ErrShutdown, p.opts.ShutdownDeliverWait))
	})
	defer late.Stop()
	<-done
	p.stopDeliver(ErrShutdown)
	p.markDrained()
	return nil
}

// markDrained records that Shutdown has seen every turn end.
func (p *Pipeline) markDrained() {
	p.mu.Lock()
	p.drained = true
	p.mu.Unlock()
}

// deliveryContext returns the context a final answer or a notice is delivered with: while the
// pipeline runs it ends only ShutdownDeliverWait after the shutdown grace period is over (see
// Options.ShutdownDeliverWait); once Shutdown has seen every turn end, a new delivery (a notice
// to a message that came too late) may wait ShutdownDeliverWait at most.
func (p *Pipeline) deliveryContext() (context.Context, context.CancelFunc) {
	p.mu.Lock()
	drained := p.drained
	p.mu.Unlock()
	if drained {
		return context.WithTimeout(p.deliver, p.opts.ShutdownDeliverWait)
	}
	return context.WithCancel(p.deliver)
}

// Queued returns how many messages wait for their conversation's turn.
func (p *Pipeline) Queued() int { return p.turns.depth() }

// Handle implements adapters.Handler: it answers one message and returns when the turn (if any)
// has been delivered and saved.
func (p *Pipeline) Handle(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	log := p.log.With("platform", in.Chat.Platform, "chat", in.Chat.ChatID, "user", in.UserID)
	if ok, why := p.access.allowed(in); !ok {
		log.Warn("pipeline: message refused by access rules", "reason", why, "message", in.MessageID)
		return
	}
	if !p.enter() {
		// A message the adapter accepted just before it stopped receiving.
		log.Info("pipeline: message refused: shutting down", "message", in.MessageID)
		p.notice(out, p.opts.ShutdownText, log)
		return
	}
	defer p.running.Done()

	// The adapter parsed the command (adapters.ParseCommand) and dropped commands naming another
	// bot; text that merely starts with "/" is not one.
	cmd, args := in.Command, in.Args
	// Every message counts against the user's limit, commands included: a flood of /stop is a
	// flood like any other.
	sender := chat.User{Platform: in.Chat.Platform, ID: in.UserID}.String()
	if ok, first := p.rate.allow(sender, p.opts.Now()); !ok {
		log.Info("pipeline: message refused: rate limit", "message", in.MessageID)
		if first {
			p.notice(out, p.opts.RateLimitedText, log)
		}
		return
	}
	key := KeyOf(in, p.opts.Scope)
	switch cmd {
	case "help", "start":
		p.notice(out, p.opts.HelpText, log)
		return
	case "reset":
		p.reset(key, out, log)
		return
	case "stop":
		// In a chat shared by a group, only the member who asked (or an admin) stops an answer.
		admin := p.access.isAdmin(in)
		handled, askOthers := p.stopAcrossReplicas(key, in, admin, out, log)
		if handled {
			return
		}
		running, stopped := p.turns.stop(key.String(), ErrStopped, func(started adapters.Inbound) bool {
			return admin || started.UserID == in.UserID
		})
		switch {
		case !running && askOthers && p.stopElsewhere(key, in, admin, log):
			// Another replica may run it: passed on.
		case !running:
			// Said once a minute per user at most, even with the rate limit off.
			if ok, _ := p.idleStops.allow(sender, p.opts.Now()); ok {
				p.notice(out, "Nothing to stop.", log)
			}
		case !stopped:
			log.Info("pipeline: /stop refused: not the asker's turn")
			p.notice(out, "Only the person who asked, or an admin, can stop this answer.", log)
		}
		return
	case "audit":
		p.auditCommand(ctx, in, args, out, log)
		return
	case "usage":
		p.usageCommand(ctx, in, args, out, log)
		return
	case "model":
		p.modelCommand(key, args, out, log)
		return
	case "system":
		p.systemCommand(in, key, args, out, log)
		return
	case "retry", "compact":
		// Both wait for the conversation's turn like a message: they read and change its history.
		p.queue(key, in, out, log)
		return
	}
	if strings.TrimSpace(in.Text) == "" && len(in.Images) == 0 && len(in.Attachments) == 0 {
		return
	}
	p.queue(key, in, out, log)
}

// answered reports whether a message handed over again after a crash was already answered: a
// turn it started ended with a status other than interrupted. A failed lookup answers again.
// A message answered again takes its cut turn out of the history (retried).
func (p *Pipeline) answered(in adapters.Inbound, log *slog.Logger) bool {
	finder, ok := p.store.(InboundTurns)
	if !in.Redelivered || !ok || in.MessageID == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	t, found, err := finder.TurnByInbound(ctx, string(in.Chat.Platform), in.Chat.ChatID, in.MessageID)
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
		if _, err := finder.SupersedeTurn(ctx, t.ID); err != nil {
			log.Warn("pipeline: the cut turn of a redelivered message stays in the history", "turn", t.ID, "err", err)
		}
		return false
	}
	log.Info("pipeline: redelivered message already answered; skipped", "message", in.MessageID, "turn", t.ID, "status", t.Status)
	return true
}

// queue waits for the conversation's turn and a free slot, then runs the turn.
func (p *Pipeline) queue(key chat.Key, in adapters.Inbound, out adapters.Responder, log *slog.Logger) {
	if p.answered(in, log) {
		return
	}
	k := key.String()
	t, busy, err := p.turns.enqueue(k, in)
	if err != nil {
		log.Info("pipeline: message refused: conversation busy", "conversation", k, "message", in.MessageID)
		p.notice(out, p.opts.BusyText, log)
		return
	}
	defer p.turns.leave(k, t)
	ticket, admitted := p.gateEnter(k, in, log)
	if !admitted {
		log.Info("pipeline: message refused: conversation busy on the replicas", "conversation", k, "message", in.MessageID)
		p.notice(out, p.opts.BusyText, log)
		return
	}
	defer p.gateLeave(k, ticket, log)
	if busy {
		log.Debug("pipeline: message waits for its turn", "conversation", k, "message", in.MessageID)
	}
	// Waiting ignores ctx: an adapter that stops receiving at shutdown still gets its accepted
	// messages answered within the grace period; Shutdown ends the wait when it is over.
	select {
	case <-t.ready:
	case <-p.base.Done():
		p.dropped(ErrShutdown, in, out, log)
		return
	}
	if t.dropped != nil {
		p.dropped(t.dropped, in, out, log)
		return
	}
	if p.base.Err() != nil {
		p.dropped(ErrShutdown, in, out, log)
		return
	}
	if why := p.gateWait(k, ticket, log); why != nil {
		p.dropped(why, in, out, log)
		return
	}
	wait := time.NewTimer(p.opts.TurnWait)
	defer wait.Stop()
	select {
	case p.slots <- struct{}{}:
	case <-wait.C:
		log.Warn("pipeline: message refused: too many turns in flight", "limit", cap(p.slots), "message", in.MessageID)
		p.notice(out, p.opts.BusyText, log)
		return
	case <-p.base.Done():
		p.dropped(ErrShutdown, in, out, log)
		return
	}
	defer func() { <-p.slots }()

	turnCtx, cancel := context.WithCancelCause(p.base)
	defer cancel(nil)
	p.turns.started(k, t, cancel)
	if in.Command == "compact" {
		p.compactCommand(turnCtx, key, out, log)
		return
	}
	p.runTurn(turnCtx, key, in, out, log)
}

// dropped tells the user (at shutdown) or the log (when superseded) that a waiting message will
// not be answered.
func (p *Pipeline) dropped(why error, in adapters.Inbound, out adapters.Responder, log *slog.Logger) {
	log.Info("pipeline: waiting message dropped", "reason", why, "message", in.MessageID)
	if errors.Is(why, ErrShutdown) {
		p.notice(out, p.opts.ShutdownText, log)
	}
}

// notice sends a short message, logging a failure. Like a final answer, it waits for the
// platform's rate limits as long as the pipeline runs.
func (p *Pipeline) notice(out adapters.Responder, text string, log *slog.Logger) {
	ctx, cancel := p.deliveryContext()
	defer cancel()
	if err := out.Notice(ctx, text); err != nil {
		log.Warn("pipeline: notice not delivered", "err", err)
	}
}

// reset starts a new conversation for key.
func (p *Pipeline) reset(key chat.Key, out adapters.Responder, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	conv, err := p.store.ResetConversation(ctx, key)
	if err != nil {
		log.Error("pipeline: reset failed", "conversation", key.String(), "err", err)
		p.notice(out, p.failureText(err), log)
		return
	}
	log.Info("pipeline: conversation reset", "conversation", key.String(), "conversation_id", conv.ID)
	p.notice(out, "Started a new conversation.", log)
}

// failureText is what the user sees of an error, by exception_handling.
func (p *Pipeline) failureText(err error) string {
	switch p.opts.ExceptionHandling {
	case "show-error":
		return "Error: " + err.Error()
	case "hide":
		return ""
	default:
		return p.opts.FailureHint
	}
}
