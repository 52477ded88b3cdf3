package pipeline

import (
	"fmt"
	"log/slog"
	"relaybot/media/sandbox"
	"strings"
	"time"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/pipeline/access"
	"relaybot/pipeline/asking"
	"relaybot/pipeline/history"
	"relaybot/pipeline/knowledge"
	"relaybot/pipeline/memory"
	"relaybot/pipeline/quota"
	"relaybot/tools"
)

// Options configure a Pipeline, grouped by the part that reads them. Zero values take the
// documented defaults. The enums come checked (cmd/bot converts them from the config); only
// their zero values take a default here.
type Options struct {
	// Replicas is the deployment the bot runs in (coord.Replica): one turn at a time per
	// conversation across the replicas, with the queue limit and busy policy holding for the
	// deployment, and /stop carried to the one running the turn. nil means this process alone,
	// whose conversations are ordered in its memory.
	Replicas Replicas
	// Stamper, when replicas fence their work (coord.Replica), marks each turn's context with
	// the epoch it begins under; nil: turns are not stamped.
	Stamper Stamper
	// Prompts, when several replicas serve the bot (coord.Replica), carries a typed answer to a
	// tool's reply prompt to the replica whose turn asked; nil: every answer lands here.
	Prompts asking.PromptRelay

	// Access lists who may talk to the bot and who is an admin; RateLimitPerMinute is the
	// messages one user may send per minute (0 turns the limit off).
	Access             access.Lists
	RateLimitPerMinute int
	// Scope says who shares a group conversation (default ScopeChat).
	Scope Scope
	// Queue orders each conversation's turns and bounds the turns running at once.
	Queue QueueOptions
	// History is how each turn's transcript is built (the history part).
	History history.Options
	// Models are the configured models' budgets, which of them /model may pick, and prices.
	Models ModelOptions
	// Output is what the user sees of a turn; Texts are the notices the bot sends.
	Output OutputOptions
	Texts  Texts
	// Tools are the tools offered per chat and how long an approval question waits.
	Tools ToolOptions
	// Media says how voice notes, audio, documents and image files are read, and whether
	// answers are spoken too (media.go).
	Media MediaOptions
	// Memory, when set, recalls the speaker's facts into each turn, learns from their messages
	// after the answer is delivered, and answers /memory and /forget (memory.go); nil: off.
	Memory *memory.Memory
	// Knowledge, when set, puts the best chunks of the "auto" knowledge bases that serve a chat
	// into each turn there (knowledge.go); nil: none. Its search_knowledge tool is a loader of
	// the tool manager.
	Knowledge *knowledge.Knowledge
	// Resources, when set, puts the MCP resources an admin attached to a chat into each turn
	// there (attached.go); nil: none.
	Resources AttachedResources
	// MCPPrompts, when set, runs /prompt NAME args: an MCP prompt an admin enabled, whose
	// messages are the turn's input (prompt.go); nil: /prompt says none are enabled.
	MCPPrompts MCPPrompts

	// Tasks answers /tasks and /timezone (package tasks); nil: the commands say scheduled tasks
	// are off.
	Tasks TaskCommands

	// Usage answers /usage and feeds the quotas; Quotas cap what users and chats may spend,
	// checked before each turn, and checked and reserved before each model call (atomically
	// across replicas: Store.ModelCalls).
	Usage  quota.UsageLog
	Quotas quota.Policy
	// Audit answers the /audit command (nil: /audit says it is unavailable); Recorder keeps
	// refused /audit commands in the audit log (nil: only logged).
	Audit    audit.Log
	Recorder tools.Recorder

	// ShutdownDeliverWait is how long final answers (the partial answers of cancelled turns
	// among them) and notices may still wait for the platform after Shutdown's grace period is
	// over (default DefaultShutdownDeliverWait). While the pipeline runs, a final answer waits
	// for the platform's rate limits as long as they last: it is never dropped for taking long.
	ShutdownDeliverWait time.Duration
	// Observer, when set, is told the status and duration of every finished turn (metrics).
	Observer Observer
	// Logger receives one line per turn and per refused message; nil means slog.Default().
	Logger *slog.Logger
	// Now returns the current time (tests); nil means time.Now.
	Now func() time.Time
}

// QueueOptions order the turns of each conversation (one at a time) and bound those in flight.
type QueueOptions struct {
	// Busy is what a message does to a conversation answering an earlier one (default
	// BusyQueue: it waits; BusyInterrupt cancels the running turn instead).
	Busy Busy
	// Size is how many messages may wait per conversation; past it the user is told the bot is
	// busy. Unlike the other fields, 0 is taken as given (nothing waits); the config's default
	// is DefaultQueueSize.
	Size int
	// Settle is how long the first message of an idle conversation waits for messages the user
	// sent just before it that are still on their way (adapters hand each message over on its
	// own goroutine, so two quick messages may arrive swapped); default DefaultSettle
	// (DefaultReplicaSettle when Replicas are shared), negative: none.
	Settle time.Duration
	// MaxTurnsInFlight bounds turns running at once (default 64); TurnWait bounds the wait for a
	// free slot (default 60 s) before the user is told the bot is busy.
	MaxTurnsInFlight int
	TurnWait         time.Duration
	// TurnTimeout bounds one turn, tool rounds included (default 15 min).
	TurnTimeout time.Duration
}

// interrupt reports whether a new message cancels the running turn.
func (q QueueOptions) interrupt() bool { return q.Busy == BusyInterrupt }

// ModelOptions describe the configured models as the pipeline sees them.
type ModelOptions struct {
	// Budgets are the models' token budgets, the primary first; empty: one model of
	// history.DefaultContextWindow.
	Budgets []history.ModelBudget
	// Selectable are the models /model may pick (by name); empty: all of Budgets.
	Selectable []string
	// Prices are the models' prices per million tokens, by configured model name.
	Prices map[string]chat.Price
}

// OutputOptions decide what the user sees of a turn.
type OutputOptions struct {
	// TrackFunctionCalls shows one status line per tool call.
	TrackFunctionCalls bool
	// Reasoning is how the model's reasoning is shown (default ReasoningCollapsed:
	// folded under "Thinking", the way each surface folds). The agent's RemoveThink removes it
	// before it gets here.
	Reasoning Reasoning
	// ExceptionHandling is what a user sees of a failure (default ShowHint:
	// Texts.FailureHint).
	ExceptionHandling ExceptionHandling
}

// Texts are the notices the bot sends.
type Texts struct {
	// Help answers /help; empty lists the command table after HelpIntro.
	Help        string
	Busy        string
	RateLimited string
	Stopped     string
	Shutdown    string
	// FailureHint is told of a failure of the bot itself (its database, a command); a turn the
	// model did not answer is told by its kind instead: Refused, Unavailable, Misconfigured, Quota
	// (chat.Failure; defaults DefaultRefusedText, ...).
	FailureHint   string
	Refused       string
	Unavailable   string
	Misconfigured string
	Quota         string
}

// ToolOptions say which tools each chat is offered and how approvals wait.
type ToolOptions struct {
	// Allow, when not empty, are the tools offered in every chat; PerChat maps
	// "platform:chat_id" (the platform in any case) to the tools offered there instead.
	Allow   []string
	PerChat map[string][]string
	// ApprovalTimeout is how long a tool call an "ask" policy covers waits for an answer in the
	// chat before it is denied (default DefaultApprovalTimeout).
	ApprovalTimeout time.Duration
	// MaxOpenQuestions is how many approval questions of one user may wait at once (on this
	// replica); a call past them is denied without a question (default DefaultMaxOpenQuestions).
	MaxOpenQuestions int
	// Consents are the "always allow" answers, listed and revoked by /allowed (the store; nil:
	// /allowed says they are not kept).
	Consents audit.Consents
}

// Defaults of Options.
const (
	DefaultQueueSize        = 8
	DefaultMaxTurnsInFlight = 64
	DefaultTurnWait         = 60 * time.Second
	DefaultTurnTimeout      = 15 * time.Minute
	DefaultSettle           = 50 * time.Millisecond
	// DefaultReplicaSettle is Settle when replicas share the bot (Replicas.Shared): a message sent
	// just before may reach another replica and its database round trips first.
	DefaultReplicaSettle   = 200 * time.Millisecond
	DefaultApprovalTimeout = 300 * time.Second
	// DefaultMaxOpenQuestions is Tools.MaxOpenQuestions when 0.
	DefaultMaxOpenQuestions = 3
	DefaultStoppedMarker    = "[stopped]"
	DefaultFailureHint      = "Request failed."
	DefaultShutdownText     = "The bot is restarting; please send that again in a minute."
	DefaultBusyText         = "I am still busy with earlier messages in this chat; please try again in a moment."
	DefaultRateLimitedText  = "You are sending messages too fast; please wait a minute."
	// HelpIntro opens /help's list of the commands.
	HelpIntro = "Talk to me and I will answer. Commands:"
)

// DefaultShutdownDeliverWait is how long, by default, answers still being delivered may wait for
// the platform once the shutdown grace period is over.
const DefaultShutdownDeliverWait = 10 * time.Second

// fill sets the defaults of the fields left zero and checks the numbers config does not bound.
func (o *Options) fill() error {
	if o.Output.ExceptionHandling == "" {
		o.Output.ExceptionHandling = ShowHint
	}
	if o.Scope == "" {
		o.Scope = ScopeChat
	}
	if o.Replicas == nil {
		o.Replicas = alone{}
	}
	if err := o.Queue.fill(o.Replicas.Shared()); err != nil {
		return err
	}
	if o.Tools.MaxOpenQuestions <= 0 {
		o.Tools.MaxOpenQuestions = DefaultMaxOpenQuestions
	}
	if o.Tools.ApprovalTimeout <= 0 {
		o.Tools.ApprovalTimeout = DefaultApprovalTimeout
	}
	if o.ShutdownDeliverWait <= 0 {
		o.ShutdownDeliverWait = DefaultShutdownDeliverWait
	}
	o.Texts.fill()
	if o.Now == nil {
		o.Now = time.Now
	}
	if len(o.Tools.PerChat) > 0 {
		// Keys are matched like access entries: the platform in any case, no surrounding blanks.
		perChat := make(map[string][]string, len(o.Tools.PerChat))
		for k, v := range o.Tools.PerChat {
			plat, chat, _ := strings.Cut(k, ":")
			perChat[strings.ToLower(strings.TrimSpace(plat))+":"+strings.TrimSpace(chat)] = v
		}
		o.Tools.PerChat = perChat
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Media.Reader == nil {
		r, err := sandbox.New(sandbox.Limits{})
		if err != nil {
			return err
		}
		o.Media.Reader = r
	}
	return nil
}

func (q *QueueOptions) fill(replicas bool) error {
	if q.Size < 0 {
		return fmt.Errorf("pipeline: queue size must not be negative, got %d", q.Size)
	}
	if q.MaxTurnsInFlight <= 0 {
		q.MaxTurnsInFlight = DefaultMaxTurnsInFlight
	}
	if q.TurnWait <= 0 {
		q.TurnWait = DefaultTurnWait
	}
	if q.Settle == 0 {
		q.Settle = DefaultSettle
		if replicas {
			q.Settle = DefaultReplicaSettle
		}
	}
	if q.TurnTimeout <= 0 {
		q.TurnTimeout = DefaultTurnTimeout
	}
	return nil
}

func (t *Texts) fill() {
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&t.FailureHint, DefaultFailureHint)
	def(&t.Refused, DefaultRefusedText)
	def(&t.Unavailable, DefaultUnavailableText)
	def(&t.Misconfigured, DefaultMisconfiguredText)
	def(&t.Quota, DefaultQuotaText)
	def(&t.Stopped, DefaultStoppedMarker)
	def(&t.Shutdown, DefaultShutdownText)
	def(&t.Help, Commands().Help(HelpIntro))
	def(&t.Busy, DefaultBusyText)
	def(&t.RateLimited, DefaultRateLimitedText)
}

// failureText is what the user sees of a failure of the bot itself (no chat.Failure), by
// exception_handling.
func (o *Options) failureText(err error) string {
	switch o.Output.ExceptionHandling {
	case ShowError:
		return "Error: " + err.Error()
	case Hide:
		return ""
	default:
		return o.Texts.FailureHint
	}
}
