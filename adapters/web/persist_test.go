package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"relaybot/chat"
	"relaybot/store/storetest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"relaybot/adapters"
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
