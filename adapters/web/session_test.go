package web

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"relaybot/adapters"
)

// crossSite sends what another site's page makes a browser send: no cookie of ours (SameSite=
// Strict) and the browser's fetch metadata.
func crossSite(t *testing.T, method, url string, header http.Header) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// chatWorks sends a message as b and waits for the bot's answer in b's event stream.
func chatWorks(t *testing.T, b *browser, h *scriptedHandler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := b.events(ctx)
	b.send("still there?")
	<-h.got
	if m := nextMsg(t, events, nil); m.Role != "user" || m.Text != "still there?" {
		t.Fatalf("first event = %+v, want the user's message", m)
	}
	if m := nextMsg(t, events, nil); m.Role != "bot" || m.Text != "yes" {
		t.Fatalf("then %+v, want the bot's answer", m)
	}
}

func TestCrossSiteRequestsCannotEndARealChat(t *testing.T) {
	h := &scriptedHandler{steps: []string{"yes"}, got: make(chan adapters.Inbound, 1)}
	chat, srv := newChat(t, h)
	real := newBrowser(t, srv)

	// A page full of <img src="http://127.0.0.1:8080/chat"> tags: 260 GETs, more than the cap.
	img := http.Header{"Sec-Fetch-Site": {"cross-site"}, "Sec-Fetch-Mode": {"no-cors"}, "Sec-Fetch-Dest": {"image"}}
	for i := range maxConversations + 4 {
		resp := crossSite(t, http.MethodGet, srv.URL+"/chat", img)
		if len(resp.Cookies()) != 0 {
			t.Fatalf("cross-site GET %d was given a chat cookie %v: a GET must not start a chat", i, resp.Cookies())
		}
	}
	// Forms posted from another site to the start endpoint are refused, with or without fetch
	// metadata.
	for _, hdr := range []http.Header{
		{"Sec-Fetch-Site": {"cross-site"}, "Sec-Fetch-Mode": {"navigate"}},
		{"Origin": {"https://evil.example"}},
	} {
		resp := crossSite(t, http.MethodPost, srv.URL+"/chat/session", hdr)
		if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Errorf("cross-site POST /chat/session with %v: %d, cookies %v; want 403 and no chat", hdr, resp.StatusCode, resp.Cookies())
		}
	}
	chat.mu.Lock()
	n := len(chat.secrets)
	chat.mu.Unlock()
	if n != 1 {
		t.Errorf("after the cross-site requests the chat holds %d conversations, want only the real one", n)
	}
	chatWorks(t, real, h)
}

func TestAnOpenChatIsNeverDroppedForNewOnes(t *testing.T) {
	h := &scriptedHandler{steps: []string{"yes"}, got: make(chan adapters.Inbound, 1)}
	_, srv := newChat(t, h)
	real := newBrowser(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	real.events(ctx) // the page is open

	// Other browsers (same origin) start more chats than the cap allows: closed ones make room.
	for i := range maxConversations + 44 {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/chat/session", nil)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("chat %d: %d, want 204 (chats without an open page make room)", i, resp.StatusCode)
		}
	}
	cancel()
	chatWorks(t, real, h)

	// Starting again with a live cookie keeps the conversation (a second tab, a double click).
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/chat/session", nil)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := real.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(resp.Cookies()) != 0 {
		t.Errorf("POST /chat/session with a live chat set %v, want the chat kept", resp.Cookies())
	}
	page, _ := real.client.Get(srv.URL + "/chat")
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if !strings.Contains(string(body), real.csrf) {
		t.Error("the page no longer belongs to the browser's chat")
	}
}
