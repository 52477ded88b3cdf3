package telegram

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/internal/testkit/memnet"
	tk "relaybot/internal/testkit/telegram"
)

// startWebhook runs an adapter in webhook mode with the given limits, in memory (call it in a
// testing/synctest bubble), and returns the listener its server serves.
func startWebhook(t *testing.T, lim WebhookLimits) *memnet.Listener {
	t.Helper()
	e, hook := newWebhookEnv(t, func(o *Options) { o.Webhook = lim })
	stop := startRun(t, e.ad, newCollector())
	t.Cleanup(stop)
	return hook
}

// newWebhookEnv is newEnv with an adapter in webhook mode, its secret "s3cret", and mod's
// changes to its options, all in memory: call it in a testing/synctest bubble, where every
// timeout acts on the bubble's clock. Telegram (the test server) and the test's own clients
// reach the webhook through the returned listener.
func newWebhookEnv(t *testing.T, mod func(*Options)) (*env, *memnet.Listener) {
	t.Helper()
	hook := memnet.Listen("127.0.0.1:8443")
	e := newEnv(t, tk.Options{InMemory: true, WebhookDial: hook.Dial}, func(o *Options) {
		o.Mode = "webhook"
		o.WebhookListen = hook.Addr().String()
		o.WebhookListener = hook
		o.WebhookURL = "http://" + hook.Addr().String() + "/tg"
		o.WebhookSecret = "s3cret"
		if mod != nil {
			mod(o)
		}
	})
	return e, hook
}

// dialWebhook connects to the webhook server, waiting while it is still starting.
func dialWebhook(t *testing.T, hook *memnet.Listener) net.Conn {
	t.Helper()
	c, err := hook.Dial(t.Context(), "tcp", hook.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// hookClient is an HTTP client that reaches the webhook server through hook.
func hookClient(t *testing.T, hook *memnet.Listener) *http.Client {
	tr := &http.Transport{DialContext: hook.Dial}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// request is a raw HTTP/1.1 request to the webhook path.
func request(secret, body string, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "POST /tg HTTP/1.1\r\nHost: bot\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	if secret != "" {
		fmt.Fprintf(&b, "X-Telegram-Bot-Api-Secret-Token: %s\r\n", secret)
	}
	for _, h := range extra {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n" + body)
	return b.String()
}

// readStatus reads one response from c and returns its status code.
func readStatus(t *testing.T, c net.Conn, r *bufio.Reader) int {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("no answer from the webhook: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestWebhookCutsIdleAndStalledClients runs each client in a synctest bubble: the server's
// 200-400 ms timeouts act on the bubble's clock, so no real deadline races a busy machine.
func TestWebhookCutsIdleAndStalledClients(t *testing.T) {
	lim := WebhookLimits{
		ReadHeaderTimeout: 200 * time.Millisecond,
		ReadTimeout:       400 * time.Millisecond,
		WriteTimeout:      2 * time.Second,
		IdleTimeout:       200 * time.Millisecond,
	}
	update := `{"update_id":1,"message":{"message_id":1,"from":{"id":9,"first_name":"X"},"chat":{"id":70,"type":"private"},"date":1,"text":"hi"}}`
	tests := []struct {
		name string
		send string // what the client sends before it goes quiet
	}{
		{"idle keep-alive connection after a refused request", request("", "{}")},
		{"idle keep-alive connection after an update", request("s3cret", update)},
		{"connection that never sends a request", ""},
		{"headers never finished", "POST /tg HTTP/1.1\r\nHost: bot\r\n"},
		{"body never finished", request("s3cret", update)[:len(request("s3cret", update))-10]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := dialWebhook(t, startWebhook(t, lim))
				go io.WriteString(c, tt.send) // a pipe holds no bytes: the server reads them as it goes
				// Whatever the server answers, it must then close the connection; a generous
				// deadline tells "closed" from "held open for ever".
				c.SetReadDeadline(time.Now().Add(20 * time.Second))
				_, err := io.Copy(io.Discard, c)
				if errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatal("the webhook server still held the connection open after 20 s: idle clients pile up")
				}
			})
		})
	}
}

func TestWebhookCapsHeaderAndBodySizes(t *testing.T) {
	big := `{"update_id":2,"message":{"message_id":2,"from":{"id":9,"first_name":"X"},"chat":{"id":70,"type":"private"},"date":1,"text":"` +
		strings.Repeat("a", 8<<10) + `"}}`
	tests := []struct {
		name string
		req  string
		want int
	}{
		{"headers over the cap", request("s3cret", "{}", "X-Pad: "+strings.Repeat("p", 64<<10)), http.StatusRequestHeaderFieldsTooLarge},
		{"update over the cap", request("s3cret", big), http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := dialWebhook(t, startWebhook(t, WebhookLimits{MaxHeaderBytes: 1 << 10, MaxBodyBytes: 1 << 10}))
				// The server answers before it reads everything: the rest of the write fails
				// when it closes the connection.
				go io.WriteString(c, tt.req)
				if got := readStatus(t, c, bufio.NewReader(c)); got != tt.want {
					t.Fatalf("answered %d, want %d", got, tt.want)
				}
			})
		})
	}
}

// TestWebhookCapsConcurrentConnections runs in a synctest bubble: "not served within 300 ms"
// is 300 ms of the bubble's clock, during which everything else that could run has run.
func TestWebhookCapsConcurrentConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hook := startWebhook(t, WebhookLimits{MaxConns: 2})
		// Two clients hold the two connections (answered, then kept alive).
		var held []net.Conn
		for range 2 {
			c := dialWebhook(t, hook)
			if _, err := io.WriteString(c, request("", "{}")); err != nil {
				t.Fatal(err)
			}
			if got := readStatus(t, c, bufio.NewReader(c)); got != http.StatusForbidden {
				t.Fatalf("forged request answered %d", got)
			}
			held = append(held, c)
		}
		third := dialWebhook(t, hook)
		go io.WriteString(third, request("", "{}")) // read once the server accepts the connection
		r := bufio.NewReader(third)
		third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := r.Peek(1); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a third connection was served while two were open (err %v): connections are not capped", err)
		}
		held[0].Close()
		if got := readStatus(t, third, r); got != http.StatusForbidden {
			t.Fatalf("the waiting connection was answered %d once a slot freed", got)
		}
	})
}
