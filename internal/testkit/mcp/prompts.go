package mcp

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

// The Kit's prompts (prompts/list, prompts/get), served by mcp-go as the spec has it: a prompt
// the server does not have, or one missing a required argument, is refused.
//
//   - brief(topic, required): one user message, "Write a three-line brief about TOPIC."
//   - standup(): an assistant message, then a user message asking for the standup.

func (k *Kit) addPrompts() {
	k.Server.AddPrompt(mcp.NewPrompt("brief", mcp.WithPromptDescription("A short brief on a topic."),
		mcp.WithArgument("topic", mcp.RequiredArgument(), mcp.ArgumentDescription("what the brief is about"))),
		func(_ context.Context, r mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			topic := r.Params.Arguments["topic"]
			if topic == "" {
				return nil, fmt.Errorf("missing required argument: topic")
			}
			return &mcp.GetPromptResult{Description: "a brief", Messages: []mcp.PromptMessage{
				{Role: mcp.RoleUser, Content: mcp.NewTextContent("Write a three-line brief about " + topic + ".")},
			}}, nil
		})
	k.Server.AddPrompt(mcp.NewPrompt("standup", mcp.WithPromptDescription("The team's standup.")),
		func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []mcp.PromptMessage{
				{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("I keep standups short.")},
				{Role: mcp.RoleUser, Content: mcp.NewTextContent("Run today's standup.")},
			}}, nil
		})
}
