package pipeline

import (
	"context"
	"slices"
	"strings"
	"testing"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	"relaybot/pipeline/history"
	"relaybot/store"
)

// A message handed over again after a crash is answered only when its turn never ended.
func TestRedeliveredMessageAnsweredOnce(t *testing.T) {
	h := newHarness(t, Options{History: history.Options{Rounds: 10}})
	ctx := context.Background()

	// Answered before the crash, its "done" not recorded by the adapter: skipped.
	h.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "First answer."}}})
	out := &recResponder{}
	<-h.handle(privateMsg("9", "1", "first"), out)
	again := privateMsg("9", "1", "first")
	again.Redelivered = true
	<-h.handle(again, out)
	if out.Reply(1) != nil || len(out.Notices()) != 0 {
		t.Fatalf("a redelivered message that was answered got answered again")
	}
	if !strings.Contains(h.logs.String(), "redelivered message already answered") {
		t.Fatalf("the skip is not logged:\n%s", h.logs.String())
	}

	// Cut by the crash (the turn was running; recovery marked it interrupted): answered again.
	conv, err := h.store.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "9", UserID: "9"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.Turns.StartTurn(ctx, store.TurnStart{ConversationID: conv.ID, UserID: "9", InboundMessageID: "2",
		UserMessage: chat.Message{Role: store.RoleUser, Content: "second"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.store.Turns.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	// And one the crashed run never started a turn for: answered too.
	for i, id := range []string{"2", "3"} {
		h.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Answer " + id + "."}}})
		in := privateMsg("9", id, "message "+id)
		in.Redelivered = true
		<-h.handle(in, out)
		r := out.Reply(1 + i)
		if r == nil {
			t.Fatalf("redelivered message %s was not answered", id)
		}
		if final, _ := r.Final(); final != "Answer "+id+"." {
			t.Fatalf("message %s: final %q", id, final)
		}
	}
	// The cut turn of message 2 left the history: the model saw message 2 once, as answered
	// again, not also the cut turn's copy.
	for _, req := range h.llm.Requests() {
		for _, m := range req.Messages {
			if strings.Contains(m.Content, "second") {
				t.Fatalf("the cut turn's copy of message 2 reached the model: %q", req.Messages)
			}
		}
	}
	// Handed over yet again after a /reset: all three were answered (in the chat's earlier
	// conversation), so none is answered twice, and nothing reaches the model.
	reset := privateMsg("9", "4", "/reset")
	<-h.handle(reset, out)
	if n := out.Notices(); len(n) != 1 || n[0] != "Started a new conversation." {
		t.Fatalf("/reset notices %q", n)
	}
	for _, id := range []string{"1", "2", "3"} {
		in := privateMsg("9", id, "message "+id)
		in.Redelivered = true
		<-h.handle(in, out)
	}
	if out.Reply(3) != nil || len(out.Notices()) != 1 {
		t.Fatalf("a message answered before the /reset was answered again after it")
	}
	if n := h.llm.RequestCount(); n != 3 {
		t.Fatalf("model asked %d times, want 3 (one per message)", n)
	}
}

// TestARedeliveredMessageGoesOnFromTheToolCallsItsCutTurnFinished: a message whose turn was cut
// after one tool call of its first round had finished (its result recorded) and while another
// was still running is answered again without asking the model afresh: the model is shown the
// finished call and its result, not the unfinished one, so it does not run the finished one
// again; the new turn's history keeps the call.
func TestARedeliveredMessageGoesOnFromTheToolCallsItsCutTurnFinished(t *testing.T) {
	h := newHarness(t, Options{History: history.Options{Rounds: 10}})
	ctx := context.Background()
	conv, err := h.store.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "9", UserID: "9"})
	if err != nil {
		t.Fatal(err)
	}
	cut, err := h.store.Turns.StartTurn(ctx, store.TurnStart{ConversationID: conv.ID, UserID: "9", InboundMessageID: "2",
		UserMessage: chat.Message{Role: store.RoleUser, Content: "send the mail"}})
	if err != nil {
		t.Fatal(err)
	}
	done := &audit.Record{TurnID: cut, ConversationID: conv.ID, Platform: "telegram", ChatID: "9", UserID: "9", Round: 1,
		ToolCallID: "call_sent", ToolName: "send_mail", Arguments: `{"to":"a@example.org"}`}
	if err := h.store.ToolCalls.StartToolCall(ctx, done); err != nil {
		t.Fatal(err)
	}
	done.Status, done.Result = audit.StatusOK, "mail sent"
	if err := h.store.ToolCalls.FinishToolCall(ctx, done); err != nil {
		t.Fatal(err)
	}
	unfinished := &audit.Record{TurnID: cut, ConversationID: conv.ID, Platform: "telegram", ChatID: "9", UserID: "9", Round: 1,
		ToolCallID: "call_cut", ToolName: "open_ticket", Arguments: `{}`}
	if err := h.store.ToolCalls.StartToolCall(ctx, unfinished); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.store.Turns.Recover(ctx); err != nil {
		t.Fatal(err)
	}

	h.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Sent."}}})
	in := privateMsg("9", "2", "send the mail")
	in.Redelivered = true
	out := &recResponder{}
	<-h.handle(in, out)
	if r := out.Reply(0); r == nil {
		t.Fatal("the redelivered message was not answered")
	} else if final, _ := r.Final(); final != "Sent." {
		t.Fatalf("final %q, want %q", final, "Sent.")
	}
	reqs := h.llm.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the model was asked %d times, want once", len(reqs))
	}
	ms := reqs[0].Messages
	if len(ms) < 3 {
		t.Fatalf("the model was sent %d messages: %+v", len(ms), ms)
	}
	ask, result := ms[len(ms)-2], ms[len(ms)-1]
	if ms[len(ms)-3].Role != "user" || ask.Role != "assistant" || len(ask.ToolCalls) != 1 || ask.ToolCalls[0].ID != "call_sent" ||
		ask.ToolCalls[0].Name != "send_mail" || result.Role != "tool" || result.ToolCallID != "call_sent" || result.Content != "mail sent" {
		t.Fatalf("the model was not shown the finished call and its result after the message (and not the cut one); its last messages: %+v", ms[len(ms)-3:])
	}
	turn, found, err := h.store.Turns.TurnByInbound(ctx, chat.Ref{Platform: "telegram", ChatID: "9"}, "2")
	if err != nil || !found || turn.ID == cut {
		t.Fatalf("the new turn of the message: %+v, found %v, err %v", turn, found, err)
	}
	saved, err := h.store.Messages.TurnMessages(ctx, turn.ID)
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range saved {
		roles = append(roles, string(m.Role))
	}
	if want := []string{"user", "assistant", "tool", "assistant"}; !slices.Equal(roles, want) {
		t.Fatalf("the new turn's history has %q, want %q (the carried call kept)", roles, want)
	}
}
