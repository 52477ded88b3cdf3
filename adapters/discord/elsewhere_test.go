package discord_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/adapterstest"
	"relaybot/adapters/discord"
	dtk "relaybot/internal/testkit/discord"
)

// splitLedger hands one replica the messages and the other the interactions, as the inbound
// ledger does when a shard changed hands between a question and its press.
type splitLedger struct{ interactions bool }

func (l splitLedger) Claim(_ context.Context, _, key string) (bool, error) {
	return strings.HasPrefix(key, "interaction:") == l.interactions, nil
}

// The presses of a question one replica's turn asked reach another replica (it holds the shard
// now): each interaction is acknowledged there with a deferred update within Discord's 3 s (the
// test server refuses a later or second initial response), carried to the asker, and a refusal
// or failure reaches the presser as an ephemeral follow-up; an accepted press needs no word
// there, and the asker edits the question to the decision.
func TestAPressOnAnotherShardHolderIsAcknowledgedAndSettledByTheAsker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		book := &adapterstest.Book{}
		hs := startInBubble(t, func(o *discord.Options) { o.Ledger, o.Questions = splitLedger{}, book }, nil)
		opts := optionsFor(t, hs.srv)
		opts.Ledger, opts.Questions = splitLedger{interactions: true}, book
		other, err := discord.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- other.Run(ctx, &handler{got: make(chan received, 64)}) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run of the other replica: %v", err)
			}
		}()
		hs.waitFor("the other replica's gateway session", func() bool { return hs.srv.LiveShards()[0] == 2 })
		ch := "500000000000000151"
		_, rc := hs.post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, Content: "<@" + hs.srv.BotID() + "> run echo", MentionBot: true})
		asking := ask(hs.ctx, t, rc.out)
		q := hs.question(ch)
		click := func(user string) dtk.Interaction {
			t.Helper()
			in, err := hs.srv.ClickButton(q.ID, q.Buttons[0].CustomID, user, nil)
			if err != nil {
				t.Fatal(err)
			}
			hs.waitFor("the press acknowledged", func() bool { return hs.srv.Acknowledged(in) })
			return in
		}
		followup := func(in dtk.Interaction, want string) {
			t.Helper()
			hs.waitFor("the ephemeral follow-up "+want, func() bool {
				fs := hs.srv.Followups(in)
				return len(fs) == 1 && fs[0].Content == discordPlain(want) && fs[0].Flags&64 != 0
			})
		}

		followup(click("400000000000000009"), "Only the asker may answer.")
		book.Down(true)
		followup(click(userID), adapters.UnrelayedPress)
		book.Down(false)
		in := click(userID)
		select {
		case r := <-asking:
			if r.err != nil || r.ans.UserID != userID || r.ans.Choice != "approve" {
				t.Fatalf("Ask = %+v, %v; want the asker's approval", r.ans, r.err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the asker's approval on the other replica never reached Ask")
		}
		hs.shows(q.ID, "Run echo? approved by user"+userID)
		if fs := hs.srv.Followups(in); len(fs) != 0 {
			t.Errorf("the accepted press got follow-ups %+v, want none", fs)
		}
	})
}

// discordPlain is text as the adapter escapes it for Discord's Markdown.
func discordPlain(text string) string {
	var b strings.Builder
	for _, r := range text {
		if strings.ContainsRune("\\*_~`|>#-[]()<:", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// A toggling press of a question one replica's turn asked, received by another replica: the
// press is acknowledged there with a deferred update and no follow-up, and the asker redraws
// the question's buttons on the same message; nothing new is posted.
func TestARedrawingPressOnAnotherShardHolderRedrawsTheButtonsInPlace(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		book := &adapterstest.Book{}
		hs := startInBubble(t, func(o *discord.Options) { o.Ledger, o.Questions = splitLedger{}, book }, nil)
		opts := optionsFor(t, hs.srv)
		opts.Ledger, opts.Questions = splitLedger{interactions: true}, book
		other, err := discord.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- other.Run(ctx, &handler{got: make(chan received, 64)}) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run of the other replica: %v", err)
			}
		}()
		hs.waitFor("the other replica's gateway session", func() bool { return hs.srv.LiveShards()[0] == 2 })
		ch := "500000000000000152"
		_, rc := hs.post(dtk.UserMessage{ChannelID: ch, GuildID: guildID, Content: "<@" + hs.srv.BotID() + "> pick", MentionBot: true})
		choices := func(tuna string) []adapters.Choice {
			return []adapters.Choice{{ID: "v0", Label: tuna}, {ID: "done", Label: "Done"}}
		}
		marked := false
		asked := make(chan error, 1)
		go func() {
			_, err := rc.out.(adapters.RedrawAsker).AskRedraw(hs.ctx, adapters.Question{Text: "Run echo? Pick", Choices: choices("Tuna")},
				func(a adapters.Answer) adapters.Decision {
					if a.Choice == "done" {
						return adapters.Decision{Accept: true, Text: "Run echo? Picked"}
					}
					marked = !marked
					return adapters.Decision{Redraw: choices(map[bool]string{true: "✓ Tuna", false: "Tuna"}[marked])}
				})
			asked <- err
		}()
		q := hs.question(ch)
		in, err := hs.srv.ClickButton(q.ID, q.Buttons[0].CustomID, userID, nil)
		if err != nil {
			t.Fatal(err)
		}
		hs.waitFor("the toggle acknowledged and the buttons redrawn in place", func() bool {
			m, ok := hs.srv.Message(q.ID)
			return hs.srv.Acknowledged(in) && ok && len(m.Buttons) == 2 && m.Buttons[0].Label == "✓ Tuna"
		})
		if fs := hs.srv.Followups(in); len(fs) != 0 {
			t.Errorf("the toggle got follow-ups %+v, want none", fs)
		}
		if n := len(hs.srv.BotMessages(ch)); n != 1 {
			t.Errorf("%d bot messages in the channel, want the question alone", n)
		}
		if _, err := hs.srv.ClickButton(q.ID, q.Buttons[1].CustomID, userID, nil); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-asked:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Done on the other replica never settled the question")
		}
		hs.shows(q.ID, "Run echo? Picked")
	})
}
