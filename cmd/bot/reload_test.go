package main

import (
	"context"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"relaybot/config"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/logbuf"
	"relaybot/internal/testkit/wait"
)

// systemPrompt is the system message of a model request.
func systemPrompt(r llm.Request) string {
	if len(r.Messages) > 0 && r.Messages[0].Role == "system" {
		return r.Messages[0].Content
	}
	return ""
}

// TestSIGHUPReloadsThePromptWithoutCuttingTheAnswerInFlight runs `bot serve` as main does, edits
// its config.toml's system prompt while an answer streams and sends SIGHUP: the bot keeps running,
// the answer in flight ends whole, and the next turn asks the model with the new prompt. A broken
// file sent after it is refused with its key and reason, and the prompt in force stays.
func TestSIGHUPReloadsThePromptWithoutCuttingTheAnswerInFlight(t *testing.T) {
	e := newEnv(t)
	c := e.toml().set("chat", "shutdown_grace_sec", 0)
	path := c.write(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs logbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- runBot(t, ctx, path, &logs) }()
	defer func() {
		if t.Failed() {
			t.Logf("the bot's log:\n%s", logs.String())
		}
	}()
	wait.For(t, "the bot running", func() bool { return strings.Contains(logs.String(), "bot running") })

	hold := make(chan struct{})
	e.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "First half,"}, {Content: " second half.", Wait: hold}}})
	e.say(11, "tell me")
	e.waitBotText(11, "the first answer's first words", contains("First half,"))

	rewrite := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	rewrite(c.clone().set("agent", "system_prompt", "You are the reloaded bot.").String())
	wait.For(t, "the reload's log line", func() bool {
		return strings.Contains(logs.String(), "msg=\"config reloaded\" applied=[agent.system_prompt]")
	})
	close(hold)
	e.waitBotText(11, "the first answer whole", func(s string) bool { return s == "First half, second half." })

	e.llm.Push(llm.Text("Fresh answer."))
	e.say(11, "again")
	e.waitBotText(11, "the second answer", contains("Fresh answer."))

	rewrite(c.clone().set("agent", "system_prompt", "A prompt that never runs.", "max_tool_rounds", 0).String())
	wait.For(t, "the refusal's log line", func() bool {
		return strings.Contains(logs.String(), "config reload refused; the running config stays") &&
			strings.Contains(logs.String(), "agent.max_tool_rounds: must be between 1 and 1024, got 0")
	})
	e.llm.Push(llm.Text("Third answer."))
	e.say(11, "once more")
	e.waitBotText(11, "the third answer", contains("Third answer."))

	reqs := e.llm.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	for i, want := range []string{"You are a test bot.", "You are the reloaded bot.", "You are the reloaded bot."} {
		if got := systemPrompt(reqs[i]); !strings.HasPrefix(got, want) {
			t.Errorf("turn %d was asked with the system prompt %q, want %q", i+1, got, want)
		}
	}
	select {
	case code := <-done:
		t.Fatalf("bot serve ended (status %d) after SIGHUP", code)
	default:
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("bot serve exited %d after a clean stop", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("bot serve did not return 30 s after the stop")
	}
}

// without is a copy of c without the sections named.
func (c *tomlConfig) without(names ...string) *tomlConfig {
	out := c.clone()
	out.sections = slices.DeleteFunc(out.sections, func(s *tomlSection) bool { return slices.Contains(names, s.name) })
	return out
}

// echoCall is a model reply that says text and then, once hold is closed (nil: at once), calls
// the MCP kit's echo tool.
func echoCall(id, text string, hold chan struct{}) llm.Reply {
	return llm.Reply{Chunks: []llm.Chunk{{Content: text},
		{ToolCalls: []llm.ToolCallDelta{{Index: 0, ID: id, Name: "echo", Arguments: `{"text":"hi"}`}}, Wait: hold}}}
}

// TestAReloadRemovesAndAddsMCPServersWithoutCuttingATurnThatUsesThem removes the MCP server from
// the file while a turn that called its tool streams on: that turn's next call to the tool still
// runs (the server it began with stays open until it ends), the next turn is not offered the
// tool, and putting the server back offers it again.
func TestAReloadRemovesAndAddsMCPServersWithoutCuttingATurnThatUsesThem(t *testing.T) {
	e := newEnv(t)
	c := e.toml().set("chat", "shutdown_grace_sec", 0)
	cfg, err := config.Load(c.write(t))
	if err != nil {
		t.Fatal(err)
	}
	hup := make(chan os.Signal, 1)
	e.startSignals(cfg, nil, hup)
	reload := func(want string) {
		t.Helper()
		n := strings.Count(e.logs.String(), `msg="config reloaded"`)
		hup <- syscall.SIGHUP
		wait.For(t, "the reload", func() bool { return strings.Count(e.logs.String(), `msg="config reloaded"`) > n })
		if !strings.Contains(e.logs.String(), `msg="config reloaded" applied=[`+want+`]`) {
			t.Fatalf("the reload did not apply %s", want)
		}
	}
	hold := make(chan struct{})
	e.llm.Push(echoCall("call_1", "Echo.", nil), echoCall("call_2", "Once more.", hold), llm.Text("Both echoed."))
	e.say(5, "echo twice")
	e.waitBotText(5, "the answer between the calls", contains("Once more."))

	if err := os.WriteFile(cfg.File, []byte(c.without("mcp.servers").String()), 0o600); err != nil {
		t.Fatal(err)
	}
	reload("mcp.servers")
	close(hold)
	e.waitBotText(5, "the answer after both calls", contains("Both echoed."))
	if n := e.kit.Calls("echo"); n != 2 {
		t.Fatalf("the MCP server ran %d echo calls, want 2: the turn's second call did not reach it", n)
	}

	e.llm.Push(llm.Text("No tools now."))
	e.say(6, "what can you do?")
	e.waitBotText(6, "the answer without the server", contains("No tools now."))
	reqs := e.llm.Requests()
	if tools := reqs[len(reqs)-1].Tools; slices.Contains(tools, "echo") {
		t.Fatalf("the turn after the server was removed was offered %q", tools)
	}

	if err := os.WriteFile(cfg.File, []byte(c.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	reload("mcp.servers")
	e.llm.Push(llm.Text("Tools again."))
	e.say(7, "and now?")
	e.waitBotText(7, "the answer with the server back", contains("Tools again."))
	reqs = e.llm.Requests()
	if tools := reqs[len(reqs)-1].Tools; !slices.Contains(tools, "echo") {
		t.Fatalf("the turn after the server was put back was offered %q, not echo", tools)
	}
}
