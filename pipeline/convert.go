package pipeline

import (
	"relaybot/agent"
	"relaybot/pipeline/quota"
	"relaybot/store"
)

// toStoreMessages converts what a turn added to the transcript into stored messages; a tool
// message is stored with the name of the tool that answered.
func toStoreMessages(ms []agent.Message) []store.Message {
	out := make([]store.Message, 0, len(ms))
	names := map[string]string{} // tool call id → tool name, for the tool messages
	for _, m := range ms {
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Name
		}
		sm := store.Message{
			Role:           m.Role,
			Content:        m.Content,
			Name:           m.Name,
			ToolCallID:     m.ToolCallID,
			Reasoning:      m.ReasoningContent,
			ReasoningField: m.ReasoningField,
			Images:         len(m.Images),
			Extra:          string(m.Extra),
		}
		if m.Role == agent.RoleTool && sm.Name == "" {
			sm.Name = names[m.ToolCallID]
		}
		for _, c := range m.ToolCalls {
			sm.ToolCalls = append(sm.ToolCalls, store.MessageToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments, Extra: string(c.Extra)})
		}
		out = append(out, sm)
	}
	return out
}

// toStoreLLMCalls converts the model calls of a turn.
func toStoreLLMCalls(cs []agent.LLMCall) []store.LLMCall {
	out := make([]store.LLMCall, 0, len(cs))
	for _, c := range cs {
		out = append(out, quota.StoreCall(c))
	}
	return out
}
