package main

import (
	"context"

	"relaybot/audit"
)

// auditRecorder is the tools.Recorder of the bot: it keeps every tool call in the store's audit
// log, one audit.Record for the tool manager and the store alike.
type auditRecorder struct {
	calls toolCallWriter
}

// toolCallWriter writes the audit rows of tool calls (*store.ToolCallQuery).
type toolCallWriter interface {
	StartToolCall(ctx context.Context, r *audit.Record) error
	FinishToolCall(ctx context.Context, r *audit.Record) error
}

// Start writes the row of a call that is starting and sets r.ID.
func (a auditRecorder) Start(ctx context.Context, r *audit.Record) error {
	return a.calls.StartToolCall(ctx, r)
}

// Finish completes the row of r with its outcome.
func (a auditRecorder) Finish(ctx context.Context, r *audit.Record) error {
	return a.calls.FinishToolCall(ctx, r)
}
