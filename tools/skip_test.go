package tools_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/tools"
)

// TestSkipRecordsACallThatNeverRan: a call the agent does not run (the turn was stopped before
// it, or the length limit cut its arguments off) is answered and audited by tools, like every
// other call: one row, status cancelled, the reason as its error, arguments redacted. The tool itself
// never runs.
func TestSkipRecordsACallThatNeverRan(t *testing.T) {
	ran := 0
	mcp := newStub(audit.SourceMCP, "srv").add("charge", func(context.Context, tools.Invocation) (tools.Result, error) {
		ran++
		return tools.Result{Text: "charged"}, nil
	})
	f := newFixture(t, tools.ManagerOptions{}, mcp)
	stopped, stop := context.WithCancelCause(context.Background())
	stop(errors.New("stopped by the user"))

	tests := []struct {
		name    string
		ctx     context.Context
		call    tools.Call
		reason  error
		content string
		audit   string
		source  audit.Source
	}{
		{"the turn was stopped", stopped, tools.Call{ToolCall: chat.ToolCall{ID: "c1", Name: "charge", Arguments: `{"card":"4111","password":"hunter2"}`}, Round: 2},
			fmt.Errorf("not run: %w", context.Cause(stopped)), "err: not run: stopped by the user", "not run: stopped by the user", audit.SourceMCP},
		{"arguments cut off", context.Background(), tools.Call{ToolCall: chat.ToolCall{ID: "c2", Name: "charge", Arguments: `{"card":"41`}, Round: 1},
			errors.New("arguments cut off by the length limit"), "err: arguments cut off by the length limit", "arguments cut off by the length limit", audit.SourceMCP},
		{"a tool nobody has", context.Background(), tools.Call{ToolCall: chat.ToolCall{ID: "c3", Name: "nope"}, Round: 1},
			errors.New("the turn ended first"), "err: the turn ended first", "the turn ended first", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.rec.Reset()
			out := f.m.ForTurn(tools.TurnInfo{TurnID: 9, UserID: "u1"}, nil).Skip(tc.ctx, tc.call, tc.reason)
			if out.Status != audit.StatusCancelled || !out.NotRun || !errors.Is(out.Err, tc.reason) || out.Content != tc.content {
				t.Fatalf("outcome = %+v, want cancelled, not run, model text %q", out, tc.content)
			}
			recs := f.rec.Records()
			if len(recs) != 1 {
				t.Fatalf("%d audit rows, want 1", len(recs))
			}
			r := recs[0]
			if r.Status != audit.StatusCancelled || r.Error != tc.audit || r.ToolCallID != tc.call.ID || r.Round != tc.call.Round ||
				r.TurnID != 9 || r.Source != tc.source || r.FinishedAt.IsZero() || strings.Contains(r.Arguments, "hunter2") {
				t.Fatalf("audit row = %+v", r)
			}
		})
	}
	if ran != 0 {
		t.Fatalf("a skipped tool ran %d times", ran)
	}
}
