package discord_test

import (
	"strings"
	"testing"
	"testing/synctest"

	"relaybot/adapters/discord"
	dtk "relaybot/internal/testkit/discord"
)

func TestDirectMessagesFollowTheGuildRules(t *testing.T) {
	t.Parallel()
	const (
		role     = "610000000000000001"
		withRole = "400000000000000011"
		noRole   = "400000000000000012"
		stranger = "400000000000000013"
		trusted  = "400000000000000014"
	)
	guildRules := func(o *discord.Options) {
		o.AllowedGuilds = []string{guildID}
		o.AllowedRoles = []string{role}
		o.AccessUsers = []string{trusted}
	}
	tests := []struct {
		name   string
		tweak  func(*discord.Options)
		author string
		want   bool
	}{
		{"member with an allowed role", guildRules, withRole, true},
		{"member without an allowed role", guildRules, noRole, false},
		{"not a member of an allowed guild", guildRules, stranger, false},
		{"user listed in [access]", guildRules, trusted, true},
		{"no guild rules: anyone", nil, stranger, true},
		{"direct messages off", func(o *discord.Options) { guildRules(o); o.NoDMs = true }, withRole, false},
		{"channel rule: member of the channel's guild", func(o *discord.Options) { o.AllowedChannels = []string{"510000000000000031"} }, noRole, true},
		{"channel rule: not a member", func(o *discord.Options) { o.AllowedChannels = []string{"510000000000000031"} }, stranger, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				hs := startInBubble(t, func(o *discord.Options) {
					o.RegisterCommands = true
					if tt.tweak != nil {
						tt.tweak(o)
					}
				}, nil)
				hs.waitFor("command registration", func() bool { return len(hs.srv.Commands()) == 4 })
				hs.srv.AddChannel(dtk.Channel{ID: "510000000000000031", GuildID: guildID, Type: dtk.ChannelGuildText})
				hs.srv.AddMember(guildID, withRole, []string{role})
				hs.srv.AddMember(guildID, noRole, nil)
				ch := "520000000000000031"
				m, err := hs.srv.Post(dtk.UserMessage{ChannelID: ch, AuthorID: tt.author, Content: "hello"})
				if err != nil {
					t.Fatal(err)
				}
				// Slash commands in a direct message follow the same rule.
				it, err := hs.srv.SlashCommand(ch, "", "help", tt.author, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !tt.want {
					hs.waitFor("the slash command to be refused", func() bool {
						r, ok := hs.srv.InteractionResponse(it)
						return ok && r.Content != ""
					})
					if r, _ := hs.srv.InteractionResponse(it); !strings.Contains(r.Content, "does not answer") {
						t.Fatalf("a refused /help in a DM was answered %q", r.Content)
					}
				}
				// A guild message every case answers: when it arrives, the case was decided.
				sentinel, err := hs.srv.Post(dtk.UserMessage{ChannelID: "510000000000000031", GuildID: guildID, AuthorID: withRole,
					RoleIDs: []string{role}, Content: "<@" + hs.srv.BotID() + "> sentinel", MentionBot: true})
				if err != nil {
					t.Fatal(err)
				}
				var gotMsg, gotCmd bool
				for seen := false; !seen || tt.want && (!gotMsg || !gotCmd); {
					rc := hs.next()
					switch {
					case rc.in.MessageID == sentinel.ID:
						seen = true
					case rc.in.MessageID == m.ID:
						gotMsg = true
					case rc.in.Command == "help":
						gotCmd = true
					}
				}
				if gotMsg != tt.want || gotCmd != tt.want {
					t.Fatalf("direct message answered %v, slash command answered %v; want %v (a user refused in the guild was answered by DM)", gotMsg, gotCmd, tt.want)
				}
			})
		})
	}
}

// TestSetAccessChangesWhoMayWriteWhileRunning: a reload's rules (SetAccess) apply from the next
// message on, and a direct message's verdict remembered under the old rules is forgotten: a
// member refused by DM for lacking the role is answered once the role is no longer required.
func TestSetAccessChangesWhoMayWriteWhileRunning(t *testing.T) {
	t.Parallel()
	const (
		role     = "610000000000000001"
		withRole = "400000000000000011"
		noRole   = "400000000000000012"
		text     = "510000000000000031"
		dm       = "520000000000000031"
	)
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, func(o *discord.Options) {
			o.AllowedGuilds, o.AllowedRoles = []string{guildID}, []string{role}
		}, nil)
		hs.srv.AddChannel(dtk.Channel{ID: text, GuildID: guildID, Type: dtk.ChannelGuildText})
		hs.srv.AddMember(guildID, withRole, []string{role})
		hs.srv.AddMember(guildID, noRole, nil)
		// answered posts a direct message of noRole and a guild message every rule answers, and
		// reports whether the direct message was handed on: once the guild message was, when
		// refusing it is expected (want false), else once it was.
		answered := func(content string, want bool) bool {
			t.Helper()
			m, err := hs.srv.Post(dtk.UserMessage{ChannelID: dm, AuthorID: noRole, Content: content})
			if err != nil {
				t.Fatal(err)
			}
			synctest.Wait() // the direct message is decided (its verdict remembered) before what follows
			sentinel, err := hs.srv.Post(dtk.UserMessage{ChannelID: text, GuildID: guildID, AuthorID: withRole,
				RoleIDs: []string{role}, Content: "<@" + hs.srv.BotID() + "> sentinel", MentionBot: true})
			if err != nil {
				t.Fatal(err)
			}
			got, seen := false, false
			for !seen || want && !got {
				rc := hs.next()
				got = got || rc.in.MessageID == m.ID
				seen = seen || rc.in.MessageID == sentinel.ID
			}
			return got
		}
		if answered("before", false) {
			t.Fatal("a member without the allowed role was answered by DM")
		}
		hs.a.SetAccess(discord.Access{AllowedGuilds: []string{guildID}})
		if !answered("after", true) {
			t.Fatal("after the role was no longer required, the member's DM was still refused")
		}
	})
}
