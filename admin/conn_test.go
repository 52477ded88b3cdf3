package admin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"relaybot/internal/testkit/memnet"
	"relaybot/store/storetest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// shortLimits are timeouts short enough for a test to watch them act, and small size caps.
func shortLimits(o *Options) {
	o.ReadHeaderTimeout = 300 * time.Millisecond
	o.ReadTimeout = 500 * time.Millisecond
	o.WriteTimeout = 500 * time.Millisecond
	o.IdleTimeout = 300 * time.Millisecond
	o.MaxHeaderBytes = 4 << 10
	o.MaxBodyBytes = 2 << 10
}

// serveInMemory runs the admin server on a memnet listener until the test ends, for a test in a
// testing/synctest bubble: its timeouts act on the bubble's clock, so a test watches them act
// without waiting for them. Clients connect with the listener's Dial.
func serveInMemory(t *testing.T, opts Options) *memnet.Listener {
	t.Helper()
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln := memnet.Listen("admin.test:80")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln
}

// shortLimitsOptions are the options of an admin server with shortLimits, its login token and
// web chat.
func shortLimitsOptions(t *testing.T, token string, chat http.Handler) Options {
	o := Options{Listen: "127.0.0.1:0", Token: token, Store: storeOf(storetest.Open(t, storetest.SQLite)), WebChat: chat, Logger: slog.New(slog.DiscardHandler)}
	shortLimits(&o)
	return o
}

// closedWithin reads from conn until the server closes it and returns what the server sent; it
// fails the test if the connection is still open after a generous deadline.
func closedWithin(t *testing.T, conn net.Conn, what string) string {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(conn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: the connection is still open after 20 s (the server never cut it); it sent %q", what, got)
	}
	return string(got)
}

func TestSlowAndIdleClientsAreCut(t *testing.T) {
	const login = "POST /admin/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
	tests := []struct {
		name string
		send string // sent at once
		drip string // then sent a byte at a time, every 50 ms, until the server hangs up
		want string // the server's answer starts with this ("" when it just hangs up)
	}{
		{name: "stalls in the middle of its headers", send: "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "},
		{name: "trickles its headers forever", send: "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n", drip: strings.Repeat("X-Drip: y\r\n", 400)},
		{name: "stalls in the middle of a login body", send: login + "Content-Length: 100\r\n\r\ntoken=abc"},
		{name: "trickles a login body", send: login + "Content-Length: 2000\r\n\r\n", drip: "token=" + strings.Repeat("a", 1994)},
		{name: "keeps an idle keep-alive connection", send: "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", want: "HTTP/1.1 200 OK"},
		{name: "sends headers over the cap", send: "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + strings.Repeat("a", 16<<10) + "\r\n\r\n", want: "HTTP/1.1 431"},
		{name: "announces a body over the cap", send: login + "Content-Length: 4096\r\n\r\n", want: "HTTP/1.1 413"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ln := serveInMemory(t, shortLimitsOptions(t, testToken, nil))
				conn, err := ln.Dial(t.Context(), "tcp", "admin.test:80")
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				// The client writes on its own goroutine: a pipe holds no bytes, and a server
				// that answers before reading everything (431, 413) leaves the write blocked
				// until it closes the connection.
				stop := make(chan struct{})
				defer close(stop)
				go func() {
					if _, err := io.WriteString(conn, tc.send); err != nil {
						return
					}
					tick := time.NewTicker(50 * time.Millisecond)
					defer tick.Stop()
					for i := range len(tc.drip) {
						select {
						case <-stop:
							return
						case <-tick.C:
						}
						if _, err := conn.Write([]byte{tc.drip[i]}); err != nil {
							return
						}
					}
				}()
				got := closedWithin(t, conn, "a client that "+tc.name)
				if !strings.HasPrefix(got, tc.want) {
					t.Errorf("the server answered %q, want it to start with %q", got, tc.want)
				}
			})
		})
	}
}

// TestEventStreamsOutliveTheTimeoutsButNotAStalledReader runs in a synctest bubble: the 2-second
// stream, the timeouts it outlives and the cut of a stalled reader all pass on the bubble's clock.
func TestEventStreamsOutliveTheTimeoutsButNotAStalledReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cut := make(chan error, 1)
		chat := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rc := http.NewResponseController(w)
			w.Header().Set("Content-Type", "text/event-stream")
			switch r.URL.Path {
			case "/chat/events": // a live stream: an event every 50 ms for well past every timeout
				for i := range 40 {
					fmt.Fprintf(w, "data: %d\n\n", i)
					if err := rc.Flush(); err != nil {
						return
					}
					select {
					case <-time.After(50 * time.Millisecond):
					case <-r.Context().Done():
						return
					}
				}
				fmt.Fprint(w, "data: end\n\n")
			case "/chat/flood": // writes as fast as it can to a client that does not read
				chunk := []byte("data: " + strings.Repeat("x", 64<<10) + "\n\n")
				for range 8192 {
					if _, err := w.Write(chunk); err != nil {
						cut <- err
						return
					}
				}
				cut <- nil
			}
		})
		ln := serveInMemory(t, shortLimitsOptions(t, "", chat))
		tr := &http.Transport{DialContext: ln.Dial}
		defer tr.CloseIdleConnections()

		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/chat/events", nil)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		var events []string
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events = append(events, v)
			}
		}
		resp.Body.Close()
		if len(events) != 41 || events[40] != "end" {
			t.Errorf("a live event stream lasting past the read and write timeouts got %d events (last %q), want all 40 and the end: it was cut", len(events), events[max(0, len(events)-1)])
		}

		conn, err := ln.Dial(t.Context(), "tcp", "admin.test:80")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprint(conn, "GET /chat/flood HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
		select {
		case err := <-cut:
			if err == nil {
				t.Fatal("512 MiB went to a client that reads nothing: its stream was never cut")
			}
		case <-time.After(30 * time.Second):
			t.Fatal("an event stream whose reader stalled is still being written to after 30 s")
		}
	})
}
