package main

import (
	"context"
	"strings"
	"testing"
	"time"

	dtk "relaybot/internal/testkit/discord"
	"relaybot/internal/testkit/llm"
	tgkit "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
	"relaybot/policy"
)

// offeredModel answers every message with the names of the tools it was offered.
func offeredModel(r llm.Request) llm.Reply {
	return llm.Text("offered: " + strings.Join(r.Tools, ",") + ".")
}

// A Telegram forum topic is under its group's rules: a tool policy denying a tool in the group
// denies it in the topic, and a deny list naming one topic ("telegram:-700#9") leaves that topic
// unanswered while the group's other topics are answered.
func TestTelegramForumTopicsFollowTheirGroupsRules(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Tools.Policy = []policy.Rule{{Tool: "echo", Chats: []string{"telegram:-700"}, Action: "deny"}}
	cfg.Access.DenyChats = []string{"telegram:-700#9"}
	e.llm.SetHandler(offeredModel)
	e.start(cfg)
	forum := tgkit.Chat{ID: -700, Type: "supergroup", Title: "forum", IsForum: true}

	e.tg.Send(tgkit.Inbound{Chat: forum, From: user(7), ThreadID: 9, Text: "@relay_test_bot in the denied topic"})
	e.waitLog("chat is on the deny list")
	e.tg.Send(tgkit.Inbound{Chat: forum, From: user(7), ThreadID: 5, Text: "@relay_test_bot which tools?"})
	got := e.waitBotText(forum.ID, "the topic's answer", contains("offered:"))
	if strings.Contains(got, "echo") || !strings.Contains(got, "current_time") {
		t.Fatalf("the topic's model request offered %q; want the group's policy (echo denied) to hold", got)
	}
	for _, m := range e.tg.BotMessages(forum.ID) {
		if m.ThreadID == 9 {
			t.Fatalf("the bot answered in the denied topic: %q", m.Text)
		}
	}
}

// A Discord thread is under its parent channel's rules: a tool policy denying a tool in the
// channel denies it in the thread, and a deny list naming the parent channel leaves its
// threads unanswered.
func TestDiscordThreadsFollowTheirParentsRules(t *testing.T) {
	e := newEnv(t)
	dc := dtk.New(dtk.Config{})
	t.Cleanup(dc.Close)
	const guild, channel, thread, deniedCh, deniedThread = "900000000000000001", "800000000000000001",
		"800000000000000002", "800000000000000003", "800000000000000004"
	dc.AddChannel(dtk.Channel{ID: channel, GuildID: guild, Type: dtk.ChannelGuildText})
	dc.AddChannel(dtk.Channel{ID: thread, GuildID: guild, ParentID: channel, Type: dtk.ChannelPublicThread})
	dc.AddChannel(dtk.Channel{ID: deniedCh, GuildID: guild, Type: dtk.ChannelGuildText})
	dc.AddChannel(dtk.Channel{ID: deniedThread, GuildID: guild, ParentID: deniedCh, Type: dtk.ChannelPublicThread})
	e.discord = []any{"enabled", true, "token", dc.Token(), "api_base", dc.APIBase()}
	cfg := e.config()
	cfg.Tools.Policy = []policy.Rule{{Tool: "echo", Chats: []string{"discord:" + channel}, Action: "deny"}}
	cfg.Access.DenyChats = []string{"discord:" + deniedCh}
	e.llm.SetHandler(offeredModel)
	e.start(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := dc.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	post := func(ch, text string) {
		if _, err := dc.Post(dtk.UserMessage{ChannelID: ch, GuildID: guild, AuthorID: "600", MentionBot: true,
			Content: "<@100000000000000001> " + text}); err != nil {
			t.Fatal(err)
		}
	}
	post(deniedThread, "in a thread of a denied channel")
	e.waitLog("chat is on the deny list")
	post(thread, "which tools?")
	var got string
	wait.For(t, "the thread's answer", func() bool {
		for _, m := range dc.BotMessages(thread) {
			if strings.Contains(m.Content, "offered:") {
				got = m.Content
				return true
			}
		}
		return false
	})
	if strings.Contains(got, "echo") || !strings.Contains(got, "current_time") {
		t.Fatalf("the thread's model request offered %q; want the parent channel's policy (echo denied) to hold", got)
	}
	if n := len(dc.BotMessages(deniedThread)); n != 0 {
		t.Fatalf("the bot answered %d times in a thread of a denied channel", n)
	}
}
