package pipeline

import (
	"fmt"
	"strings"
	"testing"

	"relaybot/adapters"
	"relaybot/audit"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/wait"
	"relaybot/pipeline/history"
	"relaybot/store"
)

// An answer the model's length limit cut short is delivered with a note saying so; the turn is
// ok and the history keeps the answer without the note.
func TestLengthCutAnswerIsDeliveredWithANote(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			h := newHarness(t, Options{})
			h.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Step one: open "}, {Content: "the"}}, FinishReason: "length"})
			out := &recResponder{stream: stream}
			in := privateMsg("21", "1", "explain")
			<-h.handle(in, out)
			final, ok := out.Reply(0).Final()
			if want := "Step one: open the\n\n" + LengthCutNote; !ok || final != want {
				t.Fatalf("final = %q, want %q", final, want)
			}
			if turns := turnStatuses(t, h, in); len(turns) != 1 || turns[0] != store.TurnOK {
				t.Errorf("turn statuses = %v, want ok", turns)
			}
			hist := h.history(history.KeyOf(in, false))
			if len(hist) != 2 || hist[1].Content != "Step one: open the" {
				t.Errorf("history = %+v, want the answer without the note", hist)
			}
		})
	}
}

func TestCompleteAnswerHasNoLengthNote(t *testing.T) {
	h := newHarness(t, Options{})
	h.llm.Push(llm.Text("Short and done."))
	out := &recResponder{stream: true}
	<-h.handle(privateMsg("22", "1", "hi"), out)
	if final, _ := out.Reply(0).Final(); final != "Short and done." {
		t.Fatalf("final = %q", final)
	}
}

// A tool call cut off by the length limit never reaches the tool; its audit row says why.
func TestLengthCutToolCallIsAuditedNotRun(t *testing.T) {
	h := newHarness(t, Options{})
	cut := llm.ToolCalls(llm.Call{ID: "e1", Name: "echo", Args: []string{`{"text":"a very long te`}})
	cut.FinishReason = "length"
	h.llm.Push(cut, llm.Text("I could not finish that call."))
	out := &recResponder{stream: true}
	in := privateMsg("23", "1", "echo a lot")
	<-h.handle(in, out)
	final, _ := out.Reply(0).Final()
	if !strings.HasSuffix(final, "I could not finish that call.") || strings.Contains(final, LengthCutNote) {
		t.Fatalf("final = %q", final)
	}
	wait.For(t, "the audit row", func() bool {
		recs := h.rec.Records()
		return len(recs) == 1 && recs[0].Status != audit.StatusRunning
	})
	r := h.rec.Records()[0]
	if r.ToolCallID != "e1" || r.Status != audit.StatusCancelled || !strings.Contains(r.Error, "length limit") {
		t.Errorf("audit row = %+v, want the call recorded as not run for the length limit", r)
	}
	hist := h.history(history.KeyOf(in, false))
	if len(hist) != 4 || hist[2].ToolCallID != "e1" || hist[2].Content != "err: arguments cut off by the length limit" {
		t.Errorf("history = %+v", hist)
	}
}

// A stop while reasoning is shown saves the partial answer with its reasoning apart: the next
// turn never sends the <think> block back to the model as content.
func TestStopWithReasoningShownKeepsThinkOutOfHistory(t *testing.T) {
	h := newHarness(t, Options{})
	hold := make(chan struct{})
	defer close(hold)
	h.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Reasoning: "plan the tale"}, {Content: "Once upon"}, {Content: " a time", Wait: hold}}})
	out := &recResponder{stream: true}
	in := privateMsg("24", "1", "tell a story")
	done := h.handle(in, out)
	wait.For(t, "the first words", func() bool {
		r := out.Reply(0)
		return r != nil && strings.HasSuffix(r.Latest(), "Once upon")
	})
	<-h.handle(adapters.Inbound{Chat: in.Chat, Kind: in.Kind, UserID: "24", Command: "stop"}, out)
	<-done
	if final, _ := out.Reply(0).Final(); !strings.Contains(final, "plan the tale") || strings.Contains(final, "<think>") || !strings.HasSuffix(final, "Once upon [stopped]") {
		t.Fatalf("final = %q, want the shown reasoning and the partial answer", final)
	}
	hist := h.history(history.KeyOf(in, false))
	if len(hist) != 2 || hist[1].Content != "Once upon" || hist[1].Reasoning != "plan the tale" {
		t.Fatalf("history = %+v, want content and reasoning apart", hist)
	}
	h.llm.Push(llm.Text("Go on."))
	<-h.handle(privateMsg("24", "2", "continue"), out)
	reqs := h.llm.Requests()
	for _, m := range reqs[len(reqs)-1].Messages {
		if strings.Contains(m.Content, "<think>") || strings.Contains(m.Content, "plan the tale") {
			t.Errorf("next turn sent %s message %q carrying the think block", m.Role, m.Content)
		}
	}
}
