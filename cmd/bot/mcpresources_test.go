package main

import (
	"strings"
	"testing"

	"relaybot/internal/testkit/llm"
	mcpkit "relaybot/internal/testkit/mcp"
)

// A resource an admin attached to a chat (attach_resources, attach_chats) is in each turn there
// as data the model reads; a chat it was not attached to does not get it.
func TestAttachedResourceReachesTheModel(t *testing.T) {
	e := newEnv(t)
	e.llm.SetHandler(func(r llm.Request) llm.Reply {
		for _, m := range r.Messages {
			if m.Role == "system" && strings.Contains(m.Content, mcpkit.Handbook) {
				return llm.Text("The handbook says nine.")
			}
		}
		return llm.Text("No handbook here.")
	})
	e.start(e.toml().set("mcp.servers", "attach_resources", []string{"kit://handbook"}, "attach_chats", []string{"telegram:7"}).parse(t))
	e.say(7, "When does the office open?")
	e.waitBotText(7, "the answer from the attached handbook", contains("The handbook says nine."))
	e.say(8, "When does the office open?")
	e.waitBotText(8, "the answer of a chat without it", contains("No handbook here."))
}
