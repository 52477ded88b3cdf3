package discord_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"relaybot/adapters"
	"relaybot/adapters/discord"
	dtk "relaybot/internal/testkit/discord"
)

func TestStopButtonReachesHandlerAsStop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, nil, nil)
		ch := "500000000000000008"
		_, rc := hs.post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, Content: "<@" + hs.srv.BotID() + "> go", MentionBot: true})
		r := rc.out.NewReply(hs.ctx)
		r.Update("Thinking about a very long answer")
		hs.waitFor("the streaming message", func() bool { return len(hs.srv.BotMessages(ch)) == 1 })
		msg := hs.srv.BotMessages(ch)[0]
		if len(msg.Buttons) != 1 || msg.Buttons[0].CustomID != discord.StopButtonID || msg.Buttons[0].Label != "Stop" {
			t.Fatalf("streaming message buttons = %+v, want one Stop button", msg.Buttons)
		}
		if !strings.HasSuffix(msg.Content, "▌") {
			t.Errorf("streaming message %q shows no cursor", msg.Content)
		}
		if _, err := hs.srv.ClickButton(msg.ID, discord.StopButtonID, userID, nil); err != nil {
			t.Fatal(err)
		}
		stop := hs.next()
		if stop.in.Command != "stop" || stop.in.Chat != rc.in.Chat || stop.in.UserID != userID {
			t.Fatalf("button press reached the handler as %+v", stop.in)
		}
		if m, _ := hs.srv.Message(msg.ID); len(m.Buttons) != 0 {
			t.Errorf("Stop button still shown after the press")
		}
		partial := "Thinking about a very long answer"
		if err := r.Finish(hs.ctx, partial, nil); err != nil {
			t.Fatal(err)
		}
		if m, _ := hs.srv.Message(msg.ID); m.Content != partial || len(m.Buttons) != 0 {
			t.Errorf("stopped reply shows %q with buttons %+v", m.Content, m.Buttons)
		}
	})
}

// In a guild channel, a member who did not ask pressing Stop reaches the handler (which may
// refuse: only the asker or an admin stops an answer) but leaves the button, so the asker can
// still press it.
func TestStopButtonPressedByAnotherMember(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, nil, nil)
		ch := "500000000000000018"
		const bystander = "400000000000000002"
		_, rc := hs.post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, Content: "<@" + hs.srv.BotID() + "> go", MentionBot: true})
		r := rc.out.NewReply(hs.ctx)
		r.Update("A long answer in progress")
		hs.waitFor("the streaming message", func() bool { return len(hs.srv.BotMessages(ch)) == 1 })
		msg := hs.srv.BotMessages(ch)[0]
		if _, err := hs.srv.ClickButton(msg.ID, discord.StopButtonID, bystander, nil); err != nil {
			t.Fatal(err)
		}
		if stop := hs.next(); stop.in.Command != "stop" || stop.in.UserID != bystander {
			t.Fatalf("button press reached the handler as %+v", stop.in)
		}
		if m, _ := hs.srv.Message(msg.ID); len(m.Buttons) != 1 {
			t.Fatalf("a bystander's press took the asker's Stop button away: buttons %+v", m.Buttons)
		}
		if _, err := hs.srv.ClickButton(msg.ID, discord.StopButtonID, userID, nil); err != nil {
			t.Fatal(err)
		}
		if stop := hs.next(); stop.in.Command != "stop" || stop.in.UserID != userID {
			t.Fatalf("button press reached the handler as %+v", stop.in)
		}
		if m, _ := hs.srv.Message(msg.ID); len(m.Buttons) != 0 {
			t.Errorf("Stop button still shown after the asker's press")
		}
		if err := r.Finish(hs.ctx, "A long answer", nil); err != nil {
			t.Fatal(err)
		}
	})
}

func TestSlashAndTextCommands(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := startInBubble(t, func(o *discord.Options) { o.RegisterCommands = true },
			func(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
				if in.Command == "reset" {
					_ = out.Notice(ctx, "Conversation reset.")
				}
			})
		hs.waitFor("command registration", func() bool { return len(hs.srv.Commands()) == 4 })
		var names []string
		for _, c := range hs.srv.Commands() {
			names = append(names, c.Name)
		}
		if !slices.Equal(names, []string{"reset", "stop", "help", "usage"}) {
			t.Errorf("registered commands %v", names)
		}
		ch := "500000000000000009"
		it, err := hs.srv.SlashCommand(ch, guildID, "reset", userID, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := hs.next()
		if got.in.Command != "reset" || got.in.Chat.ChatID != ch || got.in.Kind != adapters.Group || got.in.UserID != userID {
			t.Errorf("slash command reached the handler as %+v", got.in)
		}
		hs.waitFor("the command's answer", func() bool {
			m, ok := hs.srv.InteractionResponse(it)
			return ok && m.Content == "Conversation reset."
		})

		_, txt := hs.post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, Content: "<@" + hs.srv.BotID() + "> /help models", MentionBot: true})
		if txt.in.Command != "help" || txt.in.Args != "models" {
			t.Errorf("text command = %q args %q", txt.in.Command, txt.in.Args)
		}
		_, path := hs.dm("500000000000000010", "/etc/hosts is what?")
		if path.in.Command != "" {
			t.Errorf("a path was taken for the command %q", path.in.Command)
		}
	})
}
