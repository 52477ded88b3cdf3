package telegram

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"relaybot/adapters"
)

// FuzzInbound runs Telegram messages through the adapter's inbound parser (addressing by
// mention, reply and prefix; commands, also after the mention or prefix) and checks what the
// pipeline relies on.
func FuzzInbound(f *testing.F) {
	seeds := []struct {
		text                     string
		group, replyToBot, topic bool
	}{
		{"hello", false, false, false},
		{"@relay_bot what time is it", true, false, false},
		{"İstanbul @relay_bot weather", true, false, false},
		{"300 \u212a @Relay_Bot is hot?", true, false, false},
		{"!ai /audit\nfetch_url", true, false, false},
		{"/reset@other_bot", false, false, false},
		{"/reset@relay_bot, please", true, false, false},
		{"@relay_bot /reset@other_bot", true, false, false},
		{"@relay_bots are cool", true, false, false},
		{"/etc/hosts is broken", false, false, false},
		{"and then?", true, true, true},
		{"\xff@relay_bot\xfe", true, false, false},
	}
	for _, s := range seeds {
		f.Add(s.text, s.group, s.replyToBot, s.topic)
	}
	const self = "relay_bot"
	a := &Adapter{
		opts: Options{TriggerPrefix: "!ai", MaxImageBytes: -1},
		log:  slog.New(slog.DiscardHandler),
		self: tgbotapi.User{ID: 1000, UserName: self, IsBot: true},
	}
	a.SetAccess(Access{}) // everyone answered, as New leaves it without allow lists
	f.Fuzz(func(t *testing.T, text string, group, replyToBot, topic bool) {
		m := &message{
			MessageID: 5, From: &tgbotapi.User{ID: 7, UserName: "ann"},
			Chat: tgChat{ID: 7, Type: "private"}, Date: 1, Text: text,
		}
		if group {
			m.Chat = tgChat{ID: -100200, Type: "supergroup", IsForum: topic}
		}
		if topic {
			m.MessageThreadID, m.IsTopicMessage = 3, true
		}
		if replyToBot {
			m.ReplyTo = &message{MessageID: 4, From: &tgbotapi.User{ID: 1000, IsBot: true}}
		}
		in, ok := a.inbound(context.Background(), m)
		trimmed := strings.TrimSpace(text)
		if c, isCmd := adapters.ParseCommand(trimmed); isCmd && !c.For(self) && ok {
			t.Fatalf("%q: a command naming another bot was handed over as %+v", text, in)
		}
		if !ok {
			if !group && trimmed != "" && !strings.HasPrefix(trimmed, "/") && !strings.Contains(strings.ToLower(trimmed), "@"+self) {
				t.Fatalf("%q: a plain private message was dropped", text)
			}
			return
		}
		if in.Chat.ChatID != strconv.FormatInt(m.Chat.ID, 10) || in.UserID != "7" || in.MessageID != "5" {
			t.Fatalf("%q: addressed as %+v", text, in)
		}
		if (in.Chat.ThreadID != "") != topic {
			t.Fatalf("%q: thread %q for a topic message %v", text, in.Chat.ThreadID, topic)
		}
		if in.Command != "" {
			if in.Text != "" {
				t.Fatalf("%q: command %q also carries the text %q", text, in.Command, in.Text)
			}
			if c, ok := adapters.ParseCommand("/" + in.Command); !ok || c.Name != in.Command {
				t.Fatalf("%q: command %q is no command name", text, in.Command)
			}
			return
		}
		if in.Text == "" || in.Text != strings.TrimSpace(in.Text) || len(in.Text) > len(text) {
			t.Fatalf("%q: text %q is not the trimmed message", text, in.Text)
		}
		if utf8.ValidString(text) && !utf8.ValidString(in.Text) {
			t.Fatalf("%q: removing the mention broke UTF-8: %q", text, in.Text)
		}
		if group && !replyToBot && !strings.HasPrefix(trimmed, "!ai") && !strings.Contains(strings.ToLower(text), "@"+self) {
			t.Fatalf("%q: a group message that neither mentions nor replies to the bot was handed over", text)
		}
	})
}
