package store

import (
	"context"
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
		id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserMessage: Message{Content: "where?"}})
		if err != nil {
			t.Fatal(err)
		}
		sig := `{"extra_content":{"google":{"thought_signature":"CsQBAV"}}}`
		details := `{"reasoning_details":[{"type":"reasoning.encrypted","data":"abc"}]}`
		err = s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: TurnOK, Messages: []Message{
			{Role: RoleAssistant, Extra: details, Reasoning: "run pwd", ReasoningField: "reasoning_content", ToolCalls: []MessageToolCall{{ID: "c1", Name: "shell", Arguments: "{}", Extra: sig}}},
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
		if len(h) != 4 || h[1].Extra != details || len(h[1].ToolCalls) != 1 || h[1].ToolCalls[0].Extra != sig || h[1].ReasoningField != "reasoning_content" {
			t.Fatalf("history = %+v; the provider's fields must come back as stored (Gemini rejects a history without its signatures)", h)
		}
		if h[3].Extra != "" {
			t.Errorf("a message without extra fields came back with %q", h[3].Extra)
		}
	})
}
