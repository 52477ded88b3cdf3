package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"relaybot/adapters/discord"
	"relaybot/audit"
	"relaybot/config"
	dtk "relaybot/internal/testkit/discord"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/logbuf"
	mcpkit "relaybot/internal/testkit/mcp"
	tgkit "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
	"relaybot/store"
)

// env is a bot under test with its fake world: a Telegram Bot API server, an OpenAI-compatible
// model and an MCP server over streamable HTTP.
type env struct {
	t    *testing.T
	tg   *tgkit.Server
	llm  *llm.Server
	kit  *mcpkit.Kit
	mcp  *mcpkit.HTTPServer
	db   string
	logs *logbuf.Buffer
	// discord, when set, are the keys of a [discord] section that replaces Telegram.
	discord []any
}

func newEnv(t *testing.T) *env {
	t.Helper()
	tg, err := tgkit.New(tgkit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Close)
	model := llm.NewServer()
	t.Cleanup(model.Close)
	kit := mcpkit.New("kit")
	// A 2025-11-25 server: the kit's "ask" tool sends its question as a server request, which a
	// 2026-07-28 session does not carry (decision 056).
	kit.Legacy()
	e := &env{
		t: t, tg: tg, llm: model, kit: kit, mcp: mcpkit.StartHTTP(t, kit),
		db: filepath.Join(t.TempDir(), "bot.db"), logs: &logbuf.Buffer{},
	}
	// A failed test shows what the bot logged: on a busy CI machine that is the only trace.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the bot's log:\n%s", e.logs.String())
		}
	})
	return e
}

// toml is the bot's config.toml for this world: Telegram (or e.discord in its place), the
// model, the MCP server, and the admin listener off.
func (e *env) toml() *tomlConfig {
	c := (&tomlConfig{}).
		set("storage", "dsn", e.db).
		set("models", "name", "primary", "base_url", e.llm.URL, "model", "test-model").
		set("agent", "system_prompt", "You are a test bot.", "stream_flush_chunks", 1).
		set("output", "track_function_calls", true).
		set("access", "deny_users", []string{"telegram:666"}, "admins", []string{"telegram:100", "discord:700"}).
		set("tools", "plugins", []string{}, "native", []string{"current_time"}).
		// These tests watch answers stream by edits; drafts and rich finals have tests of their own.
		set("telegram", "enabled", e.discord == nil, "token", e.tg.Token(), "api_endpoint", e.tg.Endpoint(), "drafts", "off", "rich", "off")
	if e.discord != nil {
		c.set("discord", e.discord...)
	}
	return c.set("mcp.servers", "name", "kit", "transport", "http", "url", e.mcp.URL, "local", true).set("admin", "enabled", false)
}

// config is toml's config with the keys of [chat] given, as pairs.
func (e *env) config(chat ...any) *config.Config {
	e.t.Helper()
	return e.toml().set("chat", chat...).parse(e.t)
}

// start runs serve until the returned stop is called (as SIGTERM would) and returns serve's
// result.
func (e *env) start(cfg *config.Config) (stop func() error) {
	e.t.Helper()
	return e.startHurry(cfg, nil)
}

// startHurry is start with a channel standing for the second SIGTERM.
func (e *env) startHurry(cfg *config.Config, hurry <-chan os.Signal) (stop func() error) {
	e.t.Helper()
	return e.startSignals(cfg, hurry, nil)
}

// startSignals is startHurry with a channel standing for SIGHUP (a reload of cfg.File).
func (e *env) startSignals(cfg *config.Config, hurry, hup <-chan os.Signal) (stop func() error) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	go func() { errc <- serveSignals(ctx, cfg, log, hurry, hup) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(30 * time.Second):
				err = fmt.Errorf("serve did not return 30 s after the stop")
			}
		})
		return err
	}
	e.t.Cleanup(func() { stop() })
	e.waitLog("bot running")
	return stop
}

func (e *env) waitLog(s string) {
	e.t.Helper()
	wait.For(e.t, "log "+s, func() bool { return strings.Contains(e.logs.String(), s) })
}

func user(id int64) tgkit.User { return tgkit.User{ID: id, FirstName: fmt.Sprint("user", id)} }

func private(id int64) tgkit.Chat { return tgkit.Chat{ID: id, Type: "private"} }

// say sends a private message from user id and returns its message id.
func (e *env) say(id int64, text string) int {
	return e.tg.Send(tgkit.Inbound{Chat: private(id), From: user(id), Text: text})
}

// botTexts returns the texts of the bot's messages in a chat, in order.
func (e *env) botTexts(chat int64) []string {
	var out []string
	for _, m := range e.tg.BotMessages(chat) {
		t := m.Text
		if t == "" {
			t = m.Caption
		}
		out = append(out, t)
	}
	return out
}

// waitBotText waits until a bot message in chat satisfies ok and returns it.
func (e *env) waitBotText(chat int64, what string, ok func(string) bool) string {
	e.t.Helper()
	var got string
	wait.For(e.t, what, func() bool {
		for _, s := range e.botTexts(chat) {
			if ok(s) {
				got = s
				return true
			}
		}
		return false
	})
	return got
}

func contains(sub string) func(string) bool {
	return func(s string) bool { return strings.Contains(s, sub) }
}

// openStore opens the bot's database after serve returned.
func (e *env) openStore() *store.Database {
	e.t.Helper()
	st, err := store.Open(context.Background(), store.Options{DSN: e.db})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { st.Close() })
	return st
}

// lastUser returns the last user message of a model request.
func lastUser(r llm.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

func TestServeEndToEnd(t *testing.T) {
	e := newEnv(t)
	cfg := e.config("queue_size", 1, "shutdown_grace_sec", 0)
	stop := e.start(cfg)

	// A message → a streamed reply with a tool round on the MCP server.
	e.llm.Push(
		llm.Reply{Chunks: []llm.Chunk{
			{Content: "Checking."},
			{ToolCalls: []llm.ToolCallDelta{{Index: 0, ID: "call_e1", Name: "echo", Arguments: `{"text":"hi"}`}}},
		}},
		llm.Text("The kit ", "said hi."),
	)
	e.say(1, "use the tool")
	final := e.waitBotText(1, "the answer with the tool round", contains("The kit said hi."))
	if !strings.HasPrefix(final, "Checking.\n\n✓ 1 tool · ") || !strings.Contains(final, "\n✓ echo ") {
		t.Fatalf("answer = %q; want the pre-tool text, then the tool's status line folded away", final)
	}
	if m := e.tg.BotMessages(1); len(m) != 1 || m[0].Edits == 0 {
		t.Fatalf("bot messages = %+v; want one message streamed by edits", m)
	}
	if e.kit.Calls("echo") != 1 {
		t.Fatalf("MCP echo called %d times", e.kit.Calls("echo"))
	}

	// The next message sees that history.
	e.llm.Push(llm.Text("Still here."))
	e.say(1, "and now?")
	e.waitBotText(1, "the second answer", contains("Still here."))
	reqs := e.llm.Requests()
	second := reqs[len(reqs)-1].Messages
	var roles []string
	for _, m := range second {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool,assistant,user" {
		t.Fatalf("second turn's transcript roles = %s", got)
	}
	if second[3].Content != "hi" || second[3].ToolCallID != "call_e1" {
		t.Fatalf("the tool result in history = %+v", second[3])
	}

	// Two messages sent quickly are answered in order.
	e.llm.SetHandler(func(r llm.Request) llm.Reply { return llm.Text("answer to ", lastUser(r)) })
	e.say(2, "first")
	e.say(2, "second")
	wait.For(t, "both answers", func() bool {
		return len(e.botTexts(2)) == 2 && !strings.Contains(strings.Join(e.botTexts(2), ""), "…")
	})
	e.waitBotText(2, "the second answer", contains("answer to second"))
	if got := e.botTexts(2); got[0] != "answer to first" || got[1] != "answer to second" {
		t.Fatalf("answers = %q, want in order", got)
	}

	// A denied user gets nothing, and the refusal is logged.
	e.say(666, "let me in")
	e.waitLog("user=666")
	if !strings.Contains(e.logs.String(), "access rules") {
		t.Fatalf("the refusal was not logged")
	}

	// /audit: an admin gets the list; anyone else is refused, and the refusal is audited.
	e.say(100, "/audit echo")
	list := e.waitBotText(100, "the audit list", contains("Latest tool calls"))
	if !strings.Contains(list, " echo ok ") || !strings.Contains(list, `{"text":"hi"}`) {
		t.Fatalf("/audit answer = %q", list)
	}
	e.say(3, "/audit")
	e.waitBotText(3, "the refusal", contains("Only bot admins"))

	// /stop mid-stream keeps the partial answer, marked stopped.
	hold := make(chan struct{})
	e.llm.SetHandler(func(r llm.Request) llm.Reply {
		return llm.Reply{Chunks: []llm.Chunk{{Content: "Once upon a time"}, {Content: " there was", Wait: hold}}}
	})
	e.say(4, "tell a story")
	e.waitBotText(4, "the first words", contains("Once upon a time"))
	e.say(4, "/stop")
	e.waitBotText(4, "the stopped answer", func(s string) bool { return s == "Once upon a time [stopped]" })

	// Busy: one turn runs, one waits (queue_size 1), the third is told the bot is busy.
	e.say(5, "one")
	wait.For(t, "the first turn to stream", func() bool { return len(e.botTexts(5)) == 1 })
	e.say(5, "two")
	e.waitLog("waits for its turn")
	e.say(5, "three")
	e.waitBotText(5, "the busy notice", contains(config.Default().Chat.BusyText))
	close(hold)
	wait.For(t, "both turns of chat 5", func() bool { return strings.Count(e.logs.String(), "turn done\" platform=telegram chat=5 ") == 2 })
	e.waitBotText(5, "the queued message's answer", contains("Once upon a time there was"))

	// SIGTERM while a tool runs: the partial answer is delivered and saved, no audit row is lost.
	e.llm.SetHandler(func(r llm.Request) llm.Reply {
		return llm.Reply{Chunks: []llm.Chunk{
			{Content: "Let me wait."},
			{ToolCalls: []llm.ToolCallDelta{{Index: 0, ID: "call_sleep", Name: "sleep", Arguments: `{"seconds":30}`}}},
		}}
	})
	e.say(6, "wait for it")
	wait.For(t, "the sleep call", func() bool { return e.kit.Calls("sleep") == 1 })
	if err := stop(); err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
	sig := e.waitBotText(6, "the interrupted answer", contains("[stopped]"))
	if !strings.HasPrefix(sig, "Let me wait.\n\n✗ sleep") || !strings.HasSuffix(sig, "\n\n[stopped]") || strings.Count(sig, "Let me wait.") != 1 {
		t.Fatalf("interrupted answer = %q", sig)
	}

	if got := e.botTexts(666); len(got) != 0 {
		t.Fatalf("the denied user got %q", got)
	}

	st := e.openStore()
	ctx := context.Background()
	rows, _, err := st.ToolCalls.ToolCalls(ctx, audit.Filter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	byCall := map[string]audit.Record{}
	for _, r := range rows {
		byCall[r.ToolCallID] = r
		if r.Status == audit.StatusRunning {
			t.Errorf("audit row %d (%s) left running after shutdown", r.ID, r.ToolName)
		}
	}
	echo, sleep := byCall["call_e1"], byCall["call_sleep"]
	if echo.ToolName != "echo" || echo.Status != audit.StatusOK || echo.Round != 1 || echo.Source != "mcp" || echo.Server != "kit" ||
		echo.Platform != "telegram" || echo.ChatID != "1" || echo.UserID != "1" || echo.TurnID == 0 || echo.ConversationID == 0 {
		t.Errorf("echo audit row = %+v", echo)
	}
	if sleep.ToolName != "sleep" || sleep.Status != audit.StatusCancelled || sleep.FinishedAt.IsZero() {
		t.Errorf("sleep audit row = %+v; want cancelled and finished", sleep)
	}
	refused := 0
	for _, r := range rows {
		if r.ToolName == "/audit" && r.Status == audit.StatusDenied && r.UserID == "3" {
			refused++
		}
	}
	if refused != 1 {
		t.Errorf("refused /audit rows = %d, want 1", refused)
	}
	turn, err := st.Turns.Turn(ctx, echo.TurnID)
	if err != nil || turn.Status != store.TurnOK || turn.Rounds != 2 {
		t.Errorf("the tool round's turn = %+v, %v", turn, err)
	}
	sleepTurn, err := st.Turns.Turn(ctx, sleep.TurnID)
	if err != nil || sleepTurn.Status != store.TurnInterrupted {
		t.Errorf("the interrupted turn = %+v, %v", sleepTurn, err)
	}
	hist, err := st.Messages.History(ctx, sleep.ConversationID, 10)
	if err != nil || len(hist) != 3 || hist[1].Content != "Let me wait." || hist[2].Role != store.RoleTool {
		t.Errorf("the interrupted turn's history = %+v, %v", hist, err)
	}
	st.Close()

	// Restart keeps history.
	e.llm.SetHandler(func(r llm.Request) llm.Reply { return llm.Text("welcome back") })
	before := e.llm.RequestCount()
	stop = e.start(cfg)
	e.say(1, "remember me?")
	e.waitBotText(1, "the answer after the restart", contains("welcome back"))
	reqs = e.llm.Requests()[before:]
	if len(reqs) != 1 {
		t.Fatalf("%d model requests after the restart", len(reqs))
	}
	var contents []string
	for _, m := range reqs[0].Messages {
		contents = append(contents, m.Content)
	}
	joined := strings.Join(contents, "|")
	if !strings.Contains(joined, "use the tool") || !strings.Contains(joined, "Still here.") {
		t.Fatalf("the transcript after the restart lost the history: %q", joined)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestServeGraceLetsTurnsFinish(t *testing.T) {
	e := newEnv(t)
	stop := e.start(e.config("shutdown_grace_sec", 20))
	hold := make(chan struct{})
	e.llm.SetHandler(func(r llm.Request) llm.Reply {
		return llm.Reply{Chunks: []llm.Chunk{{Content: "Almost"}, {Content: " done.", Wait: hold}}}
	})
	e.say(1, "slow one")
	e.waitBotText(1, "the first words", contains("Almost"))
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	e.waitLog("shutting down")
	close(hold)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if got := e.botTexts(1); len(got) != 1 || got[0] != "Almost done." {
		t.Fatalf("answer = %q; a turn within the grace period must finish", got)
	}
	st := e.openStore()
	turn, err := st.Turns.Turn(context.Background(), 1)
	if err != nil || turn.Status != store.TurnOK {
		t.Fatalf("turn = %+v, %v", turn, err)
	}
}

func TestServeSecondSignalEndsGrace(t *testing.T) {
	e := newEnv(t)
	hurry := make(chan os.Signal, 1)
	stop := e.startHurry(e.config("shutdown_grace_sec", 600), hurry)
	hold := make(chan struct{})
	defer close(hold)
	e.llm.SetHandler(func(r llm.Request) llm.Reply {
		return llm.Reply{Chunks: []llm.Chunk{{Content: "Never"}, {Content: " finished.", Wait: hold}}}
	})
	e.say(1, "slow one")
	e.waitBotText(1, "the first words", contains("Never"))
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	e.waitLog("shutting down")
	hurry <- os.Interrupt
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if got := e.botTexts(1); len(got) != 1 || got[0] != "Never [stopped]" {
		t.Fatalf("answer = %q", got)
	}
}

func TestServeAdminListener(t *testing.T) {
	e := newEnv(t)
	stop := e.start(e.toml().set("admin", webChatAdmin...).parse(t))
	e.waitLog("admin listening")
	// Both enabled platforms are connectors that serve runs.
	e.waitLog("msg=receiving platform=telegram")
	e.waitLog("msg=receiving platform=web")
	m := regexp.MustCompile(`admin listening" addr=(\S+)`).FindStringSubmatch(e.logs.String())
	if m == nil {
		t.Fatalf("no admin address in the logs:\n%s", e.logs.String())
	}
	base := "http://" + m[1]
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d", code)
	}
	if code, body := get("/chat"); code != http.StatusOK || !strings.Contains(strings.ToLower(body), "<html") {
		t.Fatalf("/chat = %d %.200q", code, body)
	}
	if code, body := get("/api/v1/mcp-servers"); code != http.StatusOK || !strings.Contains(body, `"kit"`) {
		t.Fatalf("/api/v1/mcp-servers = %d %.300q", code, body)
	}

	e.llm.Push(llm.Text("hello there"))
	e.say(1, "hi")
	e.waitBotText(1, "the answer", contains("hello there"))
	wait.For(t, "the turn in the metrics", func() bool {
		_, body := get("/metrics")
		return strings.Contains(body, `relaybot_turns_total{outcome="ok"} 1`) &&
			strings.Contains(body, `relaybot_model_calls_total{model="primary",status="ok"} 1`)
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestServeDiscord(t *testing.T) {
	e := newEnv(t)
	dc := dtk.New(dtk.Config{})
	t.Cleanup(dc.Close)
	e.discord = []any{"enabled", true, "token", dc.Token(), "api_base", dc.APIBase()}
	stop := e.start(e.config())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := dc.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitLog("msg=receiving platform=discord")
	const dm, user, admin = "500000000000000001", "600", "700"
	botMsgs := func(ch string) []dtk.Message { return dc.BotMessages(ch) }

	hold := make(chan struct{})
	defer close(hold)
	e.llm.SetHandler(func(r llm.Request) llm.Reply {
		return llm.Reply{Chunks: []llm.Chunk{{Content: "Streaming along"}, {Content: " forever", Wait: hold}}}
	})
	if _, err := dc.Post(dtk.UserMessage{ChannelID: dm, AuthorID: user, Content: "talk"}); err != nil {
		t.Fatal(err)
	}
	var msg dtk.Message
	wait.For(t, "the streamed reply with its Stop button", func() bool {
		for _, m := range botMsgs(dm) {
			if strings.Contains(m.Content, "Streaming along") && len(m.Buttons) > 0 {
				msg = m
				return true
			}
		}
		return false
	})
	if _, err := dc.ClickButton(msg.ID, discord.StopButtonID, user, nil); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the stopped answer", func() bool {
		m, ok := dc.Message(msg.ID)
		return ok && m.Content == "Streaming along [stopped]"
	})

	// /audit from a Discord admin lists the calls; the list is empty here but answered.
	const adminDM = "500000000000000002"
	if _, err := dc.Post(dtk.UserMessage{ChannelID: adminDM, AuthorID: admin, Content: "/audit"}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the admin's /audit answer", func() bool {
		for _, m := range botMsgs(adminDM) {
			if strings.Contains(m.Content, "No tool calls") {
				return true
			}
		}
		return false
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// With no platform enabled (Telegram and Discord off, no web chat) serve says so and stops,
// instead of running a bot nobody can reach.
func TestServeRefusesToRunWithoutAPlatform(t *testing.T) {
	e := newEnv(t)
	e.discord = []any{"enabled", false} // and so Telegram off
	err := serve(context.Background(), e.config(), slog.New(slog.NewTextHandler(e.logs, nil)), nil)
	if !errors.Is(err, errNothingToServe) {
		t.Fatalf("serve = %v, want %v", err, errNothingToServe)
	}
}

// Stop buttons end a turn exactly like /stop: the native Stop of a Telegram draft (while the
// answer streams in a private chat), and the inline Stop button of an answer streamed by edits
// while a tool runs (the 30 s tool is cancelled, the partial answer stays, marked stopped). A
// bystander's press in a group is refused like their /stop.
func TestStopButtonsEndTheTurn(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Telegram.Drafts = "auto"
	e.start(cfg)

	// The draft's native Stop while the model writes.
	hold := make(chan struct{})
	defer close(hold)
	e.llm.SetHandler(func(r llm.Request) llm.Reply {
		if lastUser(r) == "tell a story" {
			return llm.Reply{Chunks: []llm.Chunk{{Content: "Once upon a time"}, {Content: " there was", Wait: hold}}}
		}
		return llm.Reply{Chunks: []llm.Chunk{
			{Content: "Let me wait."},
			{ToolCalls: []llm.ToolCallDelta{{Index: 0, ID: "call_sleep", Name: "sleep", Arguments: `{"seconds":30}`}}},
		}}
	})
	e.say(21, "tell a story")
	wait.For(t, "the answer streaming as a draft with a Stop button", func() bool {
		d, ok := e.tg.CurrentDraft(21)
		return ok && d.CanStop && d.KeepOnStop && strings.Contains(d.Text, "Once upon a time")
	})
	if !e.tg.PressDraftStop(21) {
		t.Fatal("the draft shows no Stop button")
	}
	e.waitBotText(21, "the stopped answer", func(s string) bool { return s == "Once upon a time [stopped]" })

	// The inline Stop button of a group answer while a tool runs.
	group := tgkit.Chat{ID: -100500, Type: "supergroup"}
	e.tg.Send(tgkit.Inbound{Chat: group, From: user(22), Text: "@" + e.tg.BotUsername() + " wait for it"})
	wait.For(t, "the sleep call", func() bool { return e.kit.Calls("sleep") == 1 })
	var msg tgkit.Message
	wait.For(t, "the streaming message with its Stop button", func() bool {
		ms := e.tg.BotMessages(group.ID)
		if len(ms) == 1 && len(ms[0].Buttons) == 1 && strings.Contains(ms[0].Text, "sleep") {
			msg = ms[0]
			return true
		}
		return false
	})
	// A bystander's press is refused, as their /stop would be; the tool keeps running.
	if _, err := e.tg.PressButton(group.ID, msg.ID, user(23), msg.Buttons[0].CallbackData); err != nil {
		t.Fatal(err)
	}
	e.waitBotText(group.ID, "the bystander's refusal", contains("Only the person who asked"))
	if _, err := e.tg.PressButton(group.ID, msg.ID, user(22), msg.Buttons[0].CallbackData); err != nil {
		t.Fatal(err)
	}
	got := e.waitBotText(group.ID, "the stopped answer", contains("[stopped]"))
	// "✗ sleep": the 30 s tool was cancelled, not waited for (it would read "✓ sleep").
	if !strings.HasPrefix(got, "Let me wait.") || !strings.Contains(got, "✗ sleep") {
		t.Errorf("stopped answer = %q, want the text, the cancelled tool and the stopped mark", got)
	}
	for _, m := range e.tg.BotMessages(group.ID) {
		if len(m.Buttons) != 0 {
			t.Errorf("message %q still shows buttons after the final", m.Text)
		}
	}
}
