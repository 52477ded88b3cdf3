package store

import (
	"context"
	"strings"
	"testing"

	"relaybot/audit"
	"relaybot/chat"
)

// A forgotten fact's words leave the remember call that carried it and the search_memory call
// that found it, in the audit log and in the saved turn; the rows stay, and another person's
// calls and other facts' calls keep theirs.
func TestForgetCallsRedactsTheFactsWordsAndKeepsTheRows(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "42"})
		if err != nil {
			t.Fatal(err)
		}
		turn, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserID: "42", UserMessage: chat.Message{Role: RoleUser, Content: "remember it"}})
		if err != nil {
			t.Fatal(err)
		}
		args := `{"fact":"Locker code is Quokka"}`
		if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: turn, Status: TurnOK, Messages: []chat.Message{
			{Role: RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: "remember", Arguments: args}, {ID: "c2", Name: "search_memory", Arguments: `{"query":"locker"}`}}},
			{Role: RoleTool, ToolCallID: "c1", Content: "Remembered (id 7)."},
			{Role: RoleTool, ToolCallID: "c2", Content: "id 7: Locker code is Quokka"},
			{Role: RoleAssistant, Content: "ok"},
		}}); err != nil {
			t.Fatal(err)
		}
		rec := func(user, id, tool, args, result string) *audit.Record {
			r := &audit.Record{TurnID: turn, Platform: "telegram", ChatID: "42", UserID: user, Round: 1, ToolCallID: id,
				ToolName: tool, Source: "native", Arguments: args, StartedAt: seedBase}
			if err := s.ToolCalls.StartToolCall(ctx, r); err != nil {
				t.Fatal(err)
			}
			r.Status, r.Result, r.FinishedAt = audit.StatusOK, result, seedBase
			if err := s.ToolCalls.FinishToolCall(ctx, r); err != nil {
				t.Fatal(err)
			}
			return r
		}
		rec("42", "c1", "remember", args, "Remembered (id 7).")
		rec("42", "c2", "search_memory", `{"query":"locker"}`, "id 7: Locker code is Quokka")
		rec("42", "c3", "search_memory", `{"query":"cat"}`, "id 8: Has a cat called Tom")
		rec("43", "c4", "remember", `{"fact":"Lives in Oslo"}`, "Remembered (id 9).")
		n, err := s.ToolCalls.ForgetCalls(ctx, ForgottenCalls{Platform: "telegram", UserID: "42",
			Carriers: []string{"remember"}, Turns: []int64{turn}, Finders: []string{"search_memory"}, FactIDs: []int64{7}})
		if err != nil || n != 2 {
			t.Fatalf("ForgetCalls redacted %d rows (%v), want the remember and the search that found fact 7", n, err)
		}
		if got := count(t, s, "tool_calls", ""); got != 4 {
			t.Fatalf("%d audit rows after forgetting, want all 4 kept", got)
		}
		if got := count(t, s, "tool_calls", "arguments LIKE ? OR result LIKE ?", "%Quokka%", "%Quokka%"); got != 0 {
			t.Errorf("%d audit rows still hold the forgotten fact", got)
		}
		if got := count(t, s, "messages", "content LIKE ? OR tool_calls LIKE ?", "%Quokka%", "%Quokka%"); got != 0 {
			t.Errorf("%d saved messages still hold the forgotten fact", got)
		}
		if got := count(t, s, "tool_calls", "result = ? AND status = 'ok'", Forgotten); got != 2 {
			t.Errorf("%d audit rows say %s with their status kept, want 2", got, Forgotten)
		}
		for _, kept := range []string{"%Has a cat%", "%Lives in Oslo%"} {
			if got := count(t, s, "tool_calls", "arguments LIKE ? OR result LIKE ?", kept, kept); got != 1 {
				t.Errorf("the call holding %s was touched", strings.Trim(kept, "%"))
			}
		}
	})
}

// On the web chat, a forgotten fact's words leave the bot's messages the page kept (the /memory
// list, an answer quoting it) in the person's own chat; their own messages and other chats stay.
func TestForgetCallsRedactsTheFactFromThePersonsWebTranscript(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		keep := func(chatID string, lines ...chat.Line) {
			t.Helper()
			if err := s.WebChat.KeepWebMessages(ctx, chatID, lines); err != nil {
				t.Fatal(err)
			}
		}
		keep("w42",
			chat.Line{ID: "1", Pos: 1, FromUser: true, Text: "remember: locker code is Quokka"},
			chat.Line{ID: "2", Pos: 2, Text: "What I remember about you:\n1. Locker code is Quokka (learned in a private chat)"},
			chat.Line{ID: "3", Pos: 3, Text: "Your cat is called Tom."})
		keep("w43", chat.Line{ID: "1", Pos: 1, Text: "1. Locker code is Quokka"})
		_, err := s.ToolCalls.ForgetCalls(ctx, ForgottenCalls{Platform: "web", UserID: "w42", Texts: []string{"Locker code is Quokka"}})
		if err != nil {
			t.Fatal(err)
		}
		lines, err := s.WebChat.WebMessages(ctx, "w42", 0)
		if err != nil || len(lines) != 3 {
			t.Fatalf("the transcript after forgetting: %d lines (%v), want 3", len(lines), err)
		}
		if want := "What I remember about you:\n1. " + Forgotten + " (learned in a private chat)"; lines[1].Text != want {
			t.Errorf("the /memory list now reads %q, want %q", lines[1].Text, want)
		}
		if lines[0].Text != "remember: locker code is Quokka" || lines[2].Text != "Your cat is called Tom." {
			t.Errorf("the person's own message or another answer changed: %q, %q", lines[0].Text, lines[2].Text)
		}
		other, err := s.WebChat.WebMessages(ctx, "w43", 0)
		if err != nil || len(other) != 1 || !strings.Contains(other[0].Text, "Quokka") {
			t.Errorf("another person's web chat changed: %v %v", other, err)
		}
	})
}
