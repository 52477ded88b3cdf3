package web

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
	"relaybot/internal/testkit/wait"
)

// scriptedHandler answers every message with a reply streamed in steps; after each step it
// waits until the test has seen it (or ctx ends), so the stream is observable step by step.
type scriptedHandler struct {
	steps []string
	seen  chan string // the test sends each step's text once it saw it
	got   chan adapters.Inbound
}

func (h *scriptedHandler) Handle(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	h.got <- in
	if in.Command == "help" {
		out.Notice(ctx, "commands: /reset /stop /help")
		return
	}
	if in.Command == "stop" {
		return // the pipeline's business: nothing to stream
	}
	reply := out.NewReply(ctx)
	reply.Working(true)
	for _, step := range h.steps[:len(h.steps)-1] {
		reply.Update(step)
		select {
		case <-h.seen:
		case <-ctx.Done():
			return
		}
	}
	reply.Working(false)
	reply.Finish(ctx, h.steps[len(h.steps)-1], nil)
}

type sseEvent struct {
	name string
	data string
}

// browser is a cookie-keeping client of the web chat.
type browser struct {
	t      *testing.T
	srv    *httptest.Server
	client *http.Client
	csrf   string
}

func newBrowser(t *testing.T, srv *httptest.Server) *browser {
	jar, _ := cookiejar.New(nil)
	b := &browser{t: t, srv: srv, client: &http.Client{Jar: jar}}
	// What the start page's script does: start a chat with a same-origin POST, then reload.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/chat/session", nil)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatalf("POST /chat/session: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("POST /chat/session: %d, want 204", resp.StatusCode)
	}
	resp, err = b.client.Get(srv.URL + "/chat")
	if err != nil {
		t.Fatalf("GET /chat: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /chat: %d", resp.StatusCode)
	}
	m := regexp.MustCompile(`name="csrf-token" content="([^"]+)"`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("chat page has no CSRF token: %s", body)
	}
	b.csrf = string(m[1])
	return b
}

// events opens the event stream and returns its events until ctx ends.
func (b *browser) events(ctx context.Context) <-chan sseEvent {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.URL+"/chat/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatalf("GET /chat/events: %v", err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		b.t.Fatalf("event stream content type %q", ct)
	}
	out := make(chan sseEvent, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			case line == "" && ev.name != "":
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
				ev = sseEvent{}
			}
		}
	}()
	return out
}

func (b *browser) post(text string, header http.Header) *http.Response {
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/chat/send", strings.NewReader(url.Values{"text": {text}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatalf("POST /chat/send: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func (b *browser) send(text string) {
	b.t.Helper()
	resp := b.post(text, http.Header{"X-Csrf-Token": {b.csrf}})
	if resp.StatusCode != http.StatusAccepted {
		b.t.Fatalf("POST %q: status %d, want 202", text, resp.StatusCode)
	}
}

func newChat(t *testing.T, h adapters.Handler) (*Chat, *httptest.Server) {
	t.Helper()
	chat, err := New(Options{Handler: h})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(chat.Handler())
	t.Cleanup(func() {
		srv.Close()
		chat.Close()
	})
	return chat, srv
}

// nextMsg waits for the next "msg" event, noting typing events on the way.
func nextMsg(t *testing.T, events <-chan sseEvent, typing *bool) eventMessage {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("event stream ended")
			}
			if ev.name == "typing" {
				var d struct{ MS int64 }
				json.Unmarshal([]byte(ev.data), &d)
				if d.MS > 0 && typing != nil {
					*typing = true
				}
				continue
			}
			var m eventMessage
			if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
				t.Fatalf("bad msg event %q: %v", ev.data, err)
			}
			return m
		case <-timeout:
			t.Fatal("no message event within 10s")
		}
	}
}

func TestReplyStreamsIntoTheBrowser(t *testing.T) {
	h := &scriptedHandler{steps: []string{"Thinking", "Thinking about Paris", "Call weather...", "It is sunny in Paris."},
		seen: make(chan string), got: make(chan adapters.Inbound, 1)}
	_, srv := newChat(t, h)
	b := newBrowser(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := b.events(ctx)

	b.send("weather in Paris?")
	in := <-h.got
	if in.Chat.Platform != chat.Web || in.Chat.ChatID == "" || in.Kind != adapters.Private || in.Text != "weather in Paris?" {
		t.Errorf("inbound = %+v, want a private, addressed web message", in)
	}
	user := nextMsg(t, events, nil)
	if user.Role != "user" || user.Text != "weather in Paris?" {
		t.Fatalf("first event = %+v, want the user's message", user)
	}
	var typing bool
	var botID string
	for _, step := range h.steps[:len(h.steps)-1] {
		m := nextMsg(t, events, &typing)
		if m.Role != "bot" || m.Text != step {
			t.Fatalf("event = %+v, want bot preview %q", m, step)
		}
		if botID == "" {
			botID = m.ID
		} else if m.ID != botID {
			t.Errorf("preview %q went to message %s, want the same message %s edited", step, m.ID, botID)
		}
		h.seen <- step
	}
	final := nextMsg(t, events, &typing)
	if final.ID != botID || final.Text != "It is sunny in Paris." {
		t.Errorf("final = %+v, want message %s edited to the answer", final, botID)
	}
	if !typing {
		t.Error("no typing indicator while the bot worked")
	}

	// A reload replays the conversation.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	replay := b.events(ctx2)
	if m := nextMsg(t, replay, nil); m.Text != "weather in Paris?" {
		t.Errorf("replay starts with %+v", m)
	}
	if m := nextMsg(t, replay, nil); m.Text != "It is sunny in Paris." {
		t.Errorf("replay then shows %+v", m)
	}
}

func TestCommandsAndNotices(t *testing.T) {
	h := &scriptedHandler{steps: []string{"x"}, seen: make(chan string), got: make(chan adapters.Inbound, 1)}
	_, srv := newChat(t, h)
	b := newBrowser(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := b.events(ctx)
	b.send("/help me")
	in := <-h.got
	if in.Command != "help" || in.Args != "me" {
		t.Errorf("command = %q args %q, want help / me", in.Command, in.Args)
	}
	nextMsg(t, events, nil) // the user's message
	if m := nextMsg(t, events, nil); m.Role != "bot" || !strings.Contains(m.Text, "/reset") {
		t.Errorf("notice = %+v", m)
	}
}

func TestSendRefusesForgedRequests(t *testing.T) {
	h := &scriptedHandler{steps: []string{"x"}, seen: make(chan string), got: make(chan adapters.Inbound, 1)}
	_, srv := newChat(t, h)
	b := newBrowser(t, srv)
	tests := []struct {
		name   string
		header http.Header
		want   int
	}{
		{"no token", http.Header{}, http.StatusForbidden},
		{"wrong token", http.Header{"X-Csrf-Token": {"nope"}}, http.StatusForbidden},
		{"cross-site", http.Header{"X-Csrf-Token": {b.csrf}, "Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden},
		{"foreign origin", http.Header{"X-Csrf-Token": {b.csrf}, "Origin": {"https://evil.example"}}, http.StatusForbidden},
	}
	for _, tc := range tests {
		if resp := b.post("hi", tc.header); resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
	select {
	case in := <-h.got:
		t.Errorf("a forged post reached the handler: %+v", in)
	default:
	}
	// Another browser's session cannot post without its own cookie.
	stranger := &http.Client{}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/chat/send", strings.NewReader("text=hi"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Csrf-Token", b.csrf)
	resp, err := stranger.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("post without the chat cookie: %d, want 401", resp.StatusCode)
	}
}

func TestMessengerContract(t *testing.T) {
	wc, srv := newChat(t, nil)
	b := newBrowser(t, srv)
	var id string
	wc.mu.Lock()
	for cid := range wc.ids {
		id = cid
	}
	wc.mu.Unlock()
	m := messenger{chat: wc}
	ctx := context.Background()
	ref := chat.Ref{Platform: chat.Web, ChatID: id}
	msg, err := m.Send(ctx, ref, "hello", adapters.SendOptions{})
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if err := m.Edit(ctx, msg, "hello"); !errors.Is(err, adapters.ErrNotModified) {
		t.Errorf("same-text edit: %v, want ErrNotModified", err)
	}
	if err := m.Edit(ctx, adapters.MessageRef{Chat: ref, ID: "m999"}, "x"); !errors.Is(err, adapters.ErrMessageGone) {
		t.Errorf("edit of unknown message: %v, want ErrMessageGone", err)
	}
	if _, err := m.Send(ctx, ref, strings.Repeat("x", Limits().MaxLen+1), adapters.SendOptions{}); !errors.Is(err, adapters.ErrTooLong) {
		t.Errorf("over-long send: %v, want ErrTooLong", err)
	}
	if _, err := m.Send(ctx, chat.Ref{Platform: chat.Web, ChatID: "gone"}, "x", adapters.SendOptions{}); !errors.Is(err, adapters.ErrMessageGone) {
		t.Errorf("send to unknown wc: %v, want ErrMessageGone", err)
	}
	fmsg, err := m.SendFiles(ctx, ref, []chat.File{{Name: "chart.png", MIME: "image/png", Data: []byte("\x89PNG")}}, "a chart", adapters.SendOptions{})
	if err != nil {
		t.Fatalf("SendFiles: %v", err)
	}
	resp, err := b.client.Get(srv.URL + "/chat/files/" + fmsg.ID + "/0")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(data) != "\x89PNG" || resp.Header.Get("Content-Type") != "image/png" {
		t.Errorf("file download: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	// Files are private to their browser.
	resp, err = http.Get(srv.URL + "/chat/files/" + fmsg.ID + "/0")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("file without the wc cookie: %d, want 404", resp.StatusCode)
	}
}

// blockingHandler holds every turn until its context ends.
type blockingHandler struct{ started, ended chan struct{} }

func (h blockingHandler) Handle(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	close(h.started)
	<-ctx.Done()
	close(h.ended)
}

func TestCloseEndsTurnsInFlight(t *testing.T) {
	h := blockingHandler{started: make(chan struct{}), ended: make(chan struct{})}
	chat, err := New(Options{Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(chat.Handler())
	defer srv.Close()
	b := newBrowser(t, srv)
	b.send("hold on")
	<-h.started
	chat.Close()
	select {
	case <-h.ended:
	default:
		t.Fatal("Close returned while a turn was still running")
	}
}

// A message posted once Close has begun is refused, not accepted and left unanswered.
func TestSendAfterCloseIsRefused(t *testing.T) {
	h := &scriptedHandler{steps: []string{"ok"}, seen: make(chan string), got: make(chan adapters.Inbound, 1)}
	chat, srv := newChat(t, h)
	b := newBrowser(t, srv)
	chat.Close()
	if resp := b.post("anyone there?", http.Header{"X-Csrf-Token": {b.csrf}}); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("post after Close: %d, want 503", resp.StatusCode)
	}
	select {
	case in := <-h.got:
		t.Fatalf("a turn started after Close: %+v", in)
	default:
	}
}

func TestSendBeforeHandlerIsSet(t *testing.T) {
	chat, srv := newChat(t, nil)
	b := newBrowser(t, srv)
	if resp := b.post("hi", http.Header{"X-Csrf-Token": {b.csrf}}); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("post without a handler: %d, want 503", resp.StatusCode)
	}
	h := &scriptedHandler{steps: []string{"ok"}, seen: make(chan string), got: make(chan adapters.Inbound, 1)}
	chat.SetHandler(h)
	b.send("hi")
	if in := <-h.got; in.Text != "hi" {
		t.Errorf("handler got %+v", in)
	}
}

func TestCommandNamingAnotherBotIsIgnored(t *testing.T) {
	h := &scriptedHandler{steps: []string{"x"}, seen: make(chan string), got: make(chan adapters.Inbound, 4)}
	chat, srv := newChat(t, h)
	b := newBrowser(t, srv)
	b.send("/reset@otherbot")
	b.send("/help")
	chat.Close() // returns once every message handed over has been handled
	close(h.got)
	var got []string
	for in := range h.got {
		got = append(got, in.Command+"|"+in.Text)
	}
	if len(got) != 1 || got[0] != "help|/help" {
		t.Fatalf("the bot was handed %q; /reset@otherbot must not reach it (it reset the conversation)", got)
	}
}

// releasedHandler holds every turn until release is closed, then notes whether its context had
// been cancelled meanwhile. Its channels are buffered for a few turns.
type releasedHandler struct {
	started, release chan struct{}
	cancelled        chan bool
}

func (h releasedHandler) Handle(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	h.started <- struct{}{}
	<-h.release
	h.cancelled <- ctx.Err() != nil
}

// When serving stops, the web chat takes no new message but lets the answer being written
// finish (the pipeline's shutdown decides for how long), like the other platforms.
func TestRunStopsTakingMessagesButLetsRunningTurnsFinish(t *testing.T) {
	h := releasedHandler{started: make(chan struct{}, 8), release: make(chan struct{}), cancelled: make(chan bool, 8)}
	chat, srv := newChat(t, nil)
	ctx, stopReceiving := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- chat.Run(ctx, h) }()
	b := newBrowser(t, srv)
	wait.For(t, "Run to take the handler", func() bool {
		chat.handler.RLock()
		defer chat.handler.RUnlock()
		return chat.handler.h != nil
	})
	b.send("hold on")
	<-h.started

	stopReceiving()
	wait.Until(t, "a new message to be refused", func() error {
		if resp := b.post("anyone there?", http.Header{"X-Csrf-Token": {b.csrf}}); resp.StatusCode != http.StatusServiceUnavailable {
			return fmt.Errorf("post answered %d, want 503", resp.StatusCode)
		}
		return nil
	})
	select {
	case err := <-ran:
		t.Fatalf("Run returned (%v) while a turn was still running: its reply would be cut off", err)
	default:
	}
	close(h.release)
	if <-h.cancelled {
		t.Error("the running turn was cancelled when receiving stopped: its answer would be cut short")
	}
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// A reply still streaming shows a Stop button in the page; what the button posts (/stop)
// reaches the handler as the stop command, and the final text takes the button away.
func TestStreamingReplyShowsAStopButtonUntilTheFinal(t *testing.T) {
	h := &scriptedHandler{steps: []string{"Thinking about a long answer", "A long answer."},
		seen: make(chan string), got: make(chan adapters.Inbound, 2)}
	_, srv := newChat(t, h)
	b := newBrowser(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := b.events(ctx)
	b.send("tell me")
	<-h.got
	nextMsg(t, events, nil) // the user's message
	preview := nextMsg(t, events, nil)
	if preview.Role != "bot" || !preview.Stop {
		t.Fatalf("streaming reply = %+v, want a bot message with a Stop button", preview)
	}
	b.send("/stop") // what the Stop button posts
	if in := <-h.got; in.Command != "stop" {
		t.Errorf("the Stop button reached the handler as %+v, want the stop command", in)
	}
	h.seen <- preview.Text
	for {
		m := nextMsg(t, events, nil)
		if m.ID != preview.ID {
			continue // the /stop the button posted, shown as the user's message
		}
		if m.Text != "A long answer." || m.Stop {
			t.Errorf("final = %+v, want the answer without a Stop button", m)
		}
		break
	}
}
