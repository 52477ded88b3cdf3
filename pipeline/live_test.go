package pipeline

import (
	"strings"
	"testing"

	"relaybot/adapters"
	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/wait"
)

// TestReconfigureKeepsTheRunningTurnAndChangesTheNext swaps the system prompt while a turn
// streams: that turn ends whole with the prompt it began with, the next one is asked with the
// new prompt, and what the old configuration held is retired only once its turn has ended.
func TestReconfigureKeepsTheRunningTurnAndChangesTheNext(t *testing.T) {
	h := newHarness(t, Options{})
	hold := make(chan struct{})
	h.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "First half,"}, {Content: " second half.", Wait: hold}}}, llm.Text("Fresh answer."))
	out := &recResponder{stream: true}
	done := h.handle(privateMsg("7", "1", "tell me"), out)
	wait.For(t, "the first turn's first words", func() bool { r := out.Reply(0); return r != nil && r.Latest() == "First half," })

	opts := h.p.first
	opts.History.SystemPrompt = "You are the reloaded bot."
	retired := make(chan struct{})
	if err := h.p.Reconfigure(h.p.now().parts.runner, h.p.now().parts.tools, opts, func() { close(retired) }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-retired:
		t.Fatal("the old configuration was retired while its turn still streamed")
	default:
	}
	close(hold)
	<-done
	if final, _ := out.Reply(0).Final(); final != "First half, second half." {
		t.Fatalf("the turn streaming during the reload ended as %q", final)
	}
	<-retired

	next := &recResponder{stream: true}
	<-h.handle(adapters.Inbound{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "7"}, Kind: adapters.Private,
		MessageID: "2", UserID: "7", UserName: "Ann", Text: "again"}, next)
	reqs := h.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	for i, want := range []string{"You are a test bot.", "You are the reloaded bot."} {
		if sys := reqs[i].Messages[0]; sys.Role != "system" || !strings.Contains(sys.Content, want) {
			t.Errorf("request %d's system prompt = %q, want %q", i+1, sys.Content, want)
		}
	}
	if final, _ := next.Reply(0).Final(); final != "Fresh answer." {
		t.Errorf("the next turn answered %q", final)
	}
}
