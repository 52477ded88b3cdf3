package pipeline

import (
	"encoding/json"
	"testing"

	"relaybot/agent"
	"relaybot/chat"
)

func TestProviderFieldsOfAnswersGoBackWithHistory(t *testing.T) {
	sig := json.RawMessage(`{"extra_content":{"google":{"thought_signature":"CsQBAV"}}}`)
	details := json.RawMessage(`{"reasoning_details":[{"type":"reasoning.encrypted","data":"abc"}]}`)
	turn := []agent.Message{
		{Role: agent.RoleAssistant, Extra: details, ReasoningContent: "run pwd", ReasoningField: "reasoning_content", ToolCalls: []agent.ToolCall{{ID: "c1", Name: "shell", Arguments: "{}", Extra: sig}}},
		{Role: agent.RoleTool, ToolCallID: "c1", Content: "/work"},
		{Role: agent.RoleAssistant, Content: "You are in /work."},
	}
	back := (&history{key: chat.Key{Platform: chat.Telegram, ChatID: "1", UserID: "1"}}).toAgent(toStoreMessages(turn))
	if string(back[0].Extra) != string(details) || string(back[0].ToolCalls[0].Extra) != string(sig) || back[0].ReasoningField != "reasoning_content" {
		t.Fatalf("history = %+v; the provider's fields must go back as it sent them", back)
	}
	if back[2].Extra != nil {
		t.Errorf("a message without extra fields got %s", back[2].Extra)
	}
}
