package store

import (
	"context"
	"encoding/json"
	"relaybot/chat"
	"testing"
)

func TestProviderExtraFieldsSurviveTheStore(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "web", ChatID: "extra"})
		if err != nil {
			t.Fatal(err)
		}
		id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserMessage: chat.Message{Content: "where?"}})
		if err != nil {
			t.Fatal(err)
		}
		sig := json.RawMessage(`{"extra_content":{"google":{"thought_signature":"CsQBAV"}}}`)
		details := json.RawMessage(`{"reasoning_details":[{"type":"reasoning.encrypted","data":"abc"}]}`)
		err = s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: TurnOK, Messages: []chat.Message{
			{Role: RoleAssistant, Extra: details, Reasoning: "run pwd", ReasoningField: "reasoning_content", ToolCalls: []chat.ToolCall{{ID: "c1", Name: "shell", Arguments: "{}", Extra: sig}}},
			{Role: RoleTool, ToolCallID: "c1", Name: "shell", Content: "/work"},
			{Role: RoleAssistant, Content: "You are in /work."},
		}})
		if err != nil {
			t.Fatal(err)
		}
		h, err := s.Messages.History(ctx, c.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 4 || string(h[1].Extra) != string(details) || len(h[1].ToolCalls) != 1 || string(h[1].ToolCalls[0].Extra) != string(sig) || h[1].ReasoningField != "reasoning_content" {
			t.Fatalf("history = %+v; the provider's fields must come back as stored (Gemini rejects a history without its signatures)", h)
		}
		if h[3].Extra != nil {
			t.Errorf("a message without extra fields came back with %q", h[3].Extra)
		}
	})
}
