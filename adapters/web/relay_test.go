package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"relaybot/adapters"
	"relaybot/adapters/adapterstest"
	"relaybot/store/storetest"
)

// relayHub joins the Relays of web chats in one test, as coord.WebRelay joins replicas: an
// event reaches the other chats with a page of its chat open, in order.
type relayHub struct {
	mu     sync.Mutex
	relays []*hubRelay
}

type hubRelay struct {
	hub      *relayHub
	watching map[string]int // under hub.mu
	in       chan hubEvent
}

type hubEvent struct {
	chat  string
	event []byte
}

func (h *relayHub) relay() *hubRelay {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := &hubRelay{hub: h, watching: map[string]int{}, in: make(chan hubEvent, 1024)}
	h.relays = append(h.relays, r)
	return r
}

// send hands event to the other relays that want it.
func (r *hubRelay) send(chatID string, event []byte, want func(*hubRelay) bool) {
	r.hub.mu.Lock()
	defer r.hub.mu.Unlock()
	for _, o := range r.hub.relays {
		if o != r && want(o) {
			o.in <- hubEvent{chatID, event}
		}
	}
}

func (r *hubRelay) Watch(_ context.Context, chatID string) (func(), error) {
	r.hub.mu.Lock()
	r.watching[chatID]++
	first := r.watching[chatID] == 1
	r.hub.mu.Unlock()
	if first {
		r.send(chatID, nil, func(*hubRelay) bool { return true })
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			r.hub.mu.Lock()
			r.watching[chatID]--
			r.hub.mu.Unlock()
		})
	}, nil
}

func (r *hubRelay) Publish(_ context.Context, chatID string, event []byte) error {
	r.send(chatID, event, func(o *hubRelay) bool { return o.watching[chatID] > 0 })
	return nil
}

func (r *hubRelay) Listen(ctx context.Context, fn func(string, []byte)) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-r.in:
			fn(ev.chat, ev.event)
		}
	}
}

// askingHandler asks for approval before it answers.
type askingHandler struct{ t *testing.T }

func (h askingHandler) Handle(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	if in.Placed != nil {
		in.Placed() // as the pipeline says once the message has its place, before it asks
	}
	asker, ok := out.(adapters.Asker)
	if !ok {
		h.t.Error("the web chat's responder cannot ask")
		return
	}
	q := adapters.Question{Text: "Run echo?", Choices: []adapters.Choice{{ID: "yes", Label: "Approve"}, {ID: "no", Label: "Deny"}}}
	ans, err := asker.Ask(ctx, q, func(a adapters.Answer) (bool, string) {
		return a.UserID == in.UserID, "Run echo? Approved by " + a.UserName
	})
	if err != nil {
		h.t.Errorf("ask: %v", err)
		return
	}
	out.NewReply(ctx).Finish(ctx, "Ran echo: "+ans.Choice, nil)
}

// TestAnApprovalAskedOnOneReplicaIsAnsweredFromAPageOnAnother runs two web chats (two replicas)
// joined by a relay and a question book: a browser whose page is on the first posts to the
// second, whose turn asks for approval; the page shows the question, its press through the
// first is carried to the second, which settles it (the first answers the press with the
// verdict), and the page shows the decision and the answer.
func TestAnApprovalAskedOnOneReplicaIsAnsweredFromAPageOnAnother(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	hub, book := &relayHub{}, &adapterstest.Book{}
	srvs := twoReplicas(t, func() Options {
		return Options{Handler: askingHandler{t: t}, Sessions: st.WebChat, Relay: hub.relay(), Questions: book}
	})
	b := newBrowser(t, srvs[0])
	events := b.events(t.Context())
	b.srv = srvs[1]
	b.send("echo hello")
	if m := nextMsg(t, events, nil); m.Role != "user" || m.Text != "echo hello" {
		t.Fatalf("the page shows %+v, want the message posted through the other replica", m)
	}
	q := nextMsg(t, events, nil)
	if q.Question == "" || len(q.Choices) != 2 {
		t.Fatalf("the page shows %+v, want the other replica's question with its buttons", q)
	}

	b.srv = srvs[0]
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/chat/answer", strings.NewReader(url.Values{"q": {q.Question}, "choice": {"yes"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Csrf-Token", b.csrf)
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("press through the page's replica: %s, want it taken (204)", resp.Status)
	}
	if m := nextMsg(t, events, nil); m.ID != q.ID || len(m.Choices) != 0 || m.Text != "Run echo? Approved by web" {
		t.Errorf("then the page shows %+v, want the question settled by the press", m)
	}
	if m := nextMsg(t, events, nil); m.Role != "bot" || m.Text != "Ran echo: yes" {
		t.Errorf("then %+v, want the answer of the turn the press let go on", m)
	}
}
