package pipeline

import (
	"testing"

	"relaybot/chat"
)

// TestToolMessagesAreStoredWithTheToolsName: the history (and the admin's message list) names
// the tool that answered each call, which the model's tool messages do not carry.
func TestToolMessagesAreStoredWithTheToolsName(t *testing.T) {
	turn := []chat.Message{
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: "shell", Arguments: "{}"}, {ID: "c2", Name: "fetch_url"}}},
		{Role: chat.RoleTool, ToolCallID: "c1", Content: "/work"},
		{Role: chat.RoleTool, ToolCallID: "c2", Name: "kept", Content: "page"},
		{Role: chat.RoleAssistant, Content: "You are in /work."},
	}
	stored := namedToolMessages(turn)
	if stored[1].Name != "shell" || stored[1].ToolCallID != "c1" {
		t.Errorf("the tool message was stored without the name of the tool that answered: %+v", stored[1])
	}
	if stored[2].Name != "kept" || stored[3].Name != "" {
		t.Errorf("names given elsewhere changed: %+v", stored)
	}
}
