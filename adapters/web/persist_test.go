package web

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"relaybot/chat"
	"relaybot/store/storetest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"relaybot/adapters"
	"relaybot/internal/testkit/wait"
	"relaybot/store"
)

// storedTurn saves a round of the browser's chat as the pipeline would.
func storedTurn(t *testing.T, st *store.Database, chatID, user, answer string) {
	t.Helper()
	ctx := context.Background()
	conv, err := st.Conversations.Conversation(ctx, chat.Key{Platform: chat.Web, ChatID: chatID, UserID: chatID})
	if err != nil {
		t.Fatal(err)
	}
	id, err := st.Turns.StartTurn(ctx, store.TurnStart{ConversationID: conv.ID, UserMessage: chat.Message{Role: store.RoleUser, Content: user}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Turns.FinishTurn(ctx, store.TurnEnd{TurnID: id, Status: store.TurnOK, Messages: []chat.Message{
		{Role: store.RoleAssistant, Content: "", ToolCalls: []chat.ToolCall{{ID: "c1", Name: "search", Arguments: "{}"}}},
		{Role: store.RoleTool, ToolCallID: "c1", Name: "search", Content: "tool output the user never saw"},
		{Role: store.RoleAssistant, Content: answer},
	}}); err != nil {
		t.Fatal(err)
	}
}

func (b *browser) getJSON(path string, v any) int {
	b.t.Helper()
	resp, err := b.client.Get(b.srv.URL + path)
	if err != nil {
		b.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			b.t.Fatalf("GET %s: %v", path, err)
		}
	} else {
		io.Copy(io.Discard, resp.Body)
	}
	return resp.StatusCode
}

// chatID reads the browser's chat id from its page.
func (b *browser) chatID() string {
	b.t.Helper()
	resp, err := b.client.Get(b.srv.URL + "/chat")
	if err != nil {
		b.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`>web:([0-9a-f]+)<`).FindSubmatch(body)
	if m == nil {
		b.t.Fatalf("no chat id on the page: %s", body)
	}
	return string(m[1])
}

func TestWebChatKeepsItsConversationAcrossARestartAndListsEarlierOnes(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t, storetest.SQLite)
	// One handler serves both processes: the listener below moves from the first to the second.
	h := &scriptedHandler{steps: []string{"yes"}, got: make(chan adapters.Inbound, 4)}
	first, err := New(Options{Handler: h, Sessions: st.WebChat})
	if err != nil {
		t.Fatal(err)
	}
	mux := &switchHandler{h: first.Handler()}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	b := newBrowser(t, srv)
	// A chat whose turns were stored before the web chat kept what it showed: after the restart
	// it is read back from the conversation's messages.
	chatID := b.chatID()
	storedTurn(t, st, chatID, "what is the capital of France?", "**Paris**.")

	// The server restarts: a new Chat with the same store; the browser keeps its cookie.
	first.Close()
	second, err := New(Options{Handler: h, Sessions: st.WebChat})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Close() })
	mux.set(second.Handler())

	resp, err := b.client.Get(srv.URL + "/chat")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "web:"+chatID) {
		t.Fatalf("after the restart the page is not the browser's chat %s:\n%s", chatID, body)
	}
	b.csrf = string(regexp.MustCompile(`name="csrf-token" content="([^"]+)"`).FindSubmatch(body)[1])
	evctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := b.events(evctx)
	if m := nextMsg(t, events, nil); m.Role != "user" || m.Text != "what is the capital of France?" {
		t.Errorf("first message after the restart: %+v", m)
	}
	if m := nextMsg(t, events, nil); m.Role != "bot" || m.Text != "**Paris**." || !strings.Contains(m.HTML, "<strong>Paris</strong>") {
		t.Errorf("then: %+v, want the bot's answer, rendered (and no tool output)", m)
	}
	b.send("still there?")
	if in := <-h.got; in.Chat.ChatID != chatID {
		t.Errorf("after the restart messages go to chat %s, want %s", in.Chat.ChatID, chatID)
	}

	// A reset closes the conversation; the browser lists it and reads it back.
	if _, err := st.Conversations.ResetConversation(ctx, chat.Key{Platform: "web", ChatID: chatID, UserID: chatID}); err != nil {
		t.Fatal(err)
	}
	var list []earlierConversation
	if code := b.getJSON("/chat/conversations", &list); code != http.StatusOK || len(list) != 2 || !list[0].Active || list[1].Active || list[1].Preview != "what is the capital of France?" {
		t.Fatalf("GET /chat/conversations: %d %+v", code, list)
	}
	var msgs []eventMessage
	if code := b.getJSON("/chat/conversations/"+itoa(list[1].ID), &msgs); code != http.StatusOK || len(msgs) != 2 || msgs[1].Text != "**Paris**." {
		t.Errorf("GET the earlier conversation: %d %+v", code, msgs)
	}
	other := newBrowser(t, srv)
	if code := other.getJSON("/chat/conversations/"+itoa(list[1].ID), &msgs); code != http.StatusNotFound {
		t.Errorf("another browser read this browser's conversation: status %d, want 404", code)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// switchHandler serves with the handler set last: the same listener across a "restart".
type switchHandler struct {
	mu sync.Mutex
	h  http.Handler
}

func (s *switchHandler) set(h http.Handler) {
	s.mu.Lock()
	s.h = h
	s.mu.Unlock()
}

func (s *switchHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.h
	s.mu.Unlock()
	h.ServeHTTP(w, r)
}

// keptHandler plays the pipeline for TestWhatThePageShowedComesBackAfterACrash: "ask" streams a
// tool's line, asks a question while it streams and answers once approved; "file" answers with
// a picture; "pending" asks a question nobody answers.
type keptHandler struct {
	seen chan struct{}
	got  chan adapters.Inbound
}

func (h keptHandler) Handle(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	h.got <- in
	ask := func(text string) (adapters.Answer, error) {
		return out.(adapters.Asker).Ask(ctx, adapters.Question{Text: text, Choices: []adapters.Choice{{ID: "approve", Label: "Approve"}}},
			func(a adapters.Answer) (bool, string) { return true, text + "\n\nApproved." })
	}
	switch in.Text {
	case "ask":
		reply := out.NewReply(ctx)
		reply.Update("⏳ echo")
		select {
		case <-h.seen:
		case <-ctx.Done():
			return
		}
		if _, err := ask("Run echo?"); err != nil {
			return
		}
		reply.Finish(ctx, "✓ echo\n\ntool said: **hi**", nil)
	case "file":
		out.NewReply(ctx).Finish(ctx, "a picture", []chat.File{{Name: "dot.png", MIME: "image/png", Data: []byte("\x89PNG dot")}})
	case "pending":
		ask("Run rm?")
	}
}

// shownNow is what conv shows, message by message in the page's order.
func shownNow(conv *conversation) []string {
	conv.mu.Lock()
	defer conv.mu.Unlock()
	msgs := slices.Clone(conv.msgs)
	slices.SortStableFunc(msgs, func(a, b *message) int { return cmp.Compare(a.Pos, b.Pos) })
	var out []string
	for _, m := range msgs {
		e := toEvent(m)
		out = append(out, fmt.Sprintf("%s %s %q html=%q files=%d", e.ID, e.Role, e.Text, e.HTML, len(e.Files)))
	}
	return out
}

// The process dies (no Close) with a question open: the next one shows every message as the page
// showed it, by the same ids and in the same order (the question above the answer it held up),
// the picture with its bytes, and the open question closed; the Stop button left no message.
func TestWhatThePageShowedComesBackAfterACrash(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t, storetest.SQLite)
	h := keptHandler{seen: make(chan struct{}), got: make(chan adapters.Inbound, 8)}
	first, err := New(Options{Handler: h, Sessions: st.WebChat})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Close() })
	mux := &switchHandler{h: first.Handler()}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	b := newBrowser(t, srv)
	chatID := b.chatID()
	conv := first.byID(chatID)
	find := func(what string, ok func(*message) bool) *message {
		t.Helper()
		var found *message
		wait.For(t, what, func() bool {
			conv.mu.Lock()
			defer conv.mu.Unlock()
			for _, m := range conv.msgs {
				if ok(m) {
					found = m
					return true
				}
			}
			return false
		})
		return found
	}

	b.send("ask")
	<-h.got
	find("the tool's line streaming", func(m *message) bool { return m.Stop && m.Text == "⏳ echo" })
	h.seen <- struct{}{}
	q := find("the question", func(m *message) bool { return len(m.Choices) > 0 })
	if code := b.postForm("/chat/answer", url.Values{"q": {q.Question}, "choice": {"approve"}}); code != http.StatusNoContent {
		t.Fatalf("approve: %d", code)
	}
	find("the answer", func(m *message) bool { return !m.Stop && strings.Contains(m.Text, "tool said") })
	b.send("file")
	<-h.got
	find("the picture", func(m *message) bool { return len(m.Files) == 1 })
	if code := b.postForm("/chat/stop", url.Values{}); code != http.StatusAccepted {
		t.Fatalf("the Stop button: %d", code)
	}
	if in := <-h.got; in.Command != "stop" || in.Text != "" {
		t.Fatalf("the Stop button reached the pipeline as %+v, want the stop command", in)
	}
	b.send("pending")
	<-h.got
	find("the open question", func(m *message) bool { return len(m.Choices) > 0 && m.Text == "Run rm?" })
	before := shownNow(conv)
	wait.For(t, "the open question kept", func() bool {
		lines, err := st.WebChat.WebMessages(ctx, chatID, 0)
		return err == nil && len(lines) == len(before) && lines[len(lines)-1].Asking
	})

	// The first process is gone without a word; the browser reaches a new one.
	second, err := New(Options{Handler: h, Sessions: st.WebChat})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Close() })
	mux.set(second.Handler())
	b.chatID()
	after := shownNow(second.byID(chatID))

	want := slices.Clone(before)
	want[len(want)-1] = strings.Replace(want[len(want)-1], `"Run rm?"`, strconv.Quote("Run rm?"+adapters.ClosedText), 1)
	if strings.Join(after, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after the crash the chat shows:\n%s\nwant:\n%s", strings.Join(after, "\n"), strings.Join(want, "\n"))
	}
	for _, s := range after {
		if strings.Contains(s, "/stop") {
			t.Errorf("the Stop button left a message: %s", s)
		}
	}
	qi := slices.IndexFunc(after, func(s string) bool { return strings.Contains(s, "Run echo?") })
	ai := slices.IndexFunc(after, func(s string) bool { return strings.Contains(s, "tool said") })
	if qi < 0 || ai < qi {
		t.Errorf("the question is at %d and the answer it held up at %d, want the question first", qi, ai)
	}
	pic := withFiles(t, second.byID(chatID))
	resp, err := b.client.Get(srv.URL + "/chat/files/" + pic + "/0")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(data) != "\x89PNG dot" {
		t.Errorf("the picture %s after the crash: %d %q\n%s", pic, resp.StatusCode, data, strings.Join(after, "\n"))
	}
}

// withFiles returns the id of conv's message with files.
func withFiles(t *testing.T, conv *conversation) string {
	t.Helper()
	conv.mu.Lock()
	defer conv.mu.Unlock()
	for _, m := range conv.msgs {
		if len(m.Files) > 0 {
			return m.ID
		}
	}
	t.Fatal("no message with files")
	return ""
}

// postForm posts form (with the page's CSRF token) to path and returns the status.
func (b *browser) postForm(path string, form url.Values) int {
	b.t.Helper()
	form.Set("csrf", b.csrf)
	resp, err := b.client.PostForm(b.srv.URL+path, form)
	if err != nil {
		b.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
