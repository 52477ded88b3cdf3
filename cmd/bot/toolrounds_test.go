package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"relaybot/audit"
	dtk "relaybot/internal/testkit/discord"
	"relaybot/internal/testkit/llm"
	mcpkit "relaybot/internal/testkit/mcp"
	tgkit "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
)

// roundModel runs the kit's talking tools by what the user says: "progress" reports progress
// and waits a minute, "ask FORM" asks an elicitation question, "three" reads three times at
// once; the tools' answers come back as "tool said: …".
func roundModel(r llm.Request) llm.Reply {
	last := r.Messages[len(r.Messages)-1]
	if last.Role == "tool" {
		return llm.Text("tool said: " + last.Content)
	}
	text := last.Content
	if i := strings.LastIndex(text, "] "); i >= 0 { // a group's "[user7] " prefix
		text = text[i+2:]
	}
	text = strings.TrimSpace(strings.TrimPrefix(text, "@relay_test_bot"))
	switch {
	case text == "progress":
		return llm.ToolCalls(llm.Call{ID: "p1", Name: "progress", Args: []string{`{"steps":4,"seconds":60}`}})
	case text == "research":
		return llm.ToolCalls(llm.Call{ID: "t1", Name: "research", Args: []string{`{"steps":3,"seconds":600}`}})
	case text == "quick research":
		return llm.ToolCalls(llm.Call{ID: "t0", Name: "research", Args: []string{`{"steps":2,"seconds":0}`}})
	case strings.HasPrefix(text, "ask "):
		return llm.ToolCalls(llm.Call{ID: "q_" + strings.TrimPrefix(text, "ask "), Name: "ask",
			Args: []string{fmt.Sprintf(`{"form":%q}`, strings.TrimPrefix(text, "ask "))}})
	case text == "three":
		a := []string{`{"seconds":0.5}`}
		return llm.ToolCalls(llm.Call{ID: "r1", Name: "read_sleep", Args: a}, llm.Call{ID: "r2", Name: "read_sleep", Args: a},
			llm.Call{ID: "r3", Name: "read_sleep", Args: a})
	case text == "mixed":
		a := []string{`{"seconds":0.5}`}
		return llm.ToolCalls(llm.Call{ID: "m1", Name: "read_sleep", Args: a}, llm.Call{ID: "m2", Name: "sleep", Args: a},
			llm.Call{ID: "m3", Name: "read_sleep", Args: a})
	}
	return llm.Text("?")
}

// On Telegram: the server's progress shows in the tool's status line while it runs, /stop
// cancels the call at the server, and the audit row says cancelled with the last message.
func TestTelegramProgressAndStopAtTheServer(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	e.llm.SetHandler(roundModel)
	e.start(e.config())
	e.say(7, "progress")
	e.waitBotText(7, "the progress in the status line", contains("⏳ progress 100% — step 4 of 4"))
	e.say(7, "/stop")
	wait.For(t, "the server to be told the call was cancelled", func() bool { return e.kit.CancelNotices() >= 1 })
	wait.For(t, "the audit row", func() bool {
		rows, _, err := e.openStore().ToolCalls.ToolCalls(context.Background(), audit.Filter{Tool: "progress"})
		return err == nil && len(rows) == 1 && rows[0].Status == audit.StatusCancelled && rows[0].Progress == "step 4 of 4"
	})
}

// On Telegram: a tool that runs as an MCP task shows its progress in the status line while the
// bot polls it, past the server's call timeout; /stop cancels the task on the server
// (tasks/cancel), and the audit row says cancelled with the last message.
func TestTelegramTaskProgressAndStop(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	e.llm.SetHandler(roundModel)
	e.start(e.toml().set("mcp.servers", "tool_call_timeout_sec", 1, "task_timeout_sec", 3600).parse(t))
	e.say(7, "research")
	e.waitBotText(7, "the task's progress in the status line", contains("⏳ research 100% — step 3 of 3"))
	e.say(7, "/stop")
	wait.For(t, "the server's task to be cancelled", func() bool { return e.kit.Cancelled() == 1 })
	wait.For(t, "the audit row", func() bool {
		rows, _, err := e.openStore().ToolCalls.ToolCalls(context.Background(), audit.Filter{Tool: "research"})
		return err == nil && len(rows) == 1 && rows[0].Status == audit.StatusCancelled && rows[0].Progress == "step 3 of 3"
	})
}

// On Telegram, with a server of 2026-07-28 that makes the call a task (the tasks extension,
// io.modelcontextprotocol/tasks): a short task's result is the answer of the same round; a long
// one shows each step the server reports in the status line while the bot polls, and /stop
// cancels it on the server (tasks/cancel), the audit row saying cancelled with the last message.
// (That a task outlives the call timeout is tested on the bubble's clock in tools/mcp.)
func TestTelegramExtensionTaskProgressAndStop(t *testing.T) {
	e := newEnv(t)
	kit := mcpkit.New("kit") // 2026-07-28, unlike the env's
	srv := mcpkit.StartHTTP(t, kit)
	e.llm.SetHandler(roundModel)
	e.start(e.toml().set("mcp.servers", "url", srv.URL, "task_timeout_sec", 3600).parse(t))
	e.say(7, "quick research")
	e.waitBotText(7, "the task's result in the answer", contains("tool said: researched"))
	e.say(7, "research")
	e.waitBotText(7, "the task's last step in the status line", contains("⏳ research — researching"))
	e.say(7, "/stop")
	wait.For(t, "the server's task to be cancelled", func() bool { return kit.Cancelled() == 1 })
	wait.For(t, "the audit row", func() bool {
		rows, _, err := e.openStore().ToolCalls.ToolCalls(context.Background(), audit.Filter{Tool: "research"})
		if err != nil || len(rows) != 2 {
			return false
		}
		got := map[audit.Status]string{rows[0].Status: rows[0].Progress, rows[1].Status: rows[1].Progress}
		p, ok := got[audit.StatusCancelled]
		_, done := got[audit.StatusOK]
		return ok && p == "researching" && done
	})
}

// On Telegram: a tool's enum and boolean are asked with inline keyboards (a bystander's press
// is refused with an alert), text and numbers with a reply prompt, a link as a url button the
// bot never opens. The audit rows keep who answered.
func TestTelegramToolQuestions(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	e.llm.SetHandler(roundModel)
	e.start(e.config())
	group := tgkit.Chat{ID: -700, Type: "group", Title: "team"}
	question := func(chat int64, sub string) tgkit.Message {
		var q tgkit.Message
		wait.For(t, "the question "+sub, func() bool {
			for _, m := range e.tg.BotMessages(chat) {
				if strings.Contains(m.Text, sub) && m.ReplyMarkup != "" {
					q = m
					return true
				}
			}
			return false
		})
		return q
	}

	e.tg.Send(tgkit.Inbound{Chat: group, From: user(7), Text: "@relay_test_bot ask choice"})
	q := question(group.ID, "Colour")
	id := e.tg.Press(group, user(8), q.ID, pressData(t, q, "v1"))
	wait.For(t, "the bystander's answer", func() bool { _, ok := e.tg.Answer(id); return ok })
	if a, _ := e.tg.Answer(id); !a.ShowAlert || !strings.Contains(a.Text, "You may not answer this") {
		t.Fatalf("bystander was told %+v, want an alert refusing them", a)
	}
	e.tg.Press(group, user(7), q.ID, pressData(t, q, "v1"))
	q = question(group.ID, "Sure?")
	e.tg.Press(group, user(7), q.ID, pressData(t, q, "yes"))
	e.waitBotText(group.ID, "the accepted answer", contains(`tool said: accept {"color":"green","confirm":true}`))

	e.say(7, "ask text")
	e.waitBotText(7, "the age prompt", contains("age (a whole number)"))
	e.say(7, "33")
	e.waitBotText(7, "the name prompt", contains("Name (required)"))
	e.say(7, "Ann")
	e.waitBotText(7, "the typed answer", contains(`tool said: accept {"age":33,"name":"Ann"}`))

	e.say(7, "ask url")
	q = question(7, "Sign in to the library")
	if !strings.Contains(q.ReplyMarkup, `"url":"https://library.example/login?state=abc"`) {
		t.Fatalf("the URL question's keyboard %s has no link button", q.ReplyMarkup)
	}
	e.tg.Press(private(7), user(7), q.ID, pressData(t, q, "done"))
	e.waitBotText(7, "the URL answer", contains("tool said: accept null"))

	rows, _, err := e.openStore().ToolCalls.ToolCalls(context.Background(), audit.Filter{Tool: "ask"})
	if err != nil || len(rows) != 3 {
		t.Fatalf("audit rows %d, %v", len(rows), err)
	}
	for _, r := range rows {
		if !strings.Contains(r.Elicitation, `"by":"user7"`) || !strings.Contains(r.Elicitation, `"action":"accept"`) {
			t.Fatalf("audit row %s keeps %q, want user7's accept", r.ToolCallID, r.Elicitation)
		}
	}
}

// On Telegram: a question nobody answers within tools.elicitation_timeout_sec is answered
// cancel to the server, its buttons go away, and the audit row says it timed out.
func TestTelegramToolQuestionTimesOut(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	e.llm.SetHandler(roundModel)
	cfg := e.config()
	cfg.Tools.ElicitationTimeout = time.Second
	e.start(cfg)
	e.say(7, "ask choice")
	e.waitBotText(7, "the question timing out", contains("tool said: cancel null"))
	e.waitBotText(7, "the closed question", contains("Closed without an answer"))
	rows, _, err := e.openStore().ToolCalls.ToolCalls(context.Background(), audit.Filter{Tool: "ask"})
	if err != nil || len(rows) != 1 || !strings.Contains(rows[0].Elicitation, `"note":"timeout"`) {
		t.Fatalf("audit rows %+v, %v; want one whose question timed out", rows, err)
	}
}

// On Discord: a tool's enum is asked with buttons; a bystander's press gets an answer only they
// see; the asker's answers reach the server.
func TestDiscordToolQuestion(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	e.llm.SetHandler(roundModel)
	dc := startDiscordBot(t, e, nil)
	const guild, channel, asker, bystander = "900000000000000001", "800000000000000001", "600", "601"
	if _, err := dc.Post(dtk.UserMessage{ChannelID: channel, GuildID: guild, AuthorID: asker, MentionBot: true,
		Content: "<@100000000000000001> ask choice"}); err != nil {
		t.Fatal(err)
	}
	question := func(sub string) dtk.Message {
		var q dtk.Message
		wait.For(t, "the question "+sub, func() bool {
			for _, m := range dc.BotMessages(channel) {
				if strings.Contains(m.Content, sub) && len(m.Buttons) > 0 {
					q = m
					return true
				}
			}
			return false
		})
		return q
	}
	button := func(q dtk.Message, choice string) string { return discordButton(t, q, ":"+choice) }
	q := question("Colour")
	it, err := dc.ClickButton(q.ID, button(q, "v2"), bystander, nil)
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the bystander's private answer", func() bool {
		m, ok := dc.InteractionResponse(it)
		return ok && strings.Contains(m.Content, "You may not answer this")
	})
	if _, err := dc.ClickButton(q.ID, button(q, "v2"), asker, nil); err != nil {
		t.Fatal(err)
	}
	q = question("Sure?")
	if _, err := dc.ClickButton(q.ID, button(q, "no"), asker, nil); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the answer to reach the server", func() bool {
		for _, m := range dc.BotMessages(channel) {
			if strings.Contains(m.Content, `tool said: accept {"color":"blue","confirm":false}`) {
				return true
			}
		}
		return false
	})
}

// In the web chat: a tool's question is one form answered from the page (the enum and the boolean
// in one submission), and a round of three read-only calls runs side by side (their audit rows
// overlap, in the model's order) while a round with an unannotated call runs one call after another.
func TestWebChatToolQuestionAndParallelRound(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e, w := startWebBot(t, 300)
	e.llm.SetHandler(roundModel)
	w.say("ask choice")
	// The web chat asks the whole form at once: the enum and the boolean are one submission.
	q := w.waitMsg("the form", func(m webMsg) bool { return m.Question != "" && len(m.Form) == 2 })
	if q.Form[0].Name != "color" || q.Form[0].Kind != "enum" || len(q.Form[0].Options) != 3 || q.Form[1].Kind != "boolean" {
		t.Fatalf("form fields %+v, want the colour's options and a boolean", q.Form)
	}
	if code, body := w.post("/chat/answer", url.Values{"q": {q.Question}, "choice": {"submit"}, "v.color": {"red"}, "v.confirm": {"yes"}}); code != http.StatusNoContent {
		t.Fatalf("submit the form: %d %s", code, body)
	}
	w.waitMsg("the answer", func(m webMsg) bool {
		return m.Role == "bot" && strings.Contains(m.Text, `tool said: accept {"color":"red","confirm":true}`)
	})

	w.say("three")
	w.waitMsg("the round's answer", func(m webMsg) bool { return m.Role == "bot" && strings.Contains(m.Text, "tool said: slept") })
	w.say("mixed")
	w.waitMsg("the mixed round's answer", func(m webMsg) bool {
		return m.Role == "bot" && strings.Count(m.Text, "tool said: slept") == 1 && strings.Contains(m.Text, "sleep")
	})
	var rows []audit.Record
	wait.For(t, "six finished audit rows", func() bool {
		all, _, err := e.openStore().ToolCalls.ToolCalls(context.Background(), audit.Filter{})
		rows = rows[:0]
		for _, r := range all {
			if r.ToolName == "read_sleep" || r.ToolName == "sleep" {
				rows = append([]audit.Record{r}, rows...) // oldest first
			}
		}
		return err == nil && len(rows) == 6 && !rows[5].FinishedAt.IsZero()
	})
	for i, id := range []string{"r1", "r2", "r3", "m1", "m2", "m3"} {
		if rows[i].ToolCallID != id {
			t.Fatalf("audit row %d is %s, want %s: rows keep the model's order", i, rows[i].ToolCallID, id)
		}
	}
	overlap := func(a, b audit.Record) bool {
		return a.StartedAt.Before(b.FinishedAt) && b.StartedAt.Before(a.FinishedAt)
	}
	if !overlap(rows[0], rows[1]) || !overlap(rows[1], rows[2]) {
		t.Fatalf("the read-only round did not overlap: %v", rows[:3])
	}
	if overlap(rows[3], rows[4]) || overlap(rows[4], rows[5]) {
		t.Fatalf("the round with an unannotated call overlapped: %v", rows[3:])
	}
}

// On Discord: the progress shows in the streaming reply's status line, and its Stop button
// cancels the call at the server.
func TestDiscordProgressAndStopButton(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	e.llm.SetHandler(roundModel)
	dc := startDiscordBot(t, e, nil)
	const guild, channel, asker = "900000000000000001", "800000000000000001", "600"
	if _, err := dc.Post(dtk.UserMessage{ChannelID: channel, GuildID: guild, AuthorID: asker, MentionBot: true,
		Content: "<@100000000000000001> progress"}); err != nil {
		t.Fatal(err)
	}
	var reply dtk.Message
	wait.For(t, "the progress in the status line", func() bool {
		for _, m := range dc.BotMessages(channel) {
			if strings.Contains(m.Content, "⏳ progress 100% — step 4 of 4") && len(m.Buttons) > 0 {
				reply = m
				return true
			}
		}
		return false
	})
	if _, err := dc.ClickButton(reply.ID, discordButton(t, reply, "stop"), asker, nil); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the server to be told the call was cancelled", func() bool { return e.kit.CancelNotices() >= 1 })
}
