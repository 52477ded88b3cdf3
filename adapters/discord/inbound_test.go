package discord_test

import (
	"bytes"
	"testing"
	"testing/synctest"

	"relaybot/adapters"
	"relaybot/adapters/discord"
	"relaybot/chat"
	dtk "relaybot/internal/testkit/discord"
)

func TestWhichMessagesAreAddressed(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const (
			allowedCh = "510000000000000001"
			otherCh   = "510000000000000002"
			threadCh  = "510000000000000003"
			role      = "610000000000000001"
		)
		hs := startInBubble(t, func(o *discord.Options) {
			o.TriggerPrefix = "!ai"
			o.AllowedGuilds = []string{guildID}
			o.AllowedChannels = []string{allowedCh}
			o.AllowedRoles = []string{role}
		}, nil)
		hs.srv.AddMember(guildID, userID, []string{role}) // may send direct messages
		hs.srv.AddChannel(dtk.Channel{ID: allowedCh, GuildID: guildID, Type: dtk.ChannelGuildText})
		hs.srv.AddChannel(dtk.Channel{ID: otherCh, GuildID: guildID, Type: dtk.ChannelGuildText})
		hs.srv.AddChannel(dtk.Channel{ID: threadCh, GuildID: guildID, ParentID: allowedCh, Type: dtk.ChannelPublicThread})
		bot := hs.srv.BotID()
		botMsg, err := discord.MessengerOf(hs.a).Send(hs.ctx, chat.Ref{Platform: chat.Discord, ChatID: allowedCh}, "earlier answer", adapters.SendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		roles := []string{role}
		cases := []struct {
			name     string
			msg      dtk.UserMessage
			want     bool
			wantText string
		}{
			{"dm from a member with the role", dtk.UserMessage{ChannelID: "520000000000000001", Content: "hello"}, true, "hello"},
			{"dm with prefix", dtk.UserMessage{ChannelID: "520000000000000001", Content: "!ai hello"}, true, "hello"},
			{"guild without mention", dtk.UserMessage{ChannelID: allowedCh, GuildID: guildID, RoleIDs: roles, Content: "just chatting"}, false, ""},
			{"mention", dtk.UserMessage{ChannelID: allowedCh, GuildID: guildID, RoleIDs: roles, Content: "<@" + bot + "> what time", MentionBot: true}, true, "what time"},
			{"reply to the bot", dtk.UserMessage{ChannelID: allowedCh, GuildID: guildID, RoleIDs: roles, Content: "and then?", ReplyTo: botMsg.ID}, true, "and then?"},
			{"prefix", dtk.UserMessage{ChannelID: allowedCh, GuildID: guildID, RoleIDs: roles, Content: "!ai summarise"}, true, "summarise"},
			{"thread of an allowed channel", dtk.UserMessage{ChannelID: threadCh, GuildID: guildID, RoleIDs: roles, Content: "!ai in thread"}, true, "in thread"},
			{"channel not allowed", dtk.UserMessage{ChannelID: otherCh, GuildID: guildID, RoleIDs: roles, Content: "!ai hi"}, false, ""},
			{"guild not allowed", dtk.UserMessage{ChannelID: "510000000000000009", GuildID: "399999999999999999", RoleIDs: roles, Content: "!ai hi"}, false, ""},
			{"role missing", dtk.UserMessage{ChannelID: allowedCh, GuildID: guildID, Content: "!ai hi"}, false, ""},
		}
		for _, tc := range cases {
			tc.msg.AuthorID = userID
			m, err := hs.srv.Post(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			// A direct message after each case: when it arrives, the case's message was decided.
			sentinel, err := hs.srv.Post(dtk.UserMessage{ChannelID: "520000000000000009", AuthorID: userID, Content: "sentinel"})
			if err != nil {
				t.Fatal(err)
			}
			var got *adapters.Inbound
			for seen := false; !seen || (tc.want && got == nil); {
				rc := hs.next()
				switch rc.in.MessageID {
				case sentinel.ID:
					seen = true
				case m.ID:
					in := rc.in
					got = &in
				default:
					t.Fatalf("%s: unexpected message %q reached the handler", tc.name, rc.in.Text)
				}
			}
			if (got != nil) != tc.want {
				t.Errorf("%s: addressed = %v, want %v", tc.name, got != nil, tc.want)
				continue
			}
			if got != nil && (got.Text != tc.wantText || got.Chat.ChatID != tc.msg.ChannelID) {
				t.Errorf("%s: text %q in chat %s, want %q in %s", tc.name, got.Text, got.Chat.ChatID, tc.wantText, tc.msg.ChannelID)
			}
			// A thread's message names its parent channel, whose rules the pipeline applies to it.
			if wantParent := map[string]string{threadCh: allowedCh}[tc.msg.ChannelID]; got != nil && got.ParentChatID != wantParent {
				t.Errorf("%s: parent channel %q, want %q", tc.name, got.ParentChatID, wantParent)
			}
		}
	})
}

func TestImagesAreDownloadedAndCapped(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, func(o *discord.Options) { o.MaxImageBytes = 1000 }, nil)
		small := bytes.Repeat([]byte{1}, 500)
		_, rc := hs.post(dtk.UserMessage{ChannelID: "530000000000000001", Content: "what is this", Attachments: []dtk.Attachment{
			{Filename: "a.png", ContentType: "image/png", Data: small},
			{Filename: "big.png", ContentType: "image/png", Data: bytes.Repeat([]byte{2}, 5000)},
			{Filename: "notes.txt", ContentType: "text/plain", Data: []byte("text")},
		}})
		if len(rc.in.Images) != 1 || !bytes.Equal(rc.in.Images[0].Data, small) || rc.in.Images[0].MIME != "image/png" {
			t.Errorf("images = %d, want only the small picture", len(rc.in.Images))
		}
	})
}

func TestTextCommandNamingAnotherBotIsIgnored(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, nil, nil)
		ch := "500000000000000077"
		cases := []struct {
			text     string
			want     bool
			cmd, arg string
		}{
			{"/reset@otherbot", false, "", ""},
			{"/audit@otherbot fetch_url", false, "", ""},
			{"/reset@" + "RelayBot", true, "reset", ""},
			{"/Reset", true, "reset", ""},
			{"/help@relaybot models", true, "help", "models"},
		}
		for _, tc := range cases {
			m, err := hs.srv.Post(dtk.UserMessage{ChannelID: ch, AuthorID: userID, Content: tc.text})
			if err != nil {
				t.Fatal(err)
			}
			// A direct message after each case: when it arrives, the case's message was decided.
			sentinel, err := hs.srv.Post(dtk.UserMessage{ChannelID: ch, AuthorID: userID, Content: "sentinel"})
			if err != nil {
				t.Fatal(err)
			}
			var got *adapters.Inbound
			for seen := false; !seen || (tc.want && got == nil); {
				rc := hs.next()
				switch rc.in.MessageID {
				case sentinel.ID:
					seen = true
				case m.ID:
					in := rc.in
					got = &in
				}
			}
			if (got != nil) != tc.want {
				t.Errorf("%q reached the bot: %v, want %v (another bot's /reset reset our conversation)", tc.text, got != nil, tc.want)
				continue
			}
			if got != nil && (got.Command != tc.cmd || got.Args != tc.arg) {
				t.Errorf("%q: command %q args %q, want %q %q", tc.text, got.Command, got.Args, tc.cmd, tc.arg)
			}
		}
	})
}
