package coord

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"testing"

	"relaybot/internal/testkit/wait"
	"relaybot/store/storetest"
)

// freezer is a loopback TCP proxy to a PostgreSQL server whose open connections can be frozen:
// nothing more is forwarded either way and nothing is closed, as when a network path drops a
// connection without a word. Connections made after a freeze are forwarded.
type freezer struct {
	ln     net.Listener
	target string
	done   chan struct{} // closed when the test ends

	mu     sync.Mutex
	frozen []chan struct{} // one per connection; closed to freeze it
}

func newFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, target: target, done: make(chan struct{})}
	t.Cleanup(func() { ln.Close(); close(f.done) })
	go f.serve()
	return f
}

func (f *freezer) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", f.target)
		if err != nil {
			c.Close()
			continue
		}
		stop := make(chan struct{})
		f.mu.Lock()
		f.frozen = append(f.frozen, stop)
		f.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			buf := make([]byte, 32<<10)
			for {
				n, err := src.Read(buf)
				select {
				case <-stop:
					<-f.done // frozen: hold the sockets open, forward nothing
					src.Close()
					dst.Close()
					return
				default:
				}
				if n > 0 {
					if _, werr := dst.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					if err != io.EOF {
						dst.Close()
					}
					return
				}
			}
		}
		go pipe(up, c)
		go pipe(c, up)
	}
}

// freeze stops forwarding on every connection open now.
func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.frozen {
		close(c)
	}
	f.frozen = nil
}

// TestAListenerWhoseConnectionDropsSilentlyListensAgain holds a LISTEN through a proxy, then
// freezes the proxy's connections (nothing forwarded, nothing closed): the listener notices
// within seconds, connects again, and hears the next notification.
func TestAListenerWhoseConnectionDropsSilentlyListensAgain(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	proxy := newFreezer(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	viaProxy, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer viaProxy.Close()

	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var heard []string
	listens, losses := 0, 0
	done := make(chan error, 1)
	go func() {
		done <- listenLoopTold(ctx, viaProxy, "relaybot_test_frozen", "test notifications", slog.New(slog.DiscardHandler),
			func(on bool) {
				mu.Lock()
				defer mu.Unlock()
				if on {
					listens++
				} else {
					losses++
				}
			}, func(payload string) {
				mu.Lock()
				defer mu.Unlock()
				heard = append(heard, payload)
			})
	}()
	defer func() { cancel(); <-done }()
	state := func() (int, int, []string) {
		mu.Lock()
		defer mu.Unlock()
		return listens, losses, append([]string(nil), heard...)
	}
	wait.For(t, "the first LISTEN", func() bool { l, _, _ := state(); return l == 1 })
	proxy.freeze()
	wait.For(t, "the listener to notice its connection is gone and listen again", func() bool {
		l, lost, _ := state()
		return lost >= 1 && l >= 2
	})
	wait.For(t, "the notification sent after the reconnection to be heard", func() bool {
		if _, err := direct.Exec(`SELECT pg_notify(` + channelSQL("'relaybot_test_frozen'") + `, 'after')`); err != nil {
			t.Fatal(err)
		}
		_, _, h := state()
		return len(h) > 0 && h[len(h)-1] == "after"
	})
}
