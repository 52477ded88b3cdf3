package main

import (
	"context"

	"relaybot/audit"
	"relaybot/pipeline"
	"relaybot/store"
)

// auditRecorder is the tools.Recorder of the bot: it keeps every tool call in the store's audit
// log, one audit.Record for the tool manager and the store alike.
type auditRecorder struct {
	st *store.Store
}

// Start writes the row of a call that is starting and sets r.ID.
func (a auditRecorder) Start(ctx context.Context, r *audit.Record) error {
	return a.st.StartToolCall(ctx, r)
}

// Finish completes the row of r with its outcome.
func (a auditRecorder) Finish(ctx context.Context, r *audit.Record) error {
	return a.st.FinishToolCall(ctx, r)
}

// The store is the one reader of the audit log for /audit, the audit_query plugin, the admin
// pages and bot audit.
var _ audit.Log = (*store.Store)(nil)

// The pipeline checks messages the Telegram adapter hands over again after a crash against the
// turns they started only when its store can find them: the store given to it here can.
var _ pipeline.InboundTurns = (*store.Store)(nil)
