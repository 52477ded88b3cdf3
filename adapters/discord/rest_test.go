package discord_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"

	"relaybot/adapters"
	"relaybot/adapters/discord"
	dtk "relaybot/internal/testkit/discord"
)

// TestLookupsKeepToTheGlobalBudget posts a message in each of 20 channels the gateway never
// described, at once, to a bot whose global budget is 10 requests a second: each channel must be
// looked up (is it a thread, whose parent's rules apply?) before the message reaches the
// handler, and Discord counts those lookups against the bot's global limit like its messages
// (and like the gateway's address, which discordgo asks for as the bot connects). Every
// message reaches the handler and is answered, and Discord answers no request with 429; a
// lookup refused with a 429 used to drop its message.
func TestLookupsKeepToTheGlobalBudget(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const channels, perSecond = 20, 10
		hs := startWith(t, dtk.Config{InMemory: true, GlobalN: perSecond}, func(o *discord.Options) { o.GlobalPerSecond = perSecond },
			func(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
				if err := out.NewReply(ctx).Finish(ctx, "answer to "+in.Text, nil); err != nil {
					t.Errorf("answering %q: %v", in.Text, err)
				}
			})
		for i := range channels {
			ch := fmt.Sprintf("5100000000000000%02d", i)
			if _, err := hs.srv.Post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, AuthorID: userID,
				Content: fmt.Sprintf("<@%s> m%d", hs.srv.BotID(), i), MentionBot: true}); err != nil {
				t.Fatal(err)
			}
		}
		for range channels {
			hs.next()
		}
		for i := range channels {
			ch := fmt.Sprintf("5100000000000000%02d", i)
			if got, want := hs.botText(ch), fmt.Sprintf("answer to m%d", i); got != want {
				t.Errorf("channel %s shows %q, want %q", ch, got, want)
			}
		}
		var limited []string
		for _, c := range hs.srv.Calls() {
			if c.Status == http.StatusTooManyRequests {
				limited = append(limited, fmt.Sprintf("%s %s", c.Method, c.Path))
			}
		}
		if len(limited) > 0 {
			t.Errorf("Discord answered %d requests with 429, want none; the first: %s", len(limited), limited[0])
		}
		if n := len(hs.srv.CallsTo(dtk.RouteGetChannel)); n < channels {
			t.Errorf("%d channel lookups, want one per channel (%d): the test no longer exercises them", n, channels)
		}
	})
}
