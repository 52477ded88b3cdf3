package memnet_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/internal/testkit/memnet"
)

// TestAServerTimesOutOnTheBubblesClock serves HTTP over a Listener in a bubble: a request is
// answered, and a client that sends nothing is cut off by the server's read timeout after a
// minute of fake time, without the test waiting for it.
func TestAServerTimesOutOnTheBubblesClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memnet.Listen("example.test:80")
		srv := &http.Server{ReadHeaderTimeout: time.Minute,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") })}
		go func() { _ = srv.Serve(l) }()
		defer srv.Close()

		tr := &http.Transport{DialContext: l.Dial}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get("http://example.test/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "hello" {
			t.Errorf("the server answered %q, want hello", body)
		}

		start := time.Now()
		c, err := l.Dial(t.Context(), "tcp", "example.test:80")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("a silent client was sent bytes, want the connection closed")
		}
		if waited := time.Since(start); waited < time.Minute {
			t.Errorf("a silent client was cut off after %v, before the server's 1-minute timeout", waited)
		}
		c.Close()
	})
}

func TestDialAfterCloseIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memnet.Listen("example.test:80")
		l.Close()
		if _, err := l.Dial(context.Background(), "tcp", "x"); !errors.Is(err, memnet.ErrRefused) {
			t.Errorf("Dial after Close: %v, want ErrRefused", err)
		}
		if _, err := l.Accept(); err == nil {
			t.Error("Accept after Close returned a connection")
		}
	})
}
