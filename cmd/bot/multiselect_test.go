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

// On Telegram: a tool's multi-select is a keyboard of options that toggle (✓ marks the chosen,
// the default ticked at first) and Done; Done with nothing chosen is refused with an alert
// (the form wants one at least); the chosen options reach the server as a list.
func TestTelegramMultiSelectTogglesThenDone(t *testing.T) {
	e := newEnv(t)
	e.llm.SetHandler(roundModel)
	e.start(e.config())
	pressed := map[int]bool{} // keyboards pressed already: each toggle posts a new one
	keyboard := func(labels ...string) tgkit.Message {
		var q tgkit.Message
		wait.For(t, "a keyboard "+strings.Join(labels, ", "), func() bool {
			for _, m := range e.tg.BotMessages(7) {
				if !pressed[m.ID] && strings.Contains(m.Text, "Fish") && slices.Equal(keyLabels(t, m), labels) {
					q = m
					return true
				}
			}
			return false
		})
		return q
	}
	press := func(q tgkit.Message, choice string) string {
		pressed[q.ID] = true
		return e.tg.Press(private(7), user(7), q.ID, pressData(t, q, choice))
	}
	e.say(7, "ask multi")
	q := keyboard("✓ Tuna", "Salmon", "Trout", "Done", "Decline") // the default ticked
	press(q, "v1")
	q = keyboard("✓ Tuna", "✓ Salmon", "Trout", "Done", "Decline")
	press(q, "v0")
	q = keyboard("Tuna", "✓ Salmon", "Trout", "Done", "Decline")
	press(q, "v1")
	q = keyboard("Tuna", "Salmon", "Trout", "Done", "Decline")
	delete(pressed, q.ID) // Done is refused: the same keyboard stays
	id := press(q, "done")
	wait.For(t, "Done with nothing chosen to be answered", func() bool { _, ok := e.tg.Answer(id); return ok })
	if a, _ := e.tg.Answer(id); !strings.Contains(a.Text, "at least 1") {
		t.Fatalf("Done with nothing chosen was answered %+v; want it refused saying one is needed", a)
	}
	press(q, "v2")
	q = keyboard("Tuna", "Salmon", "✓ Trout", "Done", "Decline")
	press(q, "done")
	e.waitBotText(7, "the list at the server", contains(`tool said: accept {"fish":["f3"]}`))
}

// On Discord: the same multi-select with buttons that toggle and Done.
func TestDiscordMultiSelectTogglesThenDone(t *testing.T) {
	e := newEnv(t)
	e.llm.SetHandler(roundModel)
	dc := startDiscordBot(t, e, nil)
	const guild, channel, asker = "900000000000000001", "800000000000000001", "600"
	if _, err := dc.Post(dtk.UserMessage{ChannelID: channel, GuildID: guild, AuthorID: asker, MentionBot: true,
		Content: "<@100000000000000001> ask multi"}); err != nil {
		t.Fatal(err)
	}
	buttons := func(labels ...string) dtk.Message {
		var q dtk.Message
		wait.For(t, "buttons "+strings.Join(labels, ", "), func() bool {
			for _, m := range dc.BotMessages(channel) {
				var got []string
				for _, b := range m.Buttons {
					got = append(got, b.Label)
				}
				if strings.Contains(m.Content, "Fish") && slices.Equal(got, labels) {
					q = m
					return true
				}
			}
			return false
		})
		return q
	}
	click := func(q dtk.Message, choice string) {
		if _, err := dc.ClickButton(q.ID, discordButton(t, q, ":"+choice), asker, nil); err != nil {
			t.Fatal(err)
		}
	}
	q := buttons("✓ Tuna", "Salmon", "Trout", "Done", "Decline")
	click(q, "v2")
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
