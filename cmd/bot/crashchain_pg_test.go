package main

import (
	"strings"
	"sync/atomic"
	"testing"

	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/wait"
	"relaybot/pipeline"
	"relaybot/store/storetest"
)

// TestAMessageThatKilledTwoReplicasGetsANoticeFromTheThird sends a webhook update to a replica
// (a child process) and kills it (SIGKILL) mid-answer; a second replica (a child too) takes the
// update over, answers it again, and is killed mid-answer as well; a third replica then takes it
// over a second time and answers it with pipeline.CrashedTwiceText instead of a third try (the
// model is asked twice, not three times). Before, each survivor counted handovers on its own and
// a chain of survivors could each retry a message that kills its replica.
func TestAMessageThatKilledTwoReplicasGetsANoticeFromTheThird(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	dsn := storetest.PostgresDatabaseDSN(t)
	e := newEnv(t)
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)} // two children, the survivor
	var target atomic.Int64
	proxy := switchProxy(t, func() string { return addrs[target.Load()] })
	webhook := func(addr string) *tomlConfig {
		return telegramReplica(t, dsn, e, webhookAt(addr, proxy.URL+"/hook")...)
	}
	hold := make(chan struct{})
	defer close(hold)
	e.llm.Push(
		llm.Reply{Chunks: []llm.Chunk{{Content: "Half an"}, {Content: " answer", Wait: hold}}},
		llm.Reply{Chunks: []llm.Chunk{{Content: "Half again"}, {Content: " an answer", Wait: hold}}},
	)
	const chat = 6101
	firstOut, killFirst := startChildServe(t, webhook(addrs[0]).write(t))
	defer killFirst()
	wait.For(t, "the first replica to run", func() bool { return strings.Contains(firstOut.String(), "bot running") })
	e.say(chat, "question")
	e.waitBotText(chat, "the first replica's first words", contains("Half an"))

	// The second replica starts alone with the first: only it can take the message over.
	secondOut, killSecond := startChildServe(t, webhook(addrs[1]).write(t))
	defer killSecond()
	wait.For(t, "the second replica to run", func() bool { return strings.Contains(secondOut.String(), "bot running") })
	target.Store(1)
	killFirst()
	e.waitBotText(chat, "the second replica's answer to the adopted message", contains("Half again"))

	target.Store(2)
	survivor := startReplica(t, webhook(addrs[2]).parse(t))
	killSecond()
	e.waitBotText(chat, "the survivor's notice", contains(pipeline.CrashedTwiceText))
	if err := survivor.stop(); err != nil {
		t.Fatal(err)
	}
	if n := len(e.llm.Requests()); n != 2 {
		t.Errorf("the model was asked %d times, want 2: the message answered once after the first death, not after the second", n)
	}
	notices := 0
	for _, s := range e.botTexts(chat) {
		if strings.Contains(s, pipeline.CrashedTwiceText) {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("%d notices, want 1: %q", notices, e.botTexts(chat))
	}
}
