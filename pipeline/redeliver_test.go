package pipeline

import (
	"context"
	"strings"
	"testing"

	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	"relaybot/store"
)

// The store finds turns by inbound message, so the bot's pipeline checks redeliveries.
var _ InboundTurns = (*store.Store)(nil)

// lookupless hides the store's TurnByInbound from the pipeline.
type lookupless struct {
	Store
}

// A message handed over again after a crash is answered only when its turn never ended.
func TestRedeliveredMessageAnsweredOnce(t *testing.T) {
	h := newHarness(t, Options{History: HistoryOptions{Rounds: 10}})
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
	conv, err := h.store.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "9", UserID: "9"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.StartTurn(ctx, store.TurnStart{ConversationID: conv.ID, UserID: "9", InboundMessageID: "2",
		UserMessage: store.Message{Role: store.RoleUser, Content: "second"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.store.Recover(ctx); err != nil {
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
	// Without the lookup (a store that cannot find turns by message), it is answered again.
	plain := newHarnessStore(t, Options{}, func(st *store.Store) Store { return lookupless{st} })
	plain.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Once."}}}, llm.Reply{Chunks: []llm.Chunk{{Content: "Twice."}}})
	pout := &recResponder{}
	<-plain.handle(privateMsg("9", "1", "first"), pout)
	<-plain.handle(again, pout)
	if pout.Reply(1) == nil {
		t.Fatal("without TurnByInbound the redelivered message must still be answered (never lost)")
	}
}
