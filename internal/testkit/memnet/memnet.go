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

// Listener is a net.Listener whose connections are opened by its Dial. Make it inside the
// bubble that uses it.
type Listener struct {
	addr   addr
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

var _ net.Listener = (*Listener)(nil)

// Listen returns a listener named name ("host:port"), the address it reports.
func Listen(name string) *Listener {
	return &Listener{addr: addr(name), conns: make(chan net.Conn), closed: make(chan struct{})}
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

// Close stops Accept and Dial; connections already open stay open.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Addr is the listener's name.
func (l *Listener) Addr() net.Addr { return l.addr }

// ErrRefused is what Dial returns once the listener is closed.
var ErrRefused = errors.New("memnet: connection refused (listener closed)")

// Dial opens a connection to the listener, whatever address is asked for: it waits for Accept
// to take the other end, for ctx to end, or for Close. Its signature is that of
// net.Dialer.DialContext, for http.Transport.DialContext and websocket.Dialer.NetDialContext.
func (l *Listener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, ErrRefused
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// addr is a listener's name as a net.Addr.
type addr string

func (a addr) Network() string { return "memnet" }
func (a addr) String() string  { return string(a) }
