package main

import (
	"strings"
	"testing"

	"relaybot/internal/testkit/llm"
)

// TestLongToolResultReachesTheModelCutOnceWithItsTrueSize: agent.tool_result_max_chars used to
// cap a tool result twice, in tools and again in the agent with its own marker, so the model got
// the first cut's marker cut away and a second note with a wrong total ("100 of 123 characters").
// Now tools cuts it once, and the note tells the model how much it did not see.
func TestLongToolResultReachesTheModelCutOnceWithItsTrueSize(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Agent.ToolResultMaxChars = 100
	e.start(cfg)

	long := strings.Repeat("x", 300)
	e.llm.Push(
		llm.ToolCalls(llm.Call{ID: "call_long", Name: "echo", Args: []string{`{"text":"` + long + `"}`}}),
		llm.Text("That was long."),
	)
	e.say(1, "echo something long")
	e.waitBotText(1, "the answer after the tool", contains("That was long."))

	reqs := e.llm.Requests()
	var got string
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role == "tool" && m.ToolCallID == "call_long" {
			got = m.Content
		}
	}
	want := strings.Repeat("x", 100) + "… [truncated 200 chars]"
	if got != want {
		t.Fatalf("the model got the tool result\n%q\nwant\n%q", got, want)
	}
}
