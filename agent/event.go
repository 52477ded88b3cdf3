package agent

import (
	"relaybot/chat"
	"relaybot/tools"
)

// Event is something the runner reports while a turn runs: a Chunk, ToolStart, ToolResult or
// RoundCapHit. Consumers switch on the concrete type.
type Event interface {
	event()
}

// Chunk is the answer of a round so far. Text is the full text shown of this round (not a delta,
// not including earlier rounds), so consumers replace what they display. The last Chunk of a round
// has Final set and carries the round's assembled ToolCalls, if any; tool calls never appear
// before that.
type Chunk struct {
	Round     int
	Text      string
	Final     bool
	ToolCalls []chat.ToolCall
}

// ToolStart is emitted before a tool call runs.
type ToolStart struct {
	Round int
	Call  chat.ToolCall
}

// ToolResult is emitted after a tool call ran; Outcome.Content is what the model receives.
type ToolResult struct {
	Round   int
	Call    chat.ToolCall
	Outcome tools.Outcome
}

// RoundCapHit is emitted when MaxToolRounds tool rounds have run and the model is asked one last
// time for an answer, with the tools listed but tool_choice "none".
type RoundCapHit struct {
	Round         int
	MaxToolRounds int
}

func (Chunk) event()       {}
func (ToolStart) event()   {}
func (ToolResult) event()  {}
func (RoundCapHit) event() {}
