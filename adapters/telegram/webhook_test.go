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
	"time"

	tk "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
)

// startWebhook runs an adapter in webhook mode with the given limits and returns the address
// its server listens on.
func startWebhook(t *testing.T, lim WebhookLimits) string {
	t.Helper()
	e, addr := newWebhookEnv(t, func(o *Options) { o.Webhook = lim })
	stop := startRun(t, e.ad, newCollector())
	t.Cleanup(stop)
	return addr
}

// newWebhookEnv is newEnv with an adapter in webhook mode on a free loopback address (returned),
// its secret "s3cret", and mod's changes to its options.
func newWebhookEnv(t *testing.T, mod func(*Options)) (*env, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	e := newEnv(t, tk.Options{}, func(o *Options) {
		o.Mode = "webhook"
		o.WebhookListen = addr
		o.WebhookURL = "http://" + addr + "/tg"
		o.WebhookSecret = "s3cret"
		if mod != nil {
			mod(o)
		}
	})
	return e, addr
}

// dialWebhook connects to addr, retrying while the server is still starting.
func dialWebhook(t *testing.T, addr string) net.Conn {
	t.Helper()
	var c net.Conn
	wait.For(t, "the webhook server to listen", func() bool {
		var err error
		c, err = net.Dial("tcp", addr)
		return err == nil
	})
	t.Cleanup(func() { c.Close() })
	return c
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

func TestWebhookCutsIdleAndStalledClients(t *testing.T) {
	addr := startWebhook(t, WebhookLimits{
		ReadHeaderTimeout: 200 * time.Millisecond,
		ReadTimeout:       400 * time.Millisecond,
		WriteTimeout:      2 * time.Second,
		IdleTimeout:       200 * time.Millisecond,
	})
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
			c := dialWebhook(t, addr)
			if _, err := io.WriteString(c, tt.send); err != nil {
				t.Fatal(err)
			}
			// Whatever the server answers, it must then close the connection; a generous
			// deadline tells "closed" from "held open for ever".
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, err := io.Copy(io.Discard, c)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the webhook server still held the connection open after 20 s: idle clients pile up")
			}
		})
	}
}

func TestWebhookCapsHeaderAndBodySizes(t *testing.T) {
	addr := startWebhook(t, WebhookLimits{MaxHeaderBytes: 1 << 10, MaxBodyBytes: 1 << 10})
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
			c := dialWebhook(t, addr)
			if _, err := io.WriteString(c, tt.req); err != nil {
				t.Fatal(err)
			}
			if got := readStatus(t, c, bufio.NewReader(c)); got != tt.want {
				t.Fatalf("answered %d, want %d", got, tt.want)
			}
		})
	}
}

func TestWebhookCapsConcurrentConnections(t *testing.T) {
	addr := startWebhook(t, WebhookLimits{MaxConns: 2})
	// Two clients hold the two connections (answered, then kept alive).
	var held []net.Conn
	for range 2 {
		c := dialWebhook(t, addr)
		if _, err := io.WriteString(c, request("", "{}")); err != nil {
			t.Fatal(err)
		}
		if got := readStatus(t, c, bufio.NewReader(c)); got != http.StatusForbidden {
			t.Fatalf("forged request answered %d", got)
		}
		held = append(held, c)
	}
	third := dialWebhook(t, addr)
	if _, err := io.WriteString(third, request("", "{}")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(third)
	third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := r.Peek(1); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a third connection was served while two were open (err %v): connections are not capped", err)
	}
	held[0].Close()
	if got := readStatus(t, third, r); got != http.StatusForbidden {
		t.Fatalf("the waiting connection was answered %d once a slot freed", got)
	}
}
