package discord

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"relaybot/adapters"
	"relaybot/chat"
)

// capture is a Handler that keeps the last Inbound it got.
type capture struct {
	in  adapters.Inbound
	got bool
}

func (c *capture) Handle(_ context.Context, in adapters.Inbound, _ adapters.Responder) {
	c.in, c.got = in, true
}

// FuzzInbound runs Discord messages through the adapter's inbound path (addressing by mention,
// reply and prefix; text commands) and checks what the pipeline relies on.
func FuzzInbound(f *testing.F) {
	const botID, self = "200000000000000001", "relaybot"
	seeds := []struct {
		content           string
		guild, mentionsUs bool
		replyToBot        bool
	}{
		{"hello", false, false, false},
		{"<@" + botID + "> what time", true, true, false},
		{"<@!" + botID + "> /help models", true, true, false},
		{"!ai summarise", true, false, false},
		{"!ai /reset@otherbot", true, false, false},
		{"/reset@otherbot", false, false, false},
		{"/Reset@RelayBot", false, false, false},
		{"and then?", true, false, true},
		{"/etc/hosts is what?", false, false, false},
		{"<@" + botID + ">", true, true, false},
		{"<@<@" + botID + ">" + botID + "> hi", true, true, false},
		{"<@!<@" + botID + ">" + botID + "> hi", false, false, false},
		{"\xff<@" + botID + ">\xfe", true, false, false},
	}
	for _, s := range seeds {
		f.Add(s.content, s.guild, s.mentionsUs, s.replyToBot)
	}
	a, err := New(Options{Token: "x", APIBase: "http://127.0.0.1:1/api/v10", TriggerPrefix: "!ai"})
	if err != nil {
		f.Fatal(err)
	}
	b := a.inbox
	b.bot.id, b.bot.name = botID, self
	// The channel is known not to be a thread: no lookup (to an API that is not there) decides
	// whether a guild message is answered.
	b.access.parents["510000000000000001"] = threadInfo{}
	f.Fuzz(func(t *testing.T, content string, guild, mentionsUs, replyToBot bool) {
		m := &discordgo.MessageCreate{Message: &discordgo.Message{
			ID: "300000000000000001", ChannelID: "510000000000000001", Content: content,
			Author: &discordgo.User{ID: "400000000000000001", Username: "ann"},
		}}
		if guild {
			m.GuildID = "600000000000000001"
			m.Member = &discordgo.Member{}
		}
		if mentionsUs {
			m.Mentions = []*discordgo.User{{ID: botID}}
		}
		if replyToBot {
			m.ReferencedMessage = &discordgo.Message{ID: "1", Author: &discordgo.User{ID: botID}}
		}
		in := adapters.Inbound{Chat: chat.Ref{Platform: chat.Discord, ChatID: m.ChannelID}, Kind: adapters.Private,
			MessageID: m.ID, UserID: m.Author.ID}
		var h capture
		prev, mine := b.queueHandover(m.ChannelID)
		b.handleMessage(context.Background(), &h, m, botID, in, prev, mine)
		if !h.got {
			rest, _ := strings.CutPrefix(strings.TrimSpace(stripMention(content, botID)), "!ai")
			if c, ok := adapters.ParseCommand(strings.TrimSpace(rest)); !guild && (!ok || c.For(self)) {
				t.Fatalf("%q: a direct message was dropped", content)
			}
			return
		}
		got := h.in
		if got.Chat.ChatID != m.ChannelID || got.UserID != m.Author.ID || (got.Kind == adapters.Group) != guild {
			t.Fatalf("%q: addressed as %+v", content, got)
		}
		if c, ok := adapters.ParseCommand(got.Text); ok && !c.For(self) {
			t.Fatalf("%q: a command naming another bot was handed over as %+v", content, got)
		}
		if got.Command != "" {
			if c, ok := adapters.ParseCommand(got.Text); !ok || c.Name != got.Command || c.Args != got.Args {
				t.Fatalf("%q: command %q args %q do not match the text %q", content, got.Command, got.Args, got.Text)
			}
		}
		if got.Text != strings.TrimSpace(got.Text) || len(got.Text) > len(content) {
			t.Fatalf("%q: text %q is not the trimmed message", content, got.Text)
		}
		if utf8.ValidString(content) && !utf8.ValidString(got.Text) {
			t.Fatalf("%q: removing the mention broke UTF-8: %q", content, got.Text)
		}
		if strings.Contains(got.Text, "<@"+botID+">") || strings.Contains(got.Text, "<@!"+botID+">") {
			t.Fatalf("%q: our mention is left in the text %q", content, got.Text)
		}
		if guild && !mentionsUs && !replyToBot && !strings.HasPrefix(strings.TrimSpace(content), "!ai") &&
			!strings.Contains(content, "<@"+botID+">") && !strings.Contains(content, "<@!"+botID+">") {
			t.Fatalf("%q: a guild message that neither mentions nor replies to the bot was handed over", content)
		}
	})
}
