package web

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"relaybot/adapters"
	"relaybot/chat"
	"relaybot/store"
	"relaybot/store/storetest"
)

// storingHandler answers every message and keeps the turn in the store, as the pipeline does.
type storingHandler struct {
	t      *testing.T
	st     *store.Database
	answer string
	// finished, when set, receives once the turn is stored whole.
	finished chan<- struct{}
}

func (h storingHandler) Handle(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	conv, err := h.st.Conversations.Conversation(ctx, chat.Key{Platform: chat.Web, ChatID: in.Chat.ChatID, UserID: in.UserID})
	if err != nil {
		h.t.Errorf("conversation: %v", err)
		return
	}
	id, err := h.st.Turns.StartTurn(ctx, store.TurnStart{ConversationID: conv.ID, UserMessage: chat.Message{Role: store.RoleUser, Content: in.Text}})
	if err != nil {
		h.t.Errorf("start turn: %v", err)
		return
	}
	out.NewReply(ctx).Finish(ctx, h.answer, nil)
	if err := h.st.Turns.FinishTurn(ctx, store.TurnEnd{TurnID: id, Status: store.TurnOK,
		Messages: []chat.Message{{Role: store.RoleAssistant, Content: h.answer}}}); err != nil {
		h.t.Errorf("finish turn: %v", err)
	}
	if h.finished != nil {
		h.finished <- struct{}{}
	}
}

// pageCSRF loads /chat from the browser's server and returns the page's CSRF token, failing
// when the page is not the browser's chat (the start page of a browser without one).
func (b *browser) pageCSRF(chatID string) string {
	b.t.Helper()
	resp, err := b.client.Get(b.srv.URL + "/chat")
	if err != nil {
		b.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "web:"+chatID) {
		b.t.Fatalf("GET /chat on %s: %d, not the browser's chat %s:\n%s", b.srv.URL, resp.StatusCode, chatID, body)
	}
	m := regexp.MustCompile(`name="csrf-token" content="([^"]+)"`).FindSubmatch(body)
	if m == nil {
		b.t.Fatalf("chat page has no CSRF token: %s", body)
	}
	return string(m[1])
}

// TestABrowserIsRecognisedByEveryReplica runs two web chats (two replicas) on one store: a
// browser that started its chat on the first posts with the first page's CSRF token to the
// second, whose stream shows the answer; a page load on the first then shows that exchange.
func TestABrowserIsRecognisedByEveryReplica(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t, storetest.SQLite)
	finished := make(chan struct{}, 1)
	srvs := twoReplicas(t, func() Options {
		return Options{Handler: storingHandler{t: t, st: st, answer: "**Paris**.", finished: finished}, Sessions: st.WebChat}
	})
	// Cookies are per host, not per port: the browser's cookie goes to both replicas, as it
	// would behind one load balancer.
	b := newBrowser(t, srvs[0])
	m := regexp.MustCompile(`^[0-9a-f]+$`)
	var chatID string
	for _, ck := range b.client.Jar.Cookies(mustURL(t, srvs[0].URL+"/chat")) {
		if ck.Name == chatCookie {
			chatID, _, _ = st.WebChat.WebSession(ctx, hashSecret(ck.Value))
		}
	}
	if !m.MatchString(chatID) {
		t.Fatalf("the browser's chat is not stored (chat id %q)", chatID)
	}
	firstCSRF := b.csrf

	b.srv = srvs[1]
	if got := b.pageCSRF(chatID); got != firstCSRF {
		t.Errorf("the second replica's page carries another CSRF token than the first's: a page served by one is refused by the other")
	}
	// t.Context ends before the servers close, so a failing test does not wait on its streams.
	evctx, cancel := context.WithCancel(t.Context())
	events := b.events(evctx)
	b.send("what is the capital of France?") // with the first replica's token
	if m := nextMsg(t, events, nil); m.Role != "user" || m.Text != "what is the capital of France?" {
		t.Errorf("the second replica's stream shows %+v, want the user's message", m)
	}
	if m := nextMsg(t, events, nil); m.Role != "bot" || m.Text != "**Paris**." {
		t.Errorf("then %+v, want the answer", m)
	}
	cancel()
	// The answer is shown before its turn is stored; a page loaded elsewhere shows what is stored.
	<-finished

	b.srv = srvs[0]
	b.pageCSRF(chatID)
	events = b.events(t.Context())
	if m := nextMsg(t, events, nil); m.Role != "user" || m.Text != "what is the capital of France?" {
		t.Errorf("a page load on the first replica shows %+v first, want the message sent through the second", m)
	}
	if m := nextMsg(t, events, nil); m.Role != "bot" || m.Text != "**Paris**." {
		t.Errorf("then %+v, want the answer the second replica gave", m)
	}
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
