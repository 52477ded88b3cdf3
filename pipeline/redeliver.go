package pipeline

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"relaybot/audit"
	"relaybot/chat"
)

// CutCalls reads the audit rows of the tool calls that finished in a cut turn, so that a
// message answered again does not run them again.
type CutCalls interface {
	ToolCalls(ctx context.Context, f audit.Filter) ([]audit.Record, string, error)
}

// finishedCalls returns the tool calls that finished (ok or error) in the cut turn turnID as
// the transcript has them: per round, the assistant's message asking for them and a tool
// message with each one's result (the audit row's, redacted and capped). A call that never
// finished (running, interrupted, cancelled, denied, timed out) is left out: it may not have
// happened, so the model may ask for it again.
func finishedCalls(ctx context.Context, st CutCalls, turnID int64) ([]chat.Message, error) {
	recs, _, err := st.ToolCalls(ctx, audit.Filter{TurnID: turnID, Statuses: []audit.Status{audit.StatusOK, audit.StatusError},
		Order: audit.Newest, Limit: audit.MaxLimit})
	if err != nil {
		return nil, fmt.Errorf("the finished tool calls of turn %d: %w", turnID, err)
	}
	slices.SortFunc(recs, func(a, b audit.Record) int { return cmp.Or(cmp.Compare(a.Round, b.Round), cmp.Compare(a.ID, b.ID)) })
	var out []chat.Message
	for i := 0; i < len(recs); {
		j := i
		ask := chat.Message{Role: chat.RoleAssistant}
		var results []chat.Message
		for ; j < len(recs) && recs[j].Round == recs[i].Round; j++ {
			r := recs[j]
			ask.ToolCalls = append(ask.ToolCalls, chat.ToolCall{ID: r.ToolCallID, Name: r.ToolName, Arguments: r.Arguments})
			content := r.Result
			if r.Status == audit.StatusError && content == "" {
				content = "error: " + r.Error
			}
			results = append(results, chat.Message{Role: chat.RoleTool, Content: content, ToolCallID: r.ToolCallID})
		}
		out = append(append(out, ask), results...)
		i = j
	}
	return out, nil
}
