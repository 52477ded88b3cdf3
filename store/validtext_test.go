package store

import (
	"context"
	"errors"
	"reflect"
	"relaybot/audit"
	"relaybot/chat"
	"testing"
	"time"
)

// TestTurnWithNULAndBrokenUTF8IsSavedWhole writes a whole turn (conversation key, user message,
// audit row, answer with tool calls, model calls) whose every text carries a NUL byte or invalid
// UTF-8, as a fetched page or a buggy provider can, and reads it all back. On PostgreSQL such text
// used to fail the audit write and then the turn's save: the answer, tool calls and model calls
// were lost and the turn stayed running.
func TestTurnWithNULAndBrokenUTF8IsSavedWhole(t *testing.T) {
	cases := []struct {
		name, dirty, clean string
	}{
		{"NUL byte", "a\x00b", "ab"},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb"},
		{"truncated rune and NUL", "\x00x\xc3", "x\uFFFD"},
	}
	forEachDriver(t, func(t *testing.T, driver string) {
		s := newStore(t, driver)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				d, c := tc.dirty, tc.clean
				key := chat.Key{Platform: chat.Platform("tg" + d), ChatID: "chat" + d, ThreadID: "th" + d, UserID: "u" + d}
				conv, err := s.Conversations.Conversation(ctx, key)
				if err != nil {
					t.Fatalf("Conversation: %v", err)
				}
				again, err := s.Conversations.Conversation(ctx, key)
				if err != nil || again.ID != conv.ID {
					t.Fatalf("Conversation again = %d, %v; want the same conversation %d", again.ID, err, conv.ID)
				}
				if want := (chat.Key{Platform: chat.Platform("tg" + c), ChatID: "chat" + c, ThreadID: "th" + c, UserID: "u" + c}); (chat.Key{Platform: chat.Platform(again.Platform), ChatID: again.ChatID, ThreadID: again.ThreadID, UserID: again.UserID}) != want {
					t.Errorf("stored conversation key = %+v, want %+v", again, want)
				}
				turnID, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: conv.ID, UserID: "u" + d,
					UserName: "name" + d, InboundMessageID: "in" + d,
					UserMessage: chat.Message{Role: RoleUser, Content: "ask" + d, Name: "name" + d}})
				if err != nil {
					t.Fatalf("StartTurn: %v", err)
				}
				rec := audit.Record{TurnID: turnID, ConversationID: conv.ID, Platform: "tg" + d,
					ChatID: "chat" + d, UserID: "u" + d, Round: 1, ToolCallID: "id" + d,
					ToolName: "fetch_url" + d, Source: audit.Source("native" + d), Server: "srv" + d,
					Arguments: `{"url":"` + d + `"}`}
				if err := s.ToolCalls.StartToolCall(ctx, &rec); err != nil {
					t.Fatalf("StartToolCall: %v", err)
				}
				rec.Status, rec.Result, rec.Error, rec.Duration = audit.StatusError, "page"+d, "boom"+d, time.Second
				if err := s.ToolCalls.FinishToolCall(ctx, &rec); err != nil {
					t.Fatalf("FinishToolCall: %v", err)
				}
				msgs := []chat.Message{
					{Role: RoleAssistant, Content: "calling" + d, Reasoning: "think" + d,
						ToolCalls: []chat.ToolCall{{ID: "id" + d, Name: "fetch_url" + d, Arguments: "{}" + d}}},
					{Role: RoleTool, Content: "page" + d, Name: "fetch_url" + d, ToolCallID: "id" + d},
					{Role: RoleAssistant, Content: "answer" + d},
				}
				err = s.Turns.FinishTurn(ctx, TurnEnd{TurnID: turnID, Status: TurnOK, Model: "model" + d,
					Rounds: 2, Error: "note" + d, Messages: msgs,
					LLMCalls: []chat.ModelCall{{Round: 1, Model: "model" + d, FallbackReason: "why" + d,
						Status: chat.Status("ok" + d), Err: errors.New("e" + d), Duration: time.Second}}})
				if err != nil {
					t.Fatalf("FinishTurn: %v (the answer, tool calls and model calls are lost)", err)
				}

				turn, err := s.Turns.Turn(ctx, turnID)
				if err != nil {
					t.Fatal(err)
				}
				if turn.Status != TurnOK || turn.Model != "model"+c || turn.Error != "note"+c ||
					turn.UserID != "u"+c || turn.UserName != "name"+c || turn.InboundMessageID != "in"+c {
					t.Errorf("turn = %+v, want ok with clean texts", turn)
				}
				if got, found, err := s.Turns.TurnByInbound(ctx, chat.Ref{Platform: chat.Platform("tg" + d), ChatID: "chat" + d}, "in"+d); err != nil || !found || got.ID != turnID {
					t.Errorf("TurnByInbound = %d, %v, %v; want turn %d", got.ID, found, err, turnID)
				}
				saved, err := s.Messages.TurnMessages(ctx, turnID)
				if err != nil {
					t.Fatal(err)
				}
				wantMsgs := []chat.Message{
					{Role: RoleUser, Content: "ask" + c, Name: "name" + c},
					{Role: RoleAssistant, Content: "calling" + c, Reasoning: "think" + c,
						ToolCalls: []chat.ToolCall{{ID: "id" + c, Name: "fetch_url" + c, Arguments: "{}" + c}}},
					{Role: RoleTool, Content: "page" + c, Name: "fetch_url" + c, ToolCallID: "id" + c},
					{Role: RoleAssistant, Content: "answer" + c},
				}
				if !reflect.DeepEqual(saved, wantMsgs) {
					t.Errorf("messages =\n%#v\nwant\n%#v", saved, wantMsgs)
				}
				rows, _, err := s.ToolCalls.ToolCalls(ctx, audit.Filter{TurnID: turnID, Tool: "fetch_url" + d})
				if err != nil || len(rows) != 1 {
					t.Fatalf("ToolCalls = %d rows, %v; want the one call", len(rows), err)
				}
				r := rows[0]
				got := []string{r.Platform, r.ChatID, r.UserID, r.ToolCallID, r.ToolName, string(r.Source), r.Server, string(r.Status), r.Arguments, r.Result, r.Error}
				want := []string{"tg" + c, "chat" + c, "u" + c, "id" + c, "fetch_url" + c, "native" + c, "srv" + c, string(audit.StatusError), `{"url":"` + c + `"}`, "page" + c, "boom" + c}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("audit row texts = %q, want %q", got, want)
				}
				var llm []llmCallRow
				if err := s.r.Where("turn_id = ?", turnID).Find(&llm).Error; err != nil || len(llm) != 1 {
					t.Fatalf("llm calls = %d, %v; want 1", len(llm), err)
				}
				if l := llm[0]; l.Model != "model"+c || l.FallbackReason != "why"+c || l.Status != chat.Status("ok"+c) || l.Error != "e"+c {
					t.Errorf("llm call = %+v, want clean texts", l)
				}
			})
		}
	})
}
