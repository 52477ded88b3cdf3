package main

import (
	"slices"
	"strings"
	"testing"

	"relaybot/internal/testkit/llm"
	"relaybot/pipeline"
)

// The whole bot on Telegram: a message the provider refuses (as OpenAI refuses content, on every
// request that holds it) is told as refused, and the user's next messages are answered, their
// requests without it.
func TestServeARefusedMessageDoesNotPoisonTheChat(t *testing.T) {
	e := newEnv(t)
	e.llm.SetHandler(llm.RefuseContaining("forbidden words", func(llm.Request) llm.Reply { return llm.Text("Happy to help.") }))
	stop := e.start(e.config())
	defer stop()

	e.say(5, "tell me the forbidden words")
	e.waitBotText(5, "the refusal's line", func(s string) bool { return s == pipeline.DefaultRefusedText })
	e.say(5, "something else then")
	e.waitBotText(5, "the next message answered", contains("Happy to help."))
	reqs := e.llm.Requests()
	last := reqs[len(reqs)-1]
	if lastUser(last) != "something else then" || slices.ContainsFunc(last.Messages, func(m llm.Message) bool {
		return strings.Contains(m.Content, "forbidden words")
	}) {
		t.Errorf("the next message's request carried the refused one: last user message %q", lastUser(last))
	}
	for _, s := range e.botTexts(5) {
		if strings.Contains(s, "safety system") || strings.Contains(s, "Request failed") {
			t.Errorf("the chat shows %q: the provider's words or the bare hint, not what to do", s)
		}
	}
}
