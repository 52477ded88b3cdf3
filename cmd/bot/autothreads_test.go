package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	dtk "relaybot/internal/testkit/discord"
	"relaybot/internal/testkit/llm"
	tgkit "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
)

// threadModel answers a title request with a title, and every other message with the questions
// of the conversation it was sent, without their senders' names ("seen: q1 | q2").
func threadModel(r llm.Request) llm.Reply {
	if strings.Contains(r.Messages[0].Content, "title of at most six words") {
		return llm.Text("Tides explained")
	}
	var seen []string
	for _, m := range r.Messages[1:] {
		if m.Role == "user" {
			_, text, named := strings.Cut(m.Content, "] ") // "[name] text" in a shared conversation
			if !named {
				text = m.Content
			}
			seen = append(seen, strings.TrimSpace(text))
		}
	}
	return llm.Text("seen: " + strings.Join(seen, " | "))
}

// discordThreadsEnv is a bot on Discord with threads = "auto" in one guild channel.
func discordThreadsEnv(t *testing.T, extra ...any) (*env, *dtk.Server) {
	t.Helper()
	e := newEnv(t)
	dc := dtk.New(dtk.Config{})
	t.Cleanup(dc.Close)
	dc.AddChannel(dtk.Channel{ID: autoCh, GuildID: autoGuild, Type: dtk.ChannelGuildText})
	e.discord = append([]any{"enabled", true, "token", dc.Token(), "api_base", dc.APIBase()}, extra...)
	e.llm.SetHandler(threadModel)
	e.start(e.config())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := dc.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return e, dc
}

const autoGuild, autoCh = "900000000000000011", "800000000000000011"

// postIn posts a member's message in ch, mentioning the bot when mention.
func postIn(t *testing.T, dc *dtk.Server, ch, text string, mention bool) dtk.Message {
	t.Helper()
	um := dtk.UserMessage{ChannelID: ch, GuildID: autoGuild, AuthorID: "600", Content: text}
	if mention {
		um.Content, um.MentionBot = "<@"+dc.BotID()+"> "+text, true
	}
	m, err := dc.Post(um)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// botSays waits until a bot message in ch satisfies ok.
func botSays(t *testing.T, dc *dtk.Server, ch, what string, ok func(string) bool) {
	t.Helper()
	var seen []string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the bot's messages in %s: %q", ch, seen)
		}
	})
	wait.For(t, what, func() bool {
		seen = seen[:0]
		for _, m := range dc.BotMessages(ch) {
			seen = append(seen, m.Content)
			if ok(m.Content) {
				return true
			}
		}
		return false
	})
}

// With threads = "auto", a mention opens a thread on the question and is answered there; a
// follow-up in the thread needs no mention and continues its conversation; the thread is
// renamed once to the model's title; a second mention opens another thread with a history of
// its own; the channel itself holds no answer.
func TestDiscordAutoThreadsKeepEachConversationInItsThread(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	_, dc := discordThreadsEnv(t, "threads", "auto")

	q1 := postIn(t, dc, autoCh, "why tides", true)
	botSays(t, dc, q1.ID, "the first answer in the thread", func(s string) bool { return s == "seen: why tides" })
	wait.For(t, "the thread's title", func() bool { c, _ := dc.Channel(q1.ID); return c.Name == "Tides explained" })

	postIn(t, dc, q1.ID, "and the moon", false)
	botSays(t, dc, q1.ID, "the follow-up's answer, with the thread's history", func(s string) bool { return s == "seen: why tides | and the moon" })

	q2 := postIn(t, dc, autoCh, "what is rust", true)
	botSays(t, dc, q2.ID, "the second thread's answer, with a history of its own", func(s string) bool { return s == "seen: what is rust" })
	if n := len(dc.Threads(autoCh)); n != 2 {
		t.Errorf("%d threads, want one per conversation", n)
	}
	if n := len(dc.BotMessages(autoCh)); n != 0 {
		t.Errorf("the bot wrote %d messages in the channel itself", n)
	}
	wait.For(t, "the second thread's title", func() bool { c, _ := dc.Channel(q2.ID); return c.Name == "Tides explained" })
	if renames := len(dc.CallsTo(dtk.RouteModifyChannel)); renames != 2 {
		t.Errorf("%d renames, want one per thread", renames)
	}
}

// With threads off, the bot answers in the channel as before and opens no thread; with threads
// on, a thread Discord refuses still gets its answer, in the channel, and the log says why.
func TestDiscordWithoutThreadsOrWhenRefusedAnswersInTheChannel(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	t.Run("off", func(t *testing.T) {
		_, dc := discordThreadsEnv(t)
		postIn(t, dc, autoCh, "why tides", true)
		botSays(t, dc, autoCh, "the answer in the channel", func(s string) bool { return s == "seen: why tides" })
		if n := len(dc.CallsTo(dtk.RouteStartThread)); n != 0 {
			t.Errorf("%d threads opened with threads off", n)
		}
	})
	t.Run("refused", func(t *testing.T) {
		e, dc := discordThreadsEnv(t, "threads", "auto")
		dc.FailNext(dtk.RouteStartThread, http.StatusForbidden, 1)
		postIn(t, dc, autoCh, "why tides", true)
		botSays(t, dc, autoCh, "the answer in the channel", func(s string) bool { return s == "seen: why tides" })
		e.waitLog("could not open a thread for the conversation; answering in the channel")
		if n := len(dc.Threads(autoCh)); n != 0 {
			t.Errorf("%d threads", n)
		}
	})
}

// With private_topics, a message in a private chat's main chat opens a topic where it is
// answered (renamed once to the model's title); a message in the topic continues its
// conversation; /new opens another topic with a conversation of its own.
func TestTelegramPrivateTopicsKeepEachConversationInItsTopic(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	cfg := e.config()
	cfg.Telegram.PrivateTopics = true
	e.llm.SetHandler(threadModel)
	e.start(cfg)
	const ann = 42
	inTopic := func(topic int, what string, ok func(string) bool) {
		t.Helper()
		wait.For(t, what, func() bool {
			for _, m := range e.tg.BotMessages(ann) {
				if m.ThreadID == topic && ok(m.Text) {
					return true
				}
			}
			return false
		})
	}
	topicNamed := func(name string) int {
		t.Helper()
		var id int
		wait.For(t, "a topic named "+name, func() bool {
			for tid, n := range e.tg.Topics(ann) {
				if n == name {
					id = tid
					return true
				}
			}
			return false
		})
		return id
	}

	e.say(ann, "why tides")
	first := topicNamed("Tides explained") // named from the question, then by the model
	inTopic(first, "the answer in the topic", func(s string) bool { return s == "seen: why tides" })

	e.tg.Send(tgkit.Inbound{Chat: private(ann), From: user(ann), ThreadID: first, Text: "and the moon"})
	inTopic(first, "the follow-up's answer, with the topic's history", func(s string) bool { return s == "seen: why tides | and the moon" })

	e.tg.Send(tgkit.Inbound{Chat: private(ann), From: user(ann), ThreadID: first, Text: "/new"})
	second := topicNamed("New conversation")
	inTopic(second, "/new's notice in the new topic", func(s string) bool { return s == "Started a new conversation." })
	e.tg.Send(tgkit.Inbound{Chat: private(ann), From: user(ann), ThreadID: second, Text: "what is rust"})
	inTopic(second, "the new topic's answer, with a history of its own", func(s string) bool { return s == "seen: what is rust" })
	wait.For(t, "the new topic titled by its first question's answer", func() bool { return e.tg.Topics(ann)[second] == "Tides explained" })

	for _, m := range e.tg.BotMessages(ann) {
		if m.ThreadID == 0 {
			t.Errorf("the bot answered in the main chat: %q", m.Text)
		}
	}
}
