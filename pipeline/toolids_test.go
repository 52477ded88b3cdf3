package pipeline

import (
	"strings"
	"testing"

	"relaybot/internal/testkit/llm"
	"relaybot/pipeline/history"
)

// TestHistoryKeepsEveryRoundOfIDLessToolCalls: a model that sends no tool-call ids used to get
// call_0 in every round; history pairs results to calls by id, so every round after the first
// was dropped and the next turn's model saw only the first tool call.
func TestHistoryKeepsEveryRoundOfIDLessToolCalls(t *testing.T) {
	h := newHarness(t, Options{})
	h.llm.Push(
		llm.ToolCalls(llm.Call{Name: "echo", Args: []string{`{"text":"one"}`}}),
		llm.ToolCalls(llm.Call{Name: "echo", Args: []string{`{"text":"two"}`}}),
		llm.Text("Both said."),
		llm.Text("Yes."),
	)
	in := privateMsg("42", "1", "echo twice")
	<-h.handle(in, &recResponder{stream: true})

	hist := h.history(history.KeyOf(in, false))
	var roles, results []string
	for _, m := range hist {
		roles = append(roles, string(m.Role))
		if m.Role == "tool" {
			results = append(results, m.ToolCallID+"="+m.Content)
		}
	}
	if got := strings.Join(roles, ","); got != "user,assistant,tool,assistant,tool,assistant" {
		t.Fatalf("history roles = %s, want both tool rounds kept", got)
	}
	if got := strings.Join(results, " "); !strings.Contains(got, "call_1_0=echo: one") || !strings.Contains(got, "call_2_0=echo: two") {
		t.Fatalf("tool results in history = %s, want one per round under its own id", got)
	}

	// The next turn sends the model both rounds.
	<-h.handle(privateMsg("42", "2", "again?"), &recResponder{stream: true})
	reqs := h.llm.Requests()
	last := reqs[len(reqs)-1]
	calls := 0
	for _, m := range last.Messages {
		calls += len(m.ToolCalls)
	}
	if calls != 2 {
		t.Fatalf("the next turn's request carries %d tool calls from history, want 2", calls)
	}
}
