package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"relaybot/audit"
	"relaybot/internal/testkit/wait"
	"relaybot/policy"
	"strings"
	"sync"
	"testing"
	"time"

	"relaybot/config"
	dtk "relaybot/internal/testkit/discord"
	"relaybot/internal/testkit/llm"
	tgkit "relaybot/internal/testkit/telegram"
)

// webChat is a browser of the web chat: it holds the cookie and follows the event stream.
type webChat struct {
	t      *testing.T
	base   string
	client *http.Client
	csrf   string

	mu   sync.Mutex
	msgs map[string]webMsg
	ids  []string
}

type webMsg struct {
	ID       string `json:"id"`
	Role     string `json:"role"`
	Text     string `json:"text"`
	Question string `json:"question"`
	Stop     bool   `json:"stop"`
	Choices  []struct {
		ID, Label string
	} `json:"choices"`
	// Form is an open form's fields.
	Form []struct {
		Name, Kind string
		Options    []struct{ ID, Label string }
		Default    []string `json:"default"`
	} `json:"form"`
	HTML string `json:"html"`
	// Pos orders the messages on the page.
	Pos   int64 `json:"pos"`
	Files []struct {
		Name  string `json:"name"`
		URL   string `json:"url"`
		Audio bool   `json:"audio"`
	} `json:"files"`
}

func openWebChat(t *testing.T, base string) *webChat {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	w := &webChat{t: t, base: base, client: &http.Client{Jar: jar}, msgs: map[string]webMsg{}}
	req, _ := http.NewRequest("POST", base+"/chat/session", nil)
	req.Header.Set("Origin", base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := w.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = w.client.Get(base + "/chat")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf-token" content="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("no chat page (status %d): %.300s", resp.StatusCode, page)
	}
	w.csrf = string(m[1])
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w.stream(ctx)
	return w
}

// stream reads the chat's event stream into w's messages until ctx ends.
func (w *webChat) stream(ctx context.Context) {
	w.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", w.base+"/chat/events", nil)
	resp, err := w.client.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		w.t.Fatalf("GET %s/chat/events: %s", w.base, resp.Status)
	}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "msg":
				var m webMsg
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m) == nil {
					w.mu.Lock()
					if _, ok := w.msgs[m.ID]; !ok {
						w.ids = append(w.ids, m.ID)
					}
					w.msgs[m.ID] = m
					w.mu.Unlock()
				}
			}
		}
	}()
}

func (w *webChat) post(path string, form url.Values) (int, string) {
	w.t.Helper()
	form.Set("csrf", w.csrf)
	resp, err := w.client.PostForm(w.base+path, form)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (w *webChat) say(text string) {
	w.t.Helper()
	// The admin listener (and the page) may be up a moment before the web chat takes messages:
	// it answers 503 "try again in a moment" until then, and the user sends again.
	var code int
	var body string
	wait.For(w.t, "the web chat taking the message", func() bool {
		code, body = w.post("/chat/send", url.Values{"text": {text}})
		return code != http.StatusServiceUnavailable
	})
	if code != http.StatusAccepted {
		w.t.Fatalf("send: %d %s", code, body)
	}
}

// find returns the first message (in order of appearance) that ok accepts.
func (w *webChat) find(ok func(webMsg) bool) (webMsg, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range w.ids {
		if m := w.msgs[id]; ok(m) {
			return m, true
		}
	}
	return webMsg{}, false
}

func (w *webChat) waitMsg(what string, ok func(webMsg) bool) webMsg {
	w.t.Helper()
	var m webMsg
	wait.For(w.t, what, func() bool {
		var found bool
		m, found = w.find(ok)
		return found
	})
	return m
}

func (w *webChat) count(ok func(webMsg) bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, id := range w.ids {
		if ok(w.msgs[id]) {
			n++
		}
	}
	return n
}

// toolModel calls the MCP kit's echo tool for every user message, then reports the tool's
// answer as its reply.
func toolModel(r llm.Request) llm.Reply {
	last := r.Messages[len(r.Messages)-1]
	if last.Role == "tool" {
		return llm.Text("tool said: " + last.Content)
	}
	return llm.ToolCalls(llm.Call{ID: "call_" + strings.ReplaceAll(last.Content, " ", "_"), Name: "echo",
		Args: []string{`{"text":"` + last.Content + `","api_key":"sk-live-abcdef123456"}`}})
}

func startWebBot(t *testing.T, timeoutSec int) (*env, *webChat) {
	t.Helper()
	return startWebBotWith(t, toolModel, timeoutSec, nil)
}

// startWebBotWith runs a bot with the web chat, the kit's echo behind an approval and model
// answering; more, when not nil, adds to the bot's config.toml.
func startWebBotWith(t *testing.T, model func(llm.Request) llm.Reply, timeoutSec int, more func(*tomlConfig)) (*env, *webChat) {
	t.Helper()
	e := newEnv(t)
	c := e.toml().set("admin", webChatAdmin...)
	if more != nil {
		more(c)
	}
	cfg := c.parse(t)
	cfg.Tools.Policy = []policy.Rule{{Tool: "echo", Server: "kit", Action: "ask"}}
	cfg.Tools.ApprovalTimeout = time.Duration(timeoutSec) * time.Second
	e.llm.SetHandler(model)
	e.start(cfg)
	e.waitLog("admin listening")
	m := regexp.MustCompile(`admin listening" addr=(\S+)`).FindStringSubmatch(e.logs.String())
	if m == nil {
		t.Fatalf("no admin address in the logs:\n%s", e.logs.String())
	}
	return e, openWebChat(t, "http://"+m[1])
}

// An "ask" tool in the web chat: the turn posts the tool and its redacted arguments with
// buttons, and runs the tool only once Approve (or Always allow) is pressed; the audit row says
// who decided.
func TestWebChatApprovals(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e, w := startWebBot(t, 300)
	tests := []struct {
		say, press  string
		wantReply   string
		wantDecided audit.Decision
		wantStatus  audit.Status
	}{
		{"first", "approve", "tool said: first", "approved", audit.StatusOK},
		{"second", "deny", "tool said: err: denied by web", "denied", audit.StatusDenied},
		{"third", "always", "tool said: third", "always", audit.StatusOK},
		{"fourth", "", "tool said: fourth", "always", audit.StatusOK}, // not asked again
	}
	for _, tc := range tests {
		w.say(tc.say)
		if tc.press != "" {
			q := w.waitMsg("the question about "+tc.say, func(m webMsg) bool {
				return m.Question != "" && strings.Contains(m.Text, "text: "+tc.say)
			})
			if !strings.Contains(q.Text, "echo (MCP server kit)") || strings.Contains(q.Text, "sk-live") || len(q.Choices) != 3 {
				t.Fatalf("question = %q with %d buttons; want the tool, readable arguments, the key redacted, three buttons", q.Text, len(q.Choices))
			}
			if code, body := w.post("/chat/answer", url.Values{"q": {q.Question}, "choice": {tc.press}}); code != http.StatusNoContent {
				t.Fatalf("press %s: %d %s", tc.press, code, body)
			}
		}
		w.waitMsg("the reply to "+tc.say, func(m webMsg) bool { return m.Role == "bot" && strings.Contains(m.Text, tc.wantReply) })
	}
	if n := w.count(func(m webMsg) bool { return strings.Contains(m.Text, "text: fourth") }); n != 0 {
		t.Fatalf("asked again after 'always allow in this chat'")
	}
	st := e.openStore()
	rows, _, err := st.ToolCalls.ToolCalls(context.Background(), audit.Filter{Tool: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(tests) {
		t.Fatalf("%d audit rows, want %d", len(rows), len(tests))
	}
	for i, tc := range tests {
		r := rows[len(rows)-1-i]
		if !r.ApprovalRequired || r.Decision != tc.wantDecided || r.Approver != "web" || r.DecidedAt.IsZero() || r.Status != tc.wantStatus {
			t.Errorf("row for %q: approval %v, decision %q by %q at %v, status %s; want %s by web, %s",
				tc.say, r.ApprovalRequired, r.Decision, r.Approver, r.DecidedAt, r.Status, tc.wantDecided, tc.wantStatus)
		}
	}
}

// Nobody answers: after tools.approval_timeout_sec the call is denied, the question closes and
// the model hears why.
func TestWebChatApprovalTimesOut(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e, w := startWebBot(t, 1)
	w.say("late")
	w.waitMsg("the reply", func(m webMsg) bool { return strings.Contains(m.Text, "tool said: err: denied by timeout") })
	q := w.waitMsg("the question", func(m webMsg) bool { return strings.Contains(m.Text, "text: late") })
	if q.Question != "" && len(q.Choices) > 0 || !strings.Contains(q.Text, "Closed without an answer") {
		t.Fatalf("question after the timeout = %+v, want it closed without buttons", q)
	}
	if code, _ := w.post("/chat/answer", url.Values{"q": {q.Question}, "choice": {"approve"}}); code == http.StatusNoContent {
		t.Fatalf("a press after the timeout was taken")
	}
	rows, _, err := e.openStore().ToolCalls.ToolCalls(context.Background(), audit.Filter{Tool: "echo"})
	if err != nil || len(rows) != 1 || rows[0].Decision != "timeout" || rows[0].Status != audit.StatusDenied {
		t.Fatalf("audit rows = %+v, %v; want one denied by timeout", rows, err)
	}
}

// The bot stops while a question waits: the call is denied as cancelled, and neither the audit
// row nor the turn is left running.
func TestRestartWhileWaitingForApprovalClosesTheTurnAndTheRow(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	cfg := e.toml().set("chat", "shutdown_grace_sec", 1).set("admin", webChatAdmin...).parse(t)
	cfg.Tools.Policy = []policy.Rule{{Tool: "echo", Action: "ask"}}
	e.llm.SetHandler(toolModel)
	stop := e.start(cfg)
	e.waitLog("admin listening")
	m := regexp.MustCompile(`admin listening" addr=(\S+)`).FindStringSubmatch(e.logs.String())
	w := openWebChat(t, "http://"+m[1])
	w.say("pending")
	w.waitMsg("the question", func(m webMsg) bool { return m.Question != "" && len(m.Choices) == 3 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	st := e.openStore()
	rows, _, err := st.ToolCalls.ToolCalls(context.Background(), audit.Filter{Tool: "echo"})
	if err != nil || len(rows) != 1 {
		t.Fatalf("audit rows = %+v, %v", rows, err)
	}
	if r := rows[0]; r.Status != audit.StatusDenied || r.Decision != "cancelled" || r.FinishedAt.IsZero() {
		t.Fatalf("row after the restart: status %s, decision %q, finished %v; want denied, cancelled, finished", r.Status, r.Decision, r.FinishedAt)
	}
	tr, err := st.Turns.Turn(context.Background(), rows[0].TurnID)
	if err != nil || tr.Status == "running" || tr.FinishedAt.IsZero() {
		t.Fatalf("turn after the restart = %+v, %v; want it finished", tr, err)
	}
}

// pressData returns the callback data of the button labelled label on a bot message.
func pressData(t *testing.T, m tgkit.Message, choice string) string {
	t.Helper()
	var markup struct {
		InlineKeyboard [][]struct {
			Text         string `json:"text"`
			CallbackData string `json:"callback_data"`
		} `json:"inline_keyboard"`
	}
	if err := json.Unmarshal([]byte(m.ReplyMarkup), &markup); err != nil {
		t.Fatalf("reply markup %q: %v", m.ReplyMarkup, err)
	}
	for _, row := range markup.InlineKeyboard {
		for _, b := range row {
			if strings.HasSuffix(b.CallbackData, ":"+choice) {
				return b.CallbackData
			}
		}
	}
	t.Fatalf("no %s button in %s", choice, m.ReplyMarkup)
	return ""
}

// An "ask" tool in a Telegram group: the question comes with an inline keyboard; a bystander's
// press is refused with an alert, a chat admin's approval runs the tool, a bot admin's denial
// reaches the model, and "always allow" is not asked again in that chat.
func TestTelegramApprovals(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	cfg := e.config()
	cfg.Tools.Policy = []policy.Rule{{Tool: "echo", Action: "ask"}}
	e.llm.SetHandler(toolModel)
	e.start(cfg)
	group := tgkit.Chat{ID: -500, Type: "group", Title: "team"}
	e.tg.SetChatAdmin(group.ID, 9)
	question := func(n int) tgkit.Message {
		var q tgkit.Message
		wait.For(t, fmt.Sprintf("question %d", n), func() bool {
			k := 0
			for _, m := range e.tg.BotMessages(group.ID) {
				if strings.Contains(m.Text, "echo (MCP server kit)") {
					k++
					if k == n {
						q = m
						return m.ReplyMarkup != ""
					}
				}
			}
			return false
		})
		return q
	}
	ask := func(text string) {
		e.tg.Send(tgkit.Inbound{Chat: group, From: user(7), Text: "@relay_test_bot " + text})
	}

	ask("first")
	q := question(1)
	id := e.tg.Press(group, user(8), q.ID, pressData(t, q, "approve"))
	wait.For(t, "the bystander's answer", func() bool { _, ok := e.tg.Answer(id); return ok })
	if a, _ := e.tg.Answer(id); !a.ShowAlert || !strings.Contains(a.Text, "You may not answer this") {
		t.Fatalf("bystander was told %+v, want an alert refusing them", a)
	}
	e.tg.Press(group, user(9), q.ID, pressData(t, q, "approve"))
	defer func() {
		if t.Failed() {
			t.Logf("bot texts: %q\nlogs:\n%s", e.botTexts(group.ID), e.logs.String())
		}
	}()
	e.waitBotText(group.ID, "the approved result", contains("tool said: [user7] first"))

	ask("second")
	q = question(2)
	e.tg.Press(group, user(100), q.ID, pressData(t, q, "deny"))
	e.waitBotText(group.ID, "the denial", contains("tool said: err: denied by user100"))

	ask("third")
	q = question(3)
	e.tg.Press(group, user(9), q.ID, pressData(t, q, "always"))
	e.waitBotText(group.ID, "the always-allowed result", contains("tool said: [user7] third"))
	ask("fourth")
	e.waitBotText(group.ID, "the fourth result", contains("tool said: [user7] fourth"))
	// A decided question loses its buttons as soon as the group's budget lets the edit through
	// (the replies of the next turns share it).
	wait.Until(t, "every decided question without buttons", func() error {
		n := 0
		for _, m := range e.tg.BotMessages(group.ID) {
			if strings.Contains(m.Text, "echo (MCP server kit)") {
				n++
				if m.ReplyMarkup != "" {
					return fmt.Errorf("a decided question still has buttons: %q", m.Text)
				}
			}
		}
		if n != 3 {
			return fmt.Errorf("%d questions were asked, want 3 (none after 'always allow')", n)
		}
		return nil
	})
	rows, _, err := e.openStore().ToolCalls.ToolCalls(context.Background(), audit.Filter{Tool: "echo"})
	if err != nil || len(rows) != 4 {
		t.Fatalf("audit rows = %d, %v", len(rows), err)
	}
	want := []struct {
		decision     audit.Decision
		approver, id string
	}{{"approved", "user9", "9"}, {"denied", "user100", "100"}, {"always", "user9", "9"}, {"always", "user9", "9"}}
	for i, w := range want {
		if r := rows[len(rows)-1-i]; r.Decision != w.decision || r.Approver != w.approver || r.ApproverID != w.id || !r.ApprovalRequired {
			t.Errorf("row %d: decision %q by %q (%q), want %s by %s (%s)", i, r.Decision, r.Approver, r.ApproverID, w.decision, w.approver, w.id)
		}
	}
}

// An "ask" tool in a Discord channel: the question has buttons; a bystander's press gets an
// answer only they see, a bot admin's approval runs the tool, a denial reaches the model, and
// "always allow" is not asked again in that channel.
func TestDiscordApprovals(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	e.llm.SetHandler(toolModel)
	dc := startDiscordBot(t, e, func(cfg *config.Config) {
		cfg.Tools.Policy = []policy.Rule{{Tool: "echo", Action: "ask"}}
	})
	const guild, channel, asker, bystander, admin = "900000000000000001", "800000000000000001", "600", "601", "700"
	ask := func(text string) {
		if _, err := dc.Post(dtk.UserMessage{ChannelID: channel, GuildID: guild, AuthorID: asker, MentionBot: true,
			Content: "<@100000000000000001> " + text}); err != nil {
			t.Fatal(err)
		}
	}
	questions := func() []dtk.Message {
		var qs []dtk.Message
		for _, m := range dc.BotMessages(channel) {
			if strings.Contains(m.Content, `echo \(MCP server kit\)`) {
				qs = append(qs, m)
			}
		}
		return qs
	}
	question := func(n int) dtk.Message {
		var q dtk.Message
		wait.For(t, fmt.Sprintf("question %d", n), func() bool {
			qs := questions()
			if len(qs) < n || len(qs[n-1].Buttons) != 4 { // approve, deny, always for the asker, always for everyone; the text is escaped Markdown
				return false
			}
			q = qs[n-1]
			return true
		})
		return q
	}
	button := func(q dtk.Message, choice string) string { return discordButton(t, q, ":"+choice) }
	waitReply := func(what string) {
		wait.For(t, what, func() bool {
			for _, m := range dc.BotMessages(channel) {
				if strings.Contains(m.Content, what) {
					return true
				}
			}
			return false
		})
	}

	ask("first")
	q := question(1)
	it, err := dc.ClickButton(q.ID, button(q, "approve"), bystander, nil)
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the bystander's private answer", func() bool {
		m, ok := dc.InteractionResponse(it)
		return ok && strings.Contains(m.Content, "You may not answer this")
	})
	if _, err := dc.ClickButton(q.ID, button(q, "approve"), admin, nil); err != nil {
		t.Fatal(err)
	}
	waitReply("first")
	waitReply("tool said:")

	ask("second")
	q = question(2)
	if _, err := dc.ClickButton(q.ID, button(q, "deny"), admin, nil); err != nil {
		t.Fatal(err)
	}
	waitReply("tool said: err: denied by user700")

	ask("third")
	q = question(3)
	if _, err := dc.ClickButton(q.ID, button(q, "always"), admin, nil); err != nil {
		t.Fatal(err)
	}
	ask("fourth")
	wait.For(t, "four audit rows finished", func() bool {
		rows, _, err := e.openStore().ToolCalls.ToolCalls(context.Background(), audit.Filter{Tool: "echo"})
		return err == nil && len(rows) == 4 && !rows[0].FinishedAt.IsZero()
	})
	qs := questions()
	if len(qs) != 3 {
		t.Fatalf("%d questions asked, want 3 (none after 'always allow')", len(qs))
	}
	for _, q := range qs {
		if len(q.Buttons) != 0 {
			t.Errorf("a decided question still has buttons: %q", q.Content)
		}
	}
	rows, _, _ := e.openStore().ToolCalls.ToolCalls(context.Background(), audit.Filter{Tool: "echo"})
	want := []audit.Decision{"approved", "denied", "always", "always"}
	for i, w := range want {
		if r := rows[len(rows)-1-i]; r.Decision != w || r.Approver != "user700" {
			t.Errorf("row %d: decision %q by %q, want %s by user700", i, r.Decision, r.Approver, w)
		}
	}
}

// A policy naming chat_admins lets a Telegram group's administrators use a tool the others may
// not: the adapter asks getChatMember about the sender.
func TestTelegramChatAdminsRole(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	cfg := e.config()
	cfg.Tools.Policy = []policy.Rule{
		{Tool: "echo", Action: "deny"},
		{Tool: "echo", Roles: []string{"chat_admins"}, Action: "allow"},
	}
	e.llm.SetHandler(toolModel)
	e.start(cfg)
	group := tgkit.Chat{ID: -600, Type: "supergroup", Title: "team"}
	e.tg.SetChatAdmin(group.ID, 9)
	e.tg.Send(tgkit.Inbound{Chat: group, From: user(9), Text: "@relay_test_bot by admin"})
	e.waitBotText(group.ID, "the admin's result", contains("tool said: [user9] by admin"))
	e.tg.Send(tgkit.Inbound{Chat: group, From: user(7), Text: "@relay_test_bot by member"})
	e.waitBotText(group.ID, "the member's denial", contains("tool said: err: tool echo is denied by tools.policy[0]"))
}

// startDiscordBot starts the bot on a fake Discord (config edited by edit, when not nil) and
// waits until its gateway is ready.
func startDiscordBot(t *testing.T, e *env, edit func(*config.Config)) *dtk.Server {
	t.Helper()
	dc := dtk.New(dtk.Config{})
	t.Cleanup(dc.Close)
	e.discord = []any{"enabled", true, "token", dc.Token(), "api_base", dc.APIBase()}
	cfg := e.config()
	if edit != nil {
		edit(cfg)
	}
	e.start(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := dc.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return dc
}

// discordButton returns the custom_id of the button of m whose custom_id ends with suffix.
func discordButton(t *testing.T, m dtk.Message, suffix string) string {
	t.Helper()
	for _, b := range m.Buttons {
		if strings.HasSuffix(b.CustomID, suffix) {
			return b.CustomID
		}
	}
	t.Fatalf("no %s button on %+v", suffix, m.Buttons)
	return ""
}
