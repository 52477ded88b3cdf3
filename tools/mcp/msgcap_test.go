package mcp_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	testmcp "relaybot/internal/testkit/mcp"
	"relaybot/internal/testkit/wait"
	"relaybot/tools"
	"relaybot/tools/mcp"
)

// A server's message over max_message_bytes is refused unread on every wire transport, the
// call says which limit, and the server serves the next call (a stdio server after a restart).
func TestAMessageOverTheLimitFailsItsCallNotTheBot(t *testing.T) {
	for _, tr := range transports {
		if tr.name == "inprocess" { // no wire, no bytes to bound
			continue
		}
		t.Run(tr.name, func(t *testing.T) {
			k := testmcp.New("kit")
			cfg := tr.serve(t, k, time.Minute)
			cfg.MaxMessageBytes = 64 << 10
			l := startLoader(t, cfg)
			waitUp(t, l, "srv")

			if res, err := call(l, "resource", map[string]int{"size": 32 << 10}); err != nil || strings.Count(res.Text, "a") < 32<<10 {
				t.Fatalf("a message under the limit: %d bytes, %v", len(res.Text), err)
			}
			_, err := call(l, "resource", map[string]int{"size": 1 << 20})
			if err == nil {
				t.Fatal("a 1 MiB message was read under a 64 KiB limit")
			}
			var tooLarge *mcp.MessageTooLargeError
			if !errors.As(err, &tooLarge) {
				t.Errorf("err = %v, want the message's size named", err)
			}
			if tr.name == "stdio" {
				// mcp-go stops reading the process's output at the message: the loader restarts it
				// and says why.
				wait.For(t, "the restart's reason", func() bool {
					return strings.Contains(health(l, "srv").LastError, "max_message_bytes")
				})
			}
			wait.For(t, "the next call answered", func() bool {
				res, err := call(l, "echo", map[string]string{"text": "still here"})
				return err == nil && res.Text == "still here"
			})
			if h := health(l, "srv"); h.State != tools.ServerUp {
				t.Errorf("server %s after the refused message", h.State)
			}
		})
	}
}
