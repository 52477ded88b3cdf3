package mcp

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
)

// DefaultMaxMessageBytes replaces a zero ServerConfig.MaxMessageBytes.
const DefaultMaxMessageBytes = 16 << 20

// MessageTooLargeError is the error of a read that found a server's message longer than its
// limit: the bytes a server sends are untrusted, and mcp-go reads a message whole into memory
// (a stdio line, an SSE event, a JSON body) before it parses it.
type MessageTooLargeError struct {
	Server string
	Max    int
}

func (e *MessageTooLargeError) Error() string {
	return fmt.Sprintf("MCP server '%s' sent a message over %d bytes (max_message_bytes)", e.Server, e.Max)
}

// framing says where a message ends in a stream capReader reads.
type framing int

const (
	lines  framing = iota // at each newline: stdio
	events                // at a blank line: an SSE stream
	whole                 // never: a JSON body is one message
)

// capTrip records the first message over the limit of a connection's streams.
type capTrip struct {
	mu      sync.Mutex
	err     error
	tripped chan struct{} // closed when err is set
}

func newCapTrip() *capTrip { return &capTrip{tripped: make(chan struct{})} }

func (c *capTrip) trip(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.tripped)
	}
	return err
}

// Err is the *MessageTooLargeError of the first message over the limit, else nil.
func (c *capTrip) Err() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// capReader passes r's bytes through until one message runs past max bytes, then fails every
// read with a *MessageTooLargeError, recorded in its capTrip.
type capReader struct {
	r     io.Reader
	max   int
	frame framing
	err   error // set once a message ran past max
	trip  *capTrip
	who   string

	run     int  // bytes of the message so far
	newline bool // the last byte that was not '\r' was '\n'
}

func newCapReader(r io.Reader, server string, max int, frame framing, trip *capTrip) *capReader {
	if max <= 0 {
		max = DefaultMaxMessageBytes
	}
	return &capReader{r: r, max: max, frame: frame, who: server, trip: trip}
}

// Read reads from the underlying reader; the bytes of a read that runs a message past the
// limit are not returned.
func (c *capReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	for _, b := range p[:n] {
		switch {
		case b == '\n' && (c.frame == lines || c.frame == events && c.newline):
			c.run = 0
			c.newline = true
		case b == '\n':
			c.run++
			c.newline = true
		case b == '\r': // a CRLF's CR leaves "the line just ended" as it was
			c.run++
		default:
			c.newline = false
			c.run++
		}
		if c.run > c.max {
			c.err = c.trip.trip(&MessageTooLargeError{Server: c.who, Max: c.max})
			return 0, c.err
		}
	}
	return n, err
}

// capBodies bounds the response bodies its transport returns: an SSE stream event by event, any
// other body whole.
type capBodies struct {
	next   http.RoundTripper
	server string
	max    int
	trip   *capTrip
}

func (t capBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	frame := whole
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		frame = events
	}
	resp.Body = cappedBody{capReader: newCapReader(resp.Body, t.server, t.max, frame, t.trip), closer: resp.Body}
	return resp, nil
}

type cappedBody struct {
	*capReader
	closer io.Closer
}

func (b cappedBody) Close() error { return b.closer.Close() }
