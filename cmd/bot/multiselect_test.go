package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"relaybot/audit"
	dtk "relaybot/internal/testkit/discord"
	tgkit "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
)

// On Telegram: a tool's multi-select is one message whose keyboard toggles in place (✓ marks
// the chosen, the default ticked at first; each press answered and the keyboard edited with
// editMessageReplyMarkup, never a new message) and Done; Done with nothing chosen is refused
// with an alert (the form wants one at least); the chosen options reach the server as a list
// and the message then says what was chosen, without its keyboard.
func TestTelegramMultiSelectTogglesInPlaceThenDone(t *testing.T) {
	e := newEnv(t)
	e.llm.SetHandler(roundModel)
	e.start(e.config())
	questions := func() []tgkit.Message {
		var out []tgkit.Message
		for _, m := range e.tg.BotMessages(7) {
			if strings.Contains(m.Text, "Fish") {
				out = append(out, m)
			}
		}
		return out
	}
	keyboard := func(labels ...string) tgkit.Message {
		var q tgkit.Message
		wait.For(t, "the question's keyboard "+strings.Join(labels, ", "), func() bool {
			qs := questions()
			if len(qs) == 1 && slices.Equal(keyLabels(t, qs[0]), labels) {
				q = qs[0]
				return true
			}
			return false
		})
		return q
	}
	press := func(q tgkit.Message, choice string) {
		id := e.tg.Press(private(7), user(7), q.ID, pressData(t, q, choice))
		wait.For(t, "the press of "+choice+" answered", func() bool { _, ok := e.tg.Answer(id); return ok })
		if a, _ := e.tg.Answer(id); a.ShowAlert {
			t.Fatalf("the press of %s was answered with an alert %q", choice, a.Text)
		}
	}
	e.say(7, "ask multi")
	first := keyboard("✓ Tuna", "Salmon", "Trout", "Done", "Decline") // the default ticked
	press(first, "v1")
	q := keyboard("✓ Tuna", "✓ Salmon", "Trout", "Done", "Decline")
	press(q, "v0")
	q = keyboard("Tuna", "✓ Salmon", "Trout", "Done", "Decline")
	press(q, "v1")
	q = keyboard("Tuna", "Salmon", "Trout", "Done", "Decline")
	id := e.tg.Press(private(7), user(7), q.ID, pressData(t, q, "done"))
	wait.For(t, "Done with nothing chosen to be answered", func() bool { _, ok := e.tg.Answer(id); return ok })
	if a, _ := e.tg.Answer(id); !strings.Contains(a.Text, "at least 1") || !a.ShowAlert {
		t.Fatalf("Done with nothing chosen was answered %+v; want it refused saying one is needed", a)
	}
	press(q, "v2")
	q = keyboard("Tuna", "Salmon", "✓ Trout", "Done", "Decline")
	if q.ID != first.ID || q.Edits != 4 {
		t.Fatalf("the keyboard is on message %d after %d edits; want message %d edited 4 times in place", q.ID, q.Edits, first.ID)
	}
	press(q, "done")
	e.waitBotText(7, "the list at the server", contains(`tool said: accept {"fish":["f3"]}`))
	qs := questions()
	if len(qs) != 1 || !strings.Contains(qs[0].Text, "Chosen: Trout") || qs[0].ReplyMarkup != "" {
		t.Fatalf("the question's messages are %+v; want one saying Trout was chosen, without a keyboard", qs)
	}
}

// On Discord: the same multi-select, each toggle answered with an UPDATE_MESSAGE that redraws
// the one message's buttons, and Done.
func TestDiscordMultiSelectTogglesInPlaceThenDone(t *testing.T) {
	e := newEnv(t)
	e.llm.SetHandler(roundModel)
	dc := startDiscordBot(t, e, nil)
	const guild, channel, asker = "900000000000000001", "800000000000000001", "600"
	if _, err := dc.Post(dtk.UserMessage{ChannelID: channel, GuildID: guild, AuthorID: asker, MentionBot: true,
		Content: "<@100000000000000001> ask multi"}); err != nil {
		t.Fatal(err)
	}
	questions := func() []dtk.Message {
		var out []dtk.Message
		for _, m := range dc.BotMessages(channel) {
			if strings.Contains(m.Content, "Fish") {
				out = append(out, m)
			}
		}
		return out
	}
	buttons := func(labels ...string) dtk.Message {
		var q dtk.Message
		wait.For(t, "the question's buttons "+strings.Join(labels, ", "), func() bool {
			qs := questions()
			if len(qs) != 1 {
				return false
			}
			var got []string
			for _, b := range qs[0].Buttons {
				got = append(got, b.Label)
			}
			q = qs[0]
			return slices.Equal(got, labels)
		})
		return q
	}
	click := func(q dtk.Message, choice string) {
		if _, err := dc.ClickButton(q.ID, discordButton(t, q, ":"+choice), asker, nil); err != nil {
			t.Fatal(err)
		}
	}
	first := buttons("✓ Tuna", "Salmon", "Trout", "Done", "Decline")
	click(first, "v2")
	q := buttons("✓ Tuna", "Salmon", "✓ Trout", "Done", "Decline")
	click(q, "v0")
	q = buttons("Tuna", "Salmon", "✓ Trout", "Done", "Decline")
	if q.ID != first.ID || q.Edits != 2 {
		t.Fatalf("the buttons are on message %s after %d edits; want message %s edited twice in place", q.ID, q.Edits, first.ID)
	}
	click(q, "v0")
	q = buttons("✓ Tuna", "Salmon", "✓ Trout", "Done", "Decline")
	click(q, "done")
	wait.For(t, "the list at the server", func() bool {
		for _, m := range dc.BotMessages(channel) {
			if strings.Contains(m.Content, `tool said: accept {"fish":["f1","f3"]}`) {
				return true
			}
		}
		return false
	})
	if qs := questions(); len(qs) != 1 || !strings.Contains(qs[0].Content, `Chosen\: Tuna, Trout \(user600\)`) || len(qs[0].Buttons) != 0 {
		t.Fatalf("the question's messages are %+v; want one saying Tuna and Trout were chosen, without buttons", qs)
	}
}

// A form the bot cannot show (a nested object, which the spec forbids) is told to the user in
// the chat and answered decline; the audit row keeps why.
func TestAnUnshowableFormIsDeclinedAloud(t *testing.T) {
	e := newEnv(t)
	e.llm.SetHandler(roundModel)
	e.start(e.config())
	e.say(7, "ask nested")
	e.waitBotText(7, "the chat told", contains("cannot show this form"))
	e.waitBotText(7, "the decline at the server", contains("tool said: decline null"))
	rows, _, err := e.openStore().ToolCalls.ToolCalls(context.Background(), audit.Filter{Tool: "ask"})
	if err != nil || len(rows) != 1 || !strings.Contains(rows[0].Elicitation, `"action":"decline"`) ||
		!strings.Contains(rows[0].Elicitation, "nested object") {
		t.Fatalf("audit rows %+v, %v; want one declined saying the form has a nested object", rows, err)
	}
}

// keyLabels are the texts of a Telegram message's inline keyboard, row by row.
func keyLabels(t *testing.T, m tgkit.Message) []string {
	t.Helper()
	if m.ReplyMarkup == "" {
		return nil
	}
	var markup struct {
		InlineKeyboard [][]struct {
			Text string `json:"text"`
		} `json:"inline_keyboard"`
	}
	if err := json.Unmarshal([]byte(m.ReplyMarkup), &markup); err != nil {
		t.Fatalf("reply markup %q: %v", m.ReplyMarkup, err)
	}
	var out []string
	for _, row := range markup.InlineKeyboard {
		for _, b := range row {
			out = append(out, b.Text)
		}
	}
	return out
}
