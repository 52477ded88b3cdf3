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

// /prompt NAME args runs an MCP prompt the admin enabled (prompts = true): the prompt's message
// is the turn's input the model answers; a prompt missing its argument is refused with what it
// takes, and no turn runs.
func TestPromptRunsAsACommand(t *testing.T) {
	e := newEnv(t)
	e.llm.SetHandler(func(r llm.Request) llm.Reply {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == "user" && strings.Contains(last.Content, "Write a three-line brief about sea otters.") {
			return llm.Text("Sea otters hold hands while they sleep.")
		}
		return llm.Text("?")
	})
	e.start(e.toml().set("mcp.servers", "prompts", true).parse(t))
	e.say(7, "/prompt brief")
	e.waitBotText(7, "the refusal naming the argument", contains("Prompt not run: prompt brief needs topic"))
	e.say(7, "/prompt brief sea otters")
	e.waitBotText(7, "the answer to the prompt", contains("Sea otters hold hands while they sleep."))
	if n := len(e.llm.Requests()); n != 1 {
		t.Fatalf("the model was asked %d times, want once (the refused prompt runs no turn)", n)
	}
}
