package store

import (
	"context"
	"relaybot/audit"
	"testing"
	"time"
)

// TestAFinishedCallWhoseRowIsGoneIsRecordedWhole: a long call's row may be gone when it finishes
// (marked interrupted by a restart of another server and then swept, or deleted by hand); its
// outcome must still reach the audit log, and later calls get rows of their own.
func TestAFinishedCallWhoseRowIsGoneIsRecordedWhole(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		long := &audit.Record{TurnID: 7, Platform: "telegram", ChatID: "c", UserID: "u", Round: 1,
			ToolCallID: "call_1", ToolName: "crawl", Source: "native", Arguments: "{}",
			StartedAt: seedBase}
		if err := s.ToolCalls.StartToolCall(ctx, long); err != nil {
			t.Fatal(err)
		}
		if res := s.w.Exec("DELETE FROM tool_calls WHERE id = ?", long.ID); res.Error != nil || res.RowsAffected != 1 {
			t.Fatalf("delete the long call's row: %d, %v", res.RowsAffected, res.Error)
		}
		long.Status, long.Result, long.Duration = audit.StatusOK, "done", 90*time.Second
		if err := s.ToolCalls.FinishToolCall(ctx, long); err != nil {
			t.Fatalf("FinishToolCall: %v", err)
		}
		row, err := s.ToolCalls.ToolCall(ctx, long.ID)
		if err != nil {
			t.Fatalf("the finished call is not in the audit log: %v", err)
		}
		if row.ToolName != "crawl" || row.Status != audit.StatusOK || row.Result != "done" || row.ChatID != "c" ||
			row.Duration != 90_000*time.Millisecond || row.FinishedAt.IsZero() {
			t.Errorf("row = %+v, want the whole finished call", row)
		}
		next := &audit.Record{ToolName: "search", ToolCallID: "call_2"}
		if err := s.ToolCalls.StartToolCall(ctx, next); err != nil {
			t.Fatalf("a later call: %v", err)
		}
		if next.ID == long.ID {
			t.Errorf("the later call got the swept call's id %d", next.ID)
		}
		if n := count(t, s, "tool_calls", ""); n != 2 {
			t.Errorf("tool_calls = %d rows, want 2", n)
		}
	})
}
