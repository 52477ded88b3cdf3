package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/web"
)

// handlerFunc is a function that is an adapters.Handler.
type handlerFunc func(ctx context.Context, in adapters.Inbound, out adapters.Responder)

// Handle implements adapters.Handler.
func (f handlerFunc) Handle(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	f(ctx, in, out)
}

// webPage is a browser's page of the web chat: it holds the chat's cookie and reads its event
// stream, remembering when each event with the bot's text arrived.
type webPage struct {
	srv    *httptest.Server
	client *http.Client
	csrf   string
	stop   context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	times  []time.Time // events that showed the bot's text, as the page read them
	events int
	last   string // the bot's text in the newest event
}

// newWebTarget is a reply of the web chat to a message a page sent, streamed into the page's
// event stream on loopback.
func newWebTarget(ctx context.Context) (*streamTarget, error) {
	replies := make(chan adapters.Reply, 1)
	finished := make(chan struct{})
	c, err := web.New(web.Options{Handler: handlerFunc(func(hctx context.Context, _ adapters.Inbound, out adapters.Responder) {
		replies <- out.NewReply(hctx)
		select { // the turn lasts until the answer is delivered, as the pipeline's does
		case <-finished:
		case <-hctx.Done():
		}
	})})
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(c.Handler())
	page, err := openWebPage(ctx, srv)
	if err != nil {
		srv.Close()
		c.Close()
		return nil, err
	}
	closeAll := func() {
		page.stop()
		<-page.done
		srv.Close()
		c.Close()
	}
	if err := page.send("write"); err != nil {
		close(finished)
		closeAll()
		return nil, err
	}
	var reply adapters.Reply
	select {
	case reply = <-replies:
	case <-time.After(10 * time.Second):
		close(finished)
		closeAll()
		return nil, errors.New("web chat: the message reached no handler")
	}
	return &streamTarget{
		reply: reply,
		visible: func(final string) ([]time.Time, int, int) {
			// The stream is read on its own goroutine: wait until the page has read the final
			// text.
			page.waitFor(func(p *webPage) bool { return strings.TrimSpace(p.last) == strings.TrimSpace(final) })
			page.mu.Lock()
			defer page.mu.Unlock()
			return append([]time.Time(nil), page.times...), page.events, 0
		},
		messages: func() int { return 1 },
		close: func() {
			close(finished)
			closeAll()
		},
	}, nil
}

var csrfMeta = regexp.MustCompile(`name="csrf-token" content="([^"]+)"`)

// openWebPage does what the chat's page does when opened: starts a chat, reads its CSRF token
// and opens the event stream.
func openWebPage(ctx context.Context, srv *httptest.Server) (*webPage, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	p := &webPage{srv: srv, client: &http.Client{Jar: jar}, done: make(chan struct{})}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/chat/session", nil)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("web chat session: %w", err)
	}
	resp.Body.Close()
	resp, err = p.client.Get(srv.URL + "/chat")
	if err != nil {
		return nil, fmt.Errorf("web chat page: %w", err)
	}
	var b strings.Builder
	_, err = bufio.NewReader(resp.Body).WriteTo(&b)
	resp.Body.Close()
	m := csrfMeta.FindStringSubmatch(b.String())
	if err != nil || m == nil {
		return nil, fmt.Errorf("web chat page: no CSRF token (%v)", err)
	}
	p.csrf = m[1]
	sctx, stop := context.WithCancel(ctx)
	p.stop = stop
	req, _ = http.NewRequestWithContext(sctx, http.MethodGet, srv.URL+"/chat/events", nil)
	resp, err = p.client.Do(req)
	if err != nil {
		stop()
		return nil, fmt.Errorf("web chat events: %w", err)
	}
	go p.read(resp)
	return p, nil
}

// read takes the event stream's msg events until it ends.
func (p *webPage) read(resp *http.Response) {
	defer close(p.done)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && name == "msg":
			var m struct{ Role, Text string }
			if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m) == nil && m.Role == "bot" && strings.TrimSpace(m.Text) != "" {
				now := time.Now()
				p.mu.Lock()
				p.times = append(p.times, now)
				p.events++
				p.last = m.Text
				p.mu.Unlock()
			}
		}
	}
}

// waitFor waits, up to 10 s, until ok holds of the page.
func (p *webPage) waitFor(ok func(*webPage) bool) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		p.mu.Lock()
		done := ok(p)
		p.mu.Unlock()
		if done {
			return
		}
	}
}

// send posts a message as the page's form does.
func (p *webPage) send(text string) error {
	req, _ := http.NewRequest(http.MethodPost, p.srv.URL+"/chat/send", strings.NewReader(url.Values{"text": {text}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Csrf-Token", p.csrf)
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("web chat send: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("web chat send: status %d", resp.StatusCode)
	}
	return nil
}
