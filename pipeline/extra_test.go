package pipeline

import (
	"encoding/json"
	"testing"

	"relaybot/agent"
)

func TestProviderFieldsAndToolNamesAreStoredWithTheTurn(t *testing.T) {
	sig := json.RawMessage(`{"extra_content":{"google":{"thought_signature":"CsQBAV"}}}`)
	details := json.RawMessage(`{"reasoning_details":[{"type":"reasoning.encrypted","data":"abc"}]}`)
	turn := []agent.Message{
		{Role: agent.RoleAssistant, Extra: details, ReasoningContent: "run pwd", ReasoningField: "reasoning_content", ToolCalls: []agent.ToolCall{{ID: "c1", Name: "shell", Arguments: "{}", Extra: sig}}},
		{Role: agent.RoleTool, ToolCallID: "c1", Content: "/work"},
		{Role: agent.RoleAssistant, Content: "You are in /work."},
	}
	stored := toStoreMessages(turn)
	if stored[0].Extra != string(details) || stored[0].ToolCalls[0].Extra != string(sig) || stored[0].ReasoningField != "reasoning_content" {
		t.Fatalf("stored = %+v; the provider's fields must be kept as it sent them", stored)
	}
	if stored[1].Name != "shell" || stored[1].ToolCallID != "c1" {
		t.Errorf("the tool message was stored without the name of the tool that answered: %+v", stored[1])
	}
	if stored[2].Extra != "" {
		t.Errorf("a message without extra fields got %q", stored[2].Extra)
	}
}
