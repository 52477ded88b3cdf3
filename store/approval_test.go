package store

import (
	"context"
	"relaybot/audit"
	"testing"
	"time"
)

// The approval of an "ask" call and the MCP server's own tool name survive the round trip on both
// dialects, and the audit filters find rows by decision.
func TestApprovalColumnsAreKeptAndFiltered(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		asked := &audit.Record{ToolName: "files__write", ServerTool: "write", Source: "mcp", Server: "files",
			Platform: "discord", ChatID: "5", ApprovalRequired: true, StartedAt: at}
		if err := s.ToolCalls.StartToolCall(ctx, asked); err != nil {
			t.Fatal(err)
		}
		asked.Status, asked.Decision, asked.Approver, asked.DecidedAt = audit.StatusDenied, "denied", "bob", at.Add(time.Minute)
		if err := s.ToolCalls.FinishToolCall(ctx, asked); err != nil {
			t.Fatal(err)
		}
		plain := &audit.Record{ToolName: "current_time", Source: "native", StartedAt: at.Add(time.Second), Status: audit.StatusOK}
		if err := s.ToolCalls.StartToolCall(ctx, plain); err != nil {
			t.Fatal(err)
		}
		for _, f := range []audit.Filter{{Decision: "denied"}, {ApprovalRequired: true}} {
			rows, _, err := s.ToolCalls.ToolCalls(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1 {
				t.Fatalf("filter %+v found %d rows, want the asked call only", f, len(rows))
			}
			r := rows[0]
			if !r.ApprovalRequired || r.Decision != "denied" || r.Approver != "bob" || r.DecidedAt.IsZero() ||
				!r.DecidedAt.Equal(at.Add(time.Minute)) || r.ServerTool != "write" {
				t.Fatalf("row = %+v, want approval required, denied by bob at %v, server tool write", r, at.Add(time.Minute))
			}
		}
	})
}
