package telegram

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
	"relaybot/internal/logredact"
	tk "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
)

// collector is a Handler that records what it gets and answers each message with "ok: text".
type collector struct {
	mu  sync.Mutex
	got []adapters.Inbound
	ch  chan adapters.Inbound
}

func newCollector() *collector { return &collector{ch: make(chan adapters.Inbound, 100)} }

func (c *collector) Handle(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	c.mu.Lock()
	c.got = append(c.got, in)
	c.mu.Unlock()
	r := out.NewReply(ctx)
	r.Update("thinking about " + in.Text)
	_ = r.Finish(ctx, "ok: "+in.Text, nil)
	c.ch <- in
}

func (c *collector) next(t *testing.T) adapters.Inbound {
	t.Helper()
	select {
	case in := <-c.ch:
		return in
	case <-time.After(20 * time.Second):
		t.Fatal("no message reached the handler")
		return adapters.Inbound{}
	}
}

// startRun starts a.Run and returns a stop func (idempotent) that cancels it and waits for it
// to return.
func startRun(t *testing.T, a *Adapter, h adapters.Handler) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, h) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}

var (
	ann   = tk.User{ID: 7, FirstName: "Ann", Username: "ann"}
	bob   = tk.User{ID: 8, FirstName: "Bob", Username: "bob"}
	group = tk.Chat{ID: -100200, Type: "supergroup", Title: "team"}
	forum = tk.Chat{ID: -100300, Type: "supergroup", Title: "forum", IsForum: true}
)

func TestInboundAddressingAndCommands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, tk.Options{InMemory: true}, func(o *Options) { o.TriggerPrefix = "!ai" })
		col := newCollector()
		stop := startRun(t, e.ad, col)
		defer stop()
		bot := "@" + e.srv.BotUsername()

		dm := tk.Chat{ID: 42, Type: "private"}
		cases := []struct {
			name    string
			in      tk.Inbound
			want    bool
			text    string
			command string
			args    string
		}{
			{"private always", tk.Inbound{Chat: dm, From: ann, Text: "hello"}, true, "hello", "", ""},
			{"start", tk.Inbound{Chat: dm, From: ann, Text: "/start"}, true, "", "start", ""},
			{"audit with args", tk.Inbound{Chat: dm, From: ann, Text: "/audit last 20"}, true, "", "audit", "last 20"},
			{"group silent", tk.Inbound{Chat: group, From: ann, Text: "just chatting"}, false, "", "", ""},
			{"group mention", tk.Inbound{Chat: group, From: ann, Text: bot + " what time is it"}, true, "what time is it", "", ""},
			{"group prefix", tk.Inbound{Chat: group, From: bob, Text: "!ai summarize"}, true, "summarize", "", ""},
			{"command for us", tk.Inbound{Chat: group, From: ann, Text: "/reset" + bot}, true, "", "reset", ""},
			{"command for another bot", tk.Inbound{Chat: group, From: ann, Text: "/reset@other_bot"}, false, "", "", ""},
			{"stop", tk.Inbound{Chat: group, From: ann, Text: "/stop"}, true, "", "stop", ""},
			{"any command for another bot", tk.Inbound{Chat: group, From: ann, Text: "/audit@other_bot last 20"}, false, "", "", ""},
			{"command for another bot in a DM", tk.Inbound{Chat: dm, From: ann, Text: "/reset@other_bot"}, false, "", "", ""},
			{"command for another bot then a comma", tk.Inbound{Chat: dm, From: ann, Text: "/reset@other_bot, please"}, false, "", "", ""},
			{"command for another bot after our mention", tk.Inbound{Chat: group, From: ann, Text: bot + " /reset@other_bot"}, false, "", "", ""},
			{"command for another bot after the prefix", tk.Inbound{Chat: group, From: bob, Text: "!ai /reset@other_bot"}, false, "", "", ""},
			{"command for us then a comma", tk.Inbound{Chat: dm, From: ann, Text: "/reset" + bot + ", please"}, true, "", "reset", ", please"},
			{"command then a newline", tk.Inbound{Chat: dm, From: ann, Text: "/audit\nfetch_url"}, true, "", "audit", "fetch_url"},
			{"command for us then a newline", tk.Inbound{Chat: group, From: ann, Text: "/audit" + bot + "\nfetch_url"}, true, "", "audit", "fetch_url"},
			{"command after our mention", tk.Inbound{Chat: group, From: ann, Text: bot + " /audit\nfetch_url"}, true, "", "audit", "fetch_url"},
			{"command after the prefix", tk.Inbound{Chat: group, From: bob, Text: "!ai /reset"}, true, "", "reset", ""},
			{"command for another bot then an at sign", tk.Inbound{Chat: dm, From: ann, Text: "/reset@other_bot@x"}, false, "", "", ""},
			{"a path is not a command", tk.Inbound{Chat: dm, From: ann, Text: "/etc/hosts is broken"}, true, "/etc/hosts is broken", "", ""},
			// Letters whose lower case has another UTF-8 length must not shift the mention.
			{"mention after dotted capital I", tk.Inbound{Chat: group, From: ann, Text: "İstanbul " + bot + " weather"}, true, "İstanbul  weather", "", ""},
			{"mention after Kelvin sign", tk.Inbound{Chat: group, From: ann, Text: "300 \u212a " + bot + " is hot?"}, true, "300 \u212a  is hot?", "", ""},
			{"mention at the end after dotted capital I", tk.Inbound{Chat: group, From: ann, Text: "İİ " + bot}, true, "İİ", "", ""},
		}
		for _, c := range cases {
			e.srv.Send(c.in)
			if !c.want {
				continue
			}
			got := col.next(t)
			if got.Text != c.text || got.Command != c.command || got.Args != c.args {
				t.Errorf("%s: got text %q command %q args %q", c.name, got.Text, got.Command, got.Args)
			}
		}
		// A reply to the bot's message addresses it without a mention.
		var botMsg int
		for _, m := range e.srv.BotMessages(group.ID) {
			botMsg = m.ID
		}
		e.srv.Send(tk.Inbound{Chat: group, From: bob, Text: "and tomorrow?", ReplyTo: botMsg})
		if got := col.next(t); got.Text != "and tomorrow?" || got.Kind != adapters.Group || got.UserID != "8" {
			t.Errorf("reply to the bot: %+v", got)
		}
		// The silent group messages never reached the handler: exactly the addressed ones did.
		col.mu.Lock()
		n := len(col.got)
		col.mu.Unlock()
		want := 1 // the reply to the bot
		for _, c := range cases {
			if c.want {
				want++
			}
		}
		if n != want {
			t.Errorf("handler got %d messages, want %d", n, want)
		}
		// Replies answer the user's message.
		for _, c := range e.srv.Calls() {
			if c.Method == "sendMessage" && c.Code == 200 && c.Params["reply_to_message_id"] == "" {
				t.Errorf("a reply was not threaded to the user's message: %+v", c.Params)
			}
		}
	})
}

func TestAllowedChatsAndUsers(t *testing.T) {
	e := newEnv(t, tk.Options{}, func(o *Options) { o.AllowedUsers = []string{"@Ann"} })
	col := newCollector()
	stop := startRun(t, e.ad, col)
	defer stop()
	e.srv.Send(tk.Inbound{Chat: tk.Chat{ID: 8}, From: bob, Text: "let me in"})
	e.srv.Send(tk.Inbound{Chat: tk.Chat{ID: 7}, From: ann, Text: "me too"})
	if got := col.next(t); got.UserID != "7" {
		t.Fatalf("unexpected sender %s", got.UserID)
	}
	wait.For(t, "both updates taken", func() bool { return e.srv.PendingUpdates() == 0 || countCalls(e.srv, "getUpdates") > 2 })
	if len(e.srv.BotMessages(8)) != 0 {
		t.Fatal("a user who is not allowed was answered")
	}
}

func countCalls(s *tk.Server, method string) int {
	n := 0
	for _, c := range s.Calls() {
		if c.Method == method {
			n++
		}
	}
	return n
}

func TestForumTopicKeepsItsThread(t *testing.T) {
	e := newEnv(t, tk.Options{}, nil)
	col := newCollector()
	stop := startRun(t, e.ad, col)
	defer stop()
	// In a forum every topic message replies to the topic's first message (id = thread id).
	e.srv.Send(tk.Inbound{Chat: forum, From: ann, Text: "topic opened", ThreadID: 0})
	e.srv.Send(tk.Inbound{Chat: forum, From: ann, Text: "@" + e.srv.BotUsername() + " status?", ThreadID: 1, ReplyTo: 1})
	got := col.next(t)
	if got.Chat.ThreadID != "1" || got.Text != "status?" {
		t.Fatalf("inbound %+v", got)
	}
	stop()
	var sends int
	for _, c := range e.srv.Calls() {
		switch c.Method {
		case "sendMessage", "editMessageText", "sendChatAction":
			if c.ChatID == forum.ID {
				sends++
				if c.ThreadID != 1 {
					t.Errorf("%s without the topic's thread id: %+v", c.Method, c.Params)
				}
			}
		}
	}
	if sends == 0 {
		t.Fatal("nothing was sent to the topic")
	}
	for _, m := range e.srv.BotMessages(forum.ID) {
		if m.ThreadID != 1 {
			t.Fatalf("bot message outside the topic: %+v", m)
		}
	}
}

// A reply in a forum's General topic carries message_thread_id (the reply chain's first
// message) but is in no topic: the answer must go to the General topic, not to that thread,
// which Telegram refuses ("message thread not found").
func TestForumGeneralTopicReply(t *testing.T) {
	e := newEnv(t, tk.Options{}, nil)
	col := newCollector()
	stop := startRun(t, e.ad, col)
	defer stop()
	root := e.srv.Send(tk.Inbound{Chat: forum, From: ann, Text: "general chatter"})
	e.srv.Send(tk.Inbound{Chat: forum, From: ann, Text: "@" + e.srv.BotUsername() + " and you?", ThreadID: root, ReplyTo: root, GeneralTopic: true})
	got := col.next(t)
	if got.Chat.ThreadID != "" || got.Text != "and you?" {
		t.Fatalf("inbound %+v", got)
	}
	wait.For(t, "the answer in the General topic", func() bool {
		for _, m := range e.srv.BotMessages(forum.ID) {
			if m.Text == "ok: and you?" && m.ThreadID == 0 {
				return true
			}
		}
		return false
	})
}

func TestPollingOffsetAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	offsetFile := filepath.Join(dir, "offset")
	e := newEnv(t, tk.Options{}, func(o *Options) { o.OffsetFile = offsetFile })
	dm := tk.Chat{ID: 55}
	for i := 1; i <= 3; i++ {
		e.srv.Send(tk.Inbound{Chat: dm, From: ann, Text: fmt.Sprintf("m%d", i)})
	}
	col := newCollector()
	stop := startRun(t, e.ad, col)
	for i := 0; i < 3; i++ {
		col.next(t)
	}
	stop()
	// Written while the bot was down: must be answered by the next instance, once.
	e.srv.Send(tk.Inbound{Chat: dm, From: ann, Text: "m4"})
	e.srv.Send(tk.Inbound{Chat: dm, From: ann, Text: "m5"})

	for _, keepFile := range []bool{true} {
		opts := e.ad.opts
		if !keepFile {
			opts.OffsetFile = ""
		}
		ad2, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		col2 := newCollector()
		stop2 := startRun(t, ad2, col2)
		got := []string{col2.next(t).Text, col2.next(t).Text}
		stop2()
		if strings.Join(got, ",") != "m4,m5" && strings.Join(got, ",") != "m5,m4" {
			t.Fatalf("second run got %v", got)
		}
		select {
		case in := <-col2.ch:
			t.Fatalf("answered twice: %q", in.Text)
		default:
		}
	}
	// Every user message got exactly one answer.
	var answers []string
	for _, m := range e.srv.BotMessages(dm.ID) {
		answers = append(answers, m.Text)
	}
	if len(answers) != 5 {
		t.Fatalf("answers: %q", answers)
	}
}

func TestConfirmedWithoutOffsetFile(t *testing.T) {
	e := newEnv(t, tk.Options{}, nil)
	dm := tk.Chat{ID: 56}
	e.srv.Send(tk.Inbound{Chat: dm, From: ann, Text: "once"})
	col := newCollector()
	stop := startRun(t, e.ad, col)
	col.next(t)
	stop()
	if n := e.srv.PendingUpdates(); n != 0 {
		t.Fatalf("%d taken updates were not confirmed at shutdown", n)
	}
}

func TestPhotoReachesTheHandler(t *testing.T) {
	big := bytes.Repeat([]byte{0xFF, 0xD8, 0xFF, 0xE0}, 1000) // 4,000 bytes, JPEG magic
	for _, c := range []struct {
		name string
		cap  int
		want int
	}{
		{"largest size", 1 << 20, len(big)},
		{"largest under the cap", 1000, 64},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, tk.Options{}, func(o *Options) { o.MaxImageBytes = c.cap })
			col := newCollector()
			stop := startRun(t, e.ad, col)
			defer stop()
			e.srv.Send(tk.Inbound{Chat: tk.Chat{ID: 60}, From: ann, Text: "what is this?", Photo: big})
			got := col.next(t)
			if got.Text != "what is this?" || len(got.Images) != 1 || len(got.Images[0].Data) != c.want {
				t.Fatalf("text %q, %d images", got.Text, len(got.Images))
			}
			if got.Images[0].MIME != "image/jpeg" {
				t.Fatalf("MIME %q", got.Images[0].MIME)
			}
		})
	}
}

func TestWebhook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, hook := newWebhookEnv(t, nil)
		col := newCollector()
		stop := startRun(t, e.ad, col)
		defer stop()
		e.srv.Send(tk.Inbound{Chat: tk.Chat{ID: 70}, From: ann, Text: "via webhook"})
		if got := col.next(t); got.Text != "via webhook" {
			t.Fatalf("got %q", got.Text)
		}
		wait.For(t, "the answer", func() bool {
			m := e.srv.BotMessages(70)
			return len(m) == 1 && m[0].Text == "ok: via webhook"
		})
		// A forged update without the secret is refused and never handled.
		resp, err := hookClient(t, hook).Post("http://"+hook.Addr().String()+"/tg", "application/json",
			strings.NewReader(`{"update_id":999,"message":{"message_id":1,"from":{"id":9,"first_name":"X"},"chat":{"id":70,"type":"private"},"date":1,"text":"forged"}}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("forged update answered %s", resp.Status)
		}
		// Ten seconds of the bubble's clock, everything that could run having run: enough for
		// any handler to have answered (on a real clock this was a 100 ms guess).
		time.Sleep(10 * time.Second)
		synctest.Wait()
		select {
		case in := <-col.ch:
			t.Fatalf("forged update handled: %q", in.Text)
		default:
		}
	})
}

// Telegram posts to a webhook over several connections at once and retries unanswered updates
// later, so an older update can arrive after a newer one: it must still be answered, and an
// update posted twice answered once.
func TestWebhookOutOfOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, hook := newWebhookEnv(t, nil)
		client := hookClient(t, hook)
		col := newCollector()
		stop := startRun(t, e.ad, col)
		defer stop()
		e.srv.Send(tk.Inbound{Chat: tk.Chat{ID: 70}, From: ann, Text: "hook is up"})
		col.next(t)
		post := func(id int, chat int, text string) {
			t.Helper()
			body := fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"from":{"id":%d,"first_name":"U"},"chat":{"id":%d,"type":"private"},"date":1,"text":%q}}`, id, id, chat, chat, text)
			req, err := http.NewRequest(http.MethodPost, "http://"+hook.Addr().String()+"/tg", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s3cret")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("update %d answered %s", id, resp.Status)
			}
		}
		post(900002, 81, "newer")
		post(900001, 82, "older")
		post(900002, 81, "newer")
		got := map[string]int{}
		for range 2 {
			got[col.next(t).Text]++
		}
		if got["newer"] != 1 || got["older"] != 1 {
			t.Fatalf("handled %v, want newer and older once each", got)
		}
		time.Sleep(10 * time.Second) // of the bubble's clock; see TestWebhook
		synctest.Wait()
		select {
		case in := <-col.ch:
			t.Fatalf("update handled twice: %q", in.Text)
		default:
		}
	})
}

func TestTokenNeverInErrorsOrLogs(t *testing.T) {
	const token = "987654:SECRET-token-value"
	// A server that is not there: the transport error carries the URL with the token.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/bot%s/%s"
	ln.Close()
	var logs bytes.Buffer
	_, err = New(Options{Token: token, APIEndpoint: dead, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err == nil {
		t.Fatal("New against a dead endpoint succeeded")
	}
	if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("token in error: %v", err)
	}
	if !errors.Is(err, adapters.ErrTemporary) {
		t.Fatalf("a refused connection should be temporary: %v", err)
	}
	// Wrong token against a live server: Unauthorized, no token.
	srv, err := tk.New(tk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	_, err = New(Options{Token: token, APIEndpoint: srv.Endpoint()})
	if err == nil || strings.Contains(err.Error(), token) {
		t.Fatalf("want an Unauthorized error without the token, got %v", err)
	}
	// The redacting log handler scrubs strings, errors and groups.
	h := logredact.NewHandler(slog.NewTextHandler(&logs, nil), func(s string) string { return redactToken(token, s) })
	l := slog.New(h).With("url", "https://api.telegram.org/bot"+token+"/getMe")
	l.Warn("failed "+token, "err", errors.New("Post https://x/bot"+token+"/m: refused"), slog.Group("g", "u", token))
	if strings.Contains(logs.String(), "SECRET") {
		t.Fatalf("token in logs: %s", logs.String())
	}
}

func TestBadOptions(t *testing.T) {
	for _, o := range []Options{
		{},
		{Token: "1:x", Mode: "push"},
		{Token: "1:x", Mode: "webhook"},
		{Token: "1:x", APIEndpoint: "http://127.0.0.1/no-placeholders"},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted bad options", o)
		}
	}
}
