package main

import (
	"cmp"
	"context"
	"slices"
	"time"

	"relaybot/pipeline"
	"relaybot/store"
	"relaybot/tools"
	"relaybot/tools/plugin"
)

// auditRecorder is the tools.Recorder of the bot: it keeps every tool call in the store's audit
// log (the store does not import tools, so the records are converted here).
type auditRecorder struct {
	st *store.Store
}

// Start writes the row of a call that is starting and sets r.ID.
func (a auditRecorder) Start(ctx context.Context, r *tools.Record) error {
	row := toStoreRecord(r)
	if err := a.st.StartToolCall(ctx, &row); err != nil {
		return err
	}
	r.ID = row.ID
	return nil
}

// Finish completes the row of r with its outcome.
func (a auditRecorder) Finish(ctx context.Context, r *tools.Record) error {
	row := toStoreRecord(r)
	if err := a.st.FinishToolCall(ctx, &row); err != nil {
		return err
	}
	r.ID = row.ID
	return nil
}

func toStoreRecord(r *tools.Record) store.ToolCallRecord {
	return store.ToolCallRecord{
		ID:               r.ID,
		TurnID:           r.TurnID,
		ConversationID:   r.ConversationID,
		Platform:         r.Platform,
		ChatID:           r.ChatID,
		UserID:           r.UserID,
		Round:            r.Round,
		ToolCallID:       r.ToolCallID,
		ToolName:         r.ToolName,
		Source:           string(r.Source),
		Server:           r.Server,
		Status:           string(r.Status),
		Arguments:        r.Arguments,
		Result:           r.Result,
		Error:            r.Error,
		ArgumentsSize:    r.ArgumentsSize,
		ResultSize:       r.ResultSize,
		StartedAt:        r.StartedAt,
		FinishedAt:       r.FinishedAt,
		Duration:         r.Duration,
		ServerTool:       r.ServerTool,
		ApprovalRequired: r.ApprovalRequired,
		Decision:         r.Decision,
		Approver:         r.Approver,
		DecidedAt:        r.DecidedAt,
	}
}

func fromStoreRow(r store.ToolCallRow) tools.Record {
	rec := tools.Record{
		ID:               r.ID,
		TurnID:           r.TurnID,
		ConversationID:   r.ConversationID,
		Platform:         r.Platform,
		ChatID:           r.ChatID,
		UserID:           r.UserID,
		Round:            r.Round,
		ToolCallID:       r.ToolCallID,
		ToolName:         r.ToolName,
		Source:           tools.Source(r.Source),
		Server:           r.Server,
		Status:           tools.Status(r.Status),
		Arguments:        r.Arguments,
		Result:           r.Result,
		Error:            r.Error,
		ArgumentsSize:    r.ArgumentsSize,
		ResultSize:       r.ResultSize,
		StartedAt:        r.StartedAt,
		Duration:         time.Duration(r.DurationMS) * time.Millisecond,
		ServerTool:       r.ServerTool,
		ApprovalRequired: r.ApprovalRequired,
		Decision:         r.Decision,
		Approver:         r.Approver,
	}
	if r.FinishedAt != nil {
		rec.FinishedAt = *r.FinishedAt
	}
	if r.DecidedAt != nil {
		rec.DecidedAt = *r.DecidedAt
	}
	return rec
}

// auditReader answers the audit questions of the /audit command and the audit_query plugin from
// the store.
type auditReader struct {
	st *store.Store
}

// RecentToolCalls implements pipeline.AuditLog.
func (a auditReader) RecentToolCalls(ctx context.Context, f pipeline.AuditFilter) ([]pipeline.AuditEntry, error) {
	rows, _, err := a.st.ToolCalls(ctx, store.ToolCallFilter{Tool: f.Tool, Status: f.Status, Platform: f.Platform, ChatID: f.ChatID, Limit: f.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]pipeline.AuditEntry, len(rows))
	for i, r := range rows {
		out[i] = pipeline.AuditEntry{
			StartedAt: r.StartedAt,
			Tool:      r.ToolName,
			Status:    r.Status,
			Duration:  time.Duration(r.DurationMS) * time.Millisecond,
			Arguments: r.Arguments,
		}
	}
	return out, nil
}

// Recent implements plugin.AuditLog: records matching q, newest first, or slowest first.
func (a auditReader) Recent(ctx context.Context, q plugin.AuditQuery) ([]tools.Record, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = store.DefaultLimit
	}
	base := store.ToolCallFilter{Tool: q.Tool, Since: q.Since, Platform: q.Platform, ChatID: q.ChatID, Limit: limit}
	if q.Slowest {
		// The store pages by time; the slowest are picked from the largest page it gives.
		base.Limit = store.MaxLimit
	}
	statuses := []string{""}
	if len(q.Statuses) > 0 {
		statuses = statuses[:0]
		for _, s := range q.Statuses {
			statuses = append(statuses, string(s))
		}
	}
	var recs []tools.Record
	for _, s := range statuses {
		f := base
		f.Status = s
		rows, _, err := a.st.ToolCalls(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			recs = append(recs, fromStoreRow(r))
		}
	}
	if q.Slowest {
		slices.SortStableFunc(recs, func(x, y tools.Record) int { return cmp.Compare(y.Duration, x.Duration) })
	} else {
		slices.SortStableFunc(recs, func(x, y tools.Record) int {
			if c := y.StartedAt.Compare(x.StartedAt); c != 0 {
				return c
			}
			return cmp.Compare(y.ID, x.ID)
		})
	}
	if len(recs) > limit {
		recs = recs[:limit]
	}
	return recs, nil
}

// statsMaxRows bounds the rows Stats reads; the plugin asks about recent windows.
const statsMaxRows = 200_000

// Stats implements plugin.AuditLog: per-tool summaries of the calls since a time, slowest average
// first. It reads the finished rows page by page and sums them.
func (a auditReader) Stats(ctx context.Context, since time.Time) ([]plugin.AuditStat, error) {
	type key struct {
		tool   string
		source string
	}
	type sum struct {
		calls, failures int
		total, max      time.Duration
	}
	sums := map[key]*sum{}
	var order []key
	f := store.ToolCallFilter{Since: since, Limit: store.MaxLimit}
	for read := 0; read < statsMaxRows; {
		rows, next, err := a.st.ToolCalls(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if r.Status == store.StatusRunning {
				continue
			}
			k := key{r.ToolName, r.Source}
			s := sums[k]
			if s == nil {
				s = &sum{}
				sums[k] = s
				order = append(order, k)
			}
			d := time.Duration(r.DurationMS) * time.Millisecond
			s.calls++
			s.total += d
			s.max = max(s.max, d)
			if r.Status != store.StatusOK {
				s.failures++
			}
		}
		read += len(rows)
		if next == "" {
			break
		}
		f.Cursor = next
	}
	out := make([]plugin.AuditStat, 0, len(order))
	for _, k := range order {
		s := sums[k]
		out = append(out, plugin.AuditStat{
			Tool:        k.tool,
			Source:      tools.Source(k.source),
			Calls:       s.calls,
			Failures:    s.failures,
			AvgDuration: s.total / time.Duration(s.calls),
			MaxDuration: s.max,
		})
	}
	slices.SortStableFunc(out, func(x, y plugin.AuditStat) int { return cmp.Compare(y.AvgDuration, x.AvgDuration) })
	return out, nil
}

// The pipeline checks messages the Telegram adapter hands over again after a crash against the
// turns they started only when its store can find them: the store given to it here can.
var _ pipeline.InboundTurns = (*store.Store)(nil)
