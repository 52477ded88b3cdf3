// Package memnet is a network in memory, for tests that run a server and its client inside one
// testing/synctest bubble. A bubble's fake clock advances only when every goroutine in it is
// durably blocked, which a goroutine reading a real socket never is; one reading a net.Pipe
// made inside the bubble is (the pipe is channels). A Listener's Dial hands its Accept one end
// of a new pipe and returns the other, so an http.Server serving it and an http.Transport (or
// a WebSocket dialer) dialing it talk without a socket, and the bubble's timers decide when
// anything times out.
package memnet

import (
	"context"
	"errors"
	"net"
	"sync"
)

// backlog is how many connections Dial opens that Accept has not taken yet, as a TCP
// listener's backlog holds connections the kernel completed before the server accepts them.
const backlog = 128

// Listener is a net.Listener whose connections are opened by its Dial. Make it inside the
// bubble that uses it.
type Listener struct {
	addr   addr
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
	mu     sync.Mutex // orders Close's drain after every Dial's send
}

var _ net.Listener = (*Listener)(nil)

// Listen returns a listener named name ("host:port"), the address it reports.
func Listen(name string) *Listener {
	return &Listener{addr: addr(name), conns: make(chan net.Conn, backlog), closed: make(chan struct{})}
}

// Accept waits for the next connection a Dial opens, or for Close.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and Dial and closes the connections Accept has not taken; connections
// already accepted stay open.
func (l *Listener) Close() error {
	l.once.Do(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		close(l.closed)
		for {
			select {
			case c := <-l.conns:
				c.Close()
			default:
				return
			}
		}
	})
	return nil
}

// Addr is the listener's name.
func (l *Listener) Addr() net.Addr { return l.addr }

// ErrRefused is what Dial returns once the listener is closed.
var ErrRefused = errors.New("memnet: connection refused (listener closed)")

// Dial opens a connection to the listener, whatever address is asked for, and returns at once:
// the server reads what the client writes once Accept takes the other end. It fails when the
// listener is closed or its backlog is full. Its signature is that of net.Dialer.DialContext,
// for http.Transport.DialContext and websocket.Dialer.NetDialContext.
func (l *Listener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock() // no Close between the check and the send, which would strand the server's end
	defer l.mu.Unlock()
	select {
	case <-l.closed:
		return nil, ErrRefused
	default:
	}
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	default:
		return nil, ErrBacklogFull
	}
}

// ErrBacklogFull is what Dial returns when Accept has not taken the listener's last 128
// connections.
var ErrBacklogFull = errors.New("memnet: connection refused (backlog full)")

// addr is a listener's name as a net.Addr.
type addr string

func (a addr) Network() string { return "memnet" }
func (a addr) String() string  { return string(a) }
