package chat

import "encoding/json"

// Message is one entry of a conversation's transcript: what the agent's runner sends the model
// and gets back, what the store keeps of it and the history loads again.
type Message struct {
	Role    Role
	Content string
	// Name is the sender's name on a user message, the answering tool's name on a tool message.
	Name string
	// Reasoning is the model's separate reasoning (the reasoning_content field of DeepSeek-style
	// providers, Groq's and Ollama's reasoning field, Mistral's thinking parts, or the text of
	// <think> blocks removed with remove_think). It is kept in history. It is sent back upstream
	// only when it arrived as reasoning_content (ReasoningField), and then on the assistant
	// messages of a user turn in which the model called tools, as DeepSeek's thinking mode
	// requires (it rejects such a history without them, and ignores the reasoning of turns without
	// tool calls). Groq and Cerebras reject reasoning fields on assistant messages, so reasoning
	// that came in another form never goes back.
	Reasoning string
	// ReasoningField is the wire field the reasoning arrived in: "reasoning_content", or empty
	// (another field, <think> tags, or none).
	ReasoningField string
	// ToolCallID links a tool message to the call it answers.
	ToolCallID string
	// Images came with a user message. They go upstream as data URLs when the model supports
	// vision; otherwise the model is told how many images it cannot see. The store keeps how
	// many there were, not their bytes: loaded from history they have no Data.
	Images []Image
	// ToolCalls are the calls an assistant message asked for.
	ToolCalls []ToolCall
	// Extra is a JSON object of the fields the provider sent on an assistant message beyond the
	// ones above (e.g. the reasoning_details some gateways send), kept raw and sent back
	// unchanged with the message in later rounds and turns; nil when there were none.
	Extra json.RawMessage
	// Stable is the length in bytes of the beginning of Content that stays the same from turn to
	// turn (the configured part of a system prompt, before its summary and date): a model that
	// takes explicit cache breakpoints gets one there. 0: none; not stored.
	Stable int
}

// ToolCall is one tool call the model asked for, fully assembled.
type ToolCall struct {
	// ID is the provider's call id, or "call_{round}_{index}" when the provider sent none
	// (unique across the turn).
	ID   string
	Name string
	// Arguments is the JSON text as the model sent it; "{}" when it sent nothing.
	Arguments string
	// Extra is a JSON object of the fields the provider sent on the call beyond id, type and
	// function (e.g. Gemini's extra_content with its thought signature), kept raw and sent back
	// unchanged on the call; nil when there were none.
	Extra json.RawMessage
}

// Image is a picture attached to a user message; Data is nil once it is no longer available
// (a message loaded from history).
type Image struct {
	MIME string
	Data []byte
}
