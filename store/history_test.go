package store

import (
	"context"
	"fmt"
	"reflect"
	"relaybot/chat"
	"testing"
)

func call(id string) chat.ToolCall { return chat.ToolCall{ID: id, Name: "t", Arguments: "{}"} }

// checkPaired fails when a tool message has no earlier call or a call has no result.
func checkPaired(t *testing.T, msgs []chat.Message) {
	t.Helper()
	open := map[string]bool{}
	for i, m := range msgs {
		switch m.Role {
		case RoleAssistant:
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		case RoleTool:
			if !open[m.ToolCallID] {
				t.Errorf("message %d: tool result %q without its call", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		case RoleUser:
			for id := range open {
				t.Errorf("message %d: call %q has no result before the next user message", i, id)
			}
		}
	}
	for id := range open {
		t.Errorf("call %q has no result", id)
	}
}

func TestHistoryWholeRoundsOnly(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "web", ChatID: "h"})
		if err != nil {
			t.Fatal(err)
		}
		turn := func(status chat.Status, user string, msgs ...chat.Message) {
			t.Helper()
			id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserMessage: chat.Message{Content: user, Name: "ann", Images: []chat.Image{{MIME: "image/png", Data: []byte("png")}}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: status, Messages: msgs}); err != nil {
				t.Fatal(err)
			}
		}
		// 12 rounds, each with two tool calls and their results.
		for i := range 12 {
			a, b := fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)
			turn(TurnOK, fmt.Sprint("q", i),
				chat.Message{Role: RoleAssistant, Content: "let me look", ToolCalls: []chat.ToolCall{call(a), call(b)}},
				chat.Message{Role: RoleTool, ToolCallID: a, Name: "t", Content: "ra"},
				chat.Message{Role: RoleTool, ToolCallID: b, Name: "t", Content: "rb"},
				chat.Message{Role: RoleAssistant, Content: fmt.Sprint("answer", i), Reasoning: "because"})
		}
		h, err := s.Messages.History(ctx, c.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 10*5 {
			t.Fatalf("10 rounds gave %d messages, want 50", len(h))
		}
		if h[0].Role != RoleUser || h[0].Content != "q2" || h[0].Name != "ann" || len(h[0].Images) != 1 || h[0].Images[0].Data != nil {
			t.Errorf("history starts with %+v, want the user message of round 3", h[0])
		}
		if last := h[len(h)-1]; last.Content != "answer11" || last.Reasoning != "because" {
			t.Errorf("history ends with %+v, want the last answer", last)
		}
		if got := h[1].ToolCalls; len(got) != 2 || !reflect.DeepEqual(got[0], call("a2")) {
			t.Errorf("tool calls not kept: %+v", h[1])
		}
		checkPaired(t, h)
		for _, n := range []int{1, 2, 3, 7} {
			h, err := s.Messages.History(ctx, c.ID, n)
			if err != nil {
				t.Fatal(err)
			}
			if len(h) != n*5 || h[0].Role != RoleUser {
				t.Errorf("History(%d) = %d messages starting with %s, want %d starting with user", n, len(h), h[0].Role, n*5)
			}
			checkPaired(t, h)
		}
		if h, _ := s.Messages.History(ctx, c.ID, 0); len(h) != 0 {
			t.Errorf("History(0) = %d messages, want none", len(h))
		}

		// A turn cut short: a call without result, a result without call, a duplicate result.
		turn(TurnCancelled, "broken",
			chat.Message{Role: RoleTool, ToolCallID: "ghost", Content: "orphan result"},
			chat.Message{Role: RoleAssistant, ToolCalls: []chat.ToolCall{call("x"), call("y")}},
			chat.Message{Role: RoleTool, ToolCallID: "x", Content: "rx"},
			chat.Message{Role: RoleTool, ToolCallID: "x", Content: "rx again"},
			chat.Message{Role: RoleAssistant, ToolCalls: []chat.ToolCall{call("z")}})
		h, err = s.Messages.History(ctx, c.ID, 1)
		if err != nil {
			t.Fatal(err)
		}
		checkPaired(t, h)
		if len(h) != 3 || len(h[1].ToolCalls) != 1 || h[1].ToolCalls[0].ID != "x" || h[2].Content != "rx" {
			t.Errorf("cut turn history = %+v, want user, the call x, its one result", h)
		}
		// The running turn is not history yet.
		if _, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserMessage: chat.Message{Content: "now"}}); err != nil {
			t.Fatal(err)
		}
		h, _ = s.Messages.History(ctx, c.ID, 1)
		if len(h) == 0 || h[0].Content != "broken" {
			t.Errorf("History includes the running turn: %+v", h)
		}
	})
}

func TestPairToolMessages(t *testing.T) {
	tests := []struct {
		name string
		in   []chat.Message
		want int
	}{
		{"complete", []chat.Message{{Role: RoleUser}, {Role: RoleAssistant, ToolCalls: []chat.ToolCall{call("1")}}, {Role: RoleTool, ToolCallID: "1"}, {Role: RoleAssistant, Content: "done"}}, 4},
		{"result before call", []chat.Message{{Role: RoleUser}, {Role: RoleTool, ToolCallID: "1"}, {Role: RoleAssistant, ToolCalls: []chat.ToolCall{call("1")}}}, 1},
		{"call without result, text kept", []chat.Message{{Role: RoleUser}, {Role: RoleAssistant, Content: "hm", ToolCalls: []chat.ToolCall{call("1")}}}, 2},
		{"empty id", []chat.Message{{Role: RoleUser}, {Role: RoleTool}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pairToolMessages(tt.in)
			if len(got) != tt.want {
				t.Errorf("kept %d messages, want %d: %+v", len(got), tt.want, got)
			}
			checkPaired(t, got)
		})
	}
}
