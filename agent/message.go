// Package agent runs one conversation turn against an OpenAI-compatible model: it streams the
// answer (or asks for it whole), merges tool-call fragments, runs the requested tools one after
// another through a ToolExecutor, asks the model again with their results, and reports what
// happened as events and a Result.
//
// The behaviour follows LangBot's LocalAgentRunner (model fallback before the first chunk, an
// accumulator that flushes the full text every few raw chunks, sequential tool rounds, a round
// cap) and fixes its gaps: a stream that ends without a finish_reason is an error, and hitting
// the round cap ends with one more model call that may not call tools (tool_choice "none") so the
// transcript stays valid.
package agent

import (
	"context"
	"log/slog"
	"net/http"

	"relaybot/chat"
	"relaybot/provider"
	"relaybot/tools"
)

// Model is one candidate model. The runner tries candidates in the order given to NewRunner.
type Model struct {
	// Endpoint is where the model is reached. Its Name identifies the candidate in logs and
	// model calls (default: its Model id); its Timeout bounds the wait for the response
	// (non-streaming), for the first chunk and between two chunks (streaming), zero meaning no
	// limit beyond the turn's context.
	provider.Endpoint
	// SupportsTools says whether tool specs may be sent to this model.
	SupportsTools bool
	// SupportsVision says whether images may be sent to this model.
	SupportsVision bool
	// CacheBreakpoints marks Anthropic-style cache_control breakpoints in this model's requests
	// (Claude through OpenRouter or another gateway that takes them): on the system prompt's
	// stable part, on the last message of the history and on the last message sent. Other
	// models cache a repeated prefix by themselves and get no such field.
	CacheBreakpoints bool
}

// Options tune a Runner. Zero values take the documented defaults.
type Options struct {
	// MaxToolRounds caps the tool rounds of a turn (default 128). After that many rounds the model
	// is asked once more with tool_choice "none" (the tools stay listed, which gateways require
	// of a history with tool calls), and a RoundCapHit event is emitted.
	MaxToolRounds int
	// FlushChunks is how many raw stream chunks pass between two Chunk events (default 8); the
	// final chunk of a round is always emitted.
	FlushChunks int
	// RemoveThink strips <think>…</think> blocks (and a leading orphan </think>) from the text
	// shown, and hides reasoning_content. The removed reasoning is kept in
	// chat.Message.Reasoning.
	RemoveThink bool
	// Logger receives warnings (fallbacks, the round cap); nil discards them.
	Logger *slog.Logger
	// HTTPClient makes the model calls; nil uses a client without its own timeout.
	HTTPClient *http.Client
	// Observer, when set, is told about every model call when it ends (metrics).
	Observer provider.Observer
}

// ToolExecutor runs one tool call. The runner calls it for the calls of a round one after another,
// in order, and waits for each (or for the turn's context to end), unless the executor is a
// ParallelExecutor that runs the round side by side.
//
// Contract (tools.Turn keeps it): the executor owns everything about a call's outcome. Execute
// returns Outcome.Status and Err, which the runner's consumers read, and Outcome.Content, which is
// sent to the model verbatim as the tool message: the result capped to its size limit, or
// tools.ErrorText on any failure (arguments that are not valid JSON, an unknown tool, a tool
// error, timeout or panic). It records every call for the audit log. Skip answers a call the runner
// will not run (the turn was cancelled before it, or the length limit cut its arguments off) and
// records it too. The runner only maps empty arguments to "{}" before the call; if an executor
// leaves Content empty while reporting Err it sends tools.ErrorText(Err), a panic becomes
// tools.Panicked, and an empty result goes upstream as "(no output)" because providers reject
// empty tool messages. Execute must return soon after ctx is cancelled; the runner itself stops
// waiting at once. Skip must not block on ctx (it is called with a cancelled one).
type ToolExecutor interface {
	Execute(ctx context.Context, call tools.Call) tools.Outcome
	Skip(ctx context.Context, call tools.Call, reason error) tools.Outcome
}

// ParallelExecutor is a ToolExecutor that may run a round's calls side by side (tools.Turn).
// The runner asks Parallel for every round of more than one call; when it says yes, RunParallel
// runs the whole round, calling done once per call as it ends (from any goroutine; done does
// not block). The tool messages still go to the model in the model's order. RunParallel keeps
// Execute's contract for each call and must return soon after ctx is cancelled.
type ParallelExecutor interface {
	ToolExecutor
	Parallel(calls []tools.Call) bool
	RunParallel(ctx context.Context, calls []tools.Call, done func(i int, out tools.Outcome)) []tools.Outcome
}

// Request is one turn.
type Request struct {
	// Messages is the whole transcript to send: system prompt, history and the new user message.
	Messages []chat.Message
	// Tools are offered to models with SupportsTools.
	Tools []tools.Spec
	// ToolsListedOnly lists Tools without letting the model call them (tool_choice "none"): a
	// request that must share the prompt's prefix with the conversation's (its tools' schemas
	// come first), such as the summary of a conversation asked for at its end.
	ToolsListedOnly bool
	// Executor runs the calls the model makes; nil answers every call as a tool not found.
	Executor ToolExecutor
	// Stream asks for a streamed answer (the adapter's capability). Without it each round's answer
	// arrives whole, as a single final Chunk event.
	Stream bool
	// Model, when it names a candidate (Model.Name), is tried first; the others stay fallbacks in
	// their order. Empty or unknown: the order given to NewRunner.
	Model string
	// Estimate, when set, estimates the tokens msgs and specs cost with the model named (its
	// configured Name). The runner records the prompt's estimate plus that of the answer so far
	// as the usage of a call the provider reported none for (a stopped, cut or failed stream),
	// marked Estimated, and hands the prompt's estimate to Meter. Nil: such calls record zero.
	Estimate func(model string, msgs []chat.Message, specs []tools.Spec) int
	// Meter, when set, is asked before every model call of the turn (each candidate tried) and
	// told when it ends: quotas that hold inside a long turn and across concurrent ones.
	Meter Meter
}

// Usage counts tokens as the provider reported them (zero when it did not).
type Usage struct {
	TokensIn  int
	TokensOut int
}

// Result is the outcome of a turn.
type Result struct {
	// Messages are the new history messages of the turn, in order: assistant messages (with tool
	// calls), their tool messages, …, and the final assistant message. When the turn fails or is
	// cancelled they hold the completed part; every assistant tool call has its tool message.
	Messages []chat.Message
	// Usage sums the usage of the turn's model calls.
	Usage Usage
	// LLMCalls lists every model call in order, failed attempts included.
	LLMCalls []chat.ModelCall
	// Status is ok, error or cancelled; Err says why when not ok.
	Status chat.Status
	Err    error
	// PartialText is the text shown of the round that was interrupted (error or cancel); empty on
	// success. When reasoning is shown it starts with a <think> block: it is for display only.
	PartialText string
	// Partial is the interrupted round's answer so far as a history message (role assistant, no
	// tool calls): its Content never holds the <think> block of the shown text, the reasoning is
	// in Reasoning, as on a completed answer. Zero when PartialText is empty.
	Partial chat.Message
	// Truncated reports that the final answer was cut because the model reached its length limit
	// (finish_reason "length"). The answer is kept and Status stays ok.
	Truncated bool
	// RoundCapHit reports that MaxToolRounds was reached and the last answer was asked for
	// with tool_choice "none".
	RoundCapHit bool
}
