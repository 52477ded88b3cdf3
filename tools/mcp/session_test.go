package mcp_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	testmcp "relaybot/internal/testkit/mcp"
	"relaybot/tools/mcp"
)

// TestToolErrorSayingSessionNotFoundIsNotRetried: the client used to take any error whose text
// mentioned "session not found" (or expired, terminated, invalid session id) for the end of the
// MCP session, reconnect and run the call again, so a non-idempotent tool whose own error said so
// ran twice. Only the transport (HTTP 404 for the session id) says a session ended; a real ended
// session still reconnects and retries once.
func TestToolErrorSayingSessionNotFoundIsNotRetried(t *testing.T) {
	k := testmcp.New("kit")
	k.Legacy() // sessions are of the initialize handshake; 2026-07-28 has none
	var charges atomic.Int64
	mode := atomic.Value{}
	mode.Store("ok")
	k.Server.AddTool(mcpgo.NewTool("charge", mcpgo.WithDescription("Charges a card once per call.")),
		func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			charges.Add(1)
			switch mode.Load() {
			case "rpc error":
				return nil, errors.New("payment session not found: card declined")
			case "tool error":
				return mcpgo.NewToolResultError("Session expired at the payment provider; invalid session id"), nil
			}
			return mcpgo.NewToolResultText("charged"), nil
		})
	srv := testmcp.StartHTTP(t, k)
	l := startLoader(t, mcp.ServerConfig{Name: "srv", Transport: "http", Local: true, URL: srv.URL})
	waitUp(t, l, "srv")

	for _, m := range []string{"rpc error", "tool error"} {
		t.Run(m, func(t *testing.T) {
			mode.Store(m)
			before := charges.Load()
			if _, err := call(l, "charge", nil); err == nil {
				t.Fatal("the tool's error was lost")
			}
			if got := charges.Load() - before; got != 1 {
				t.Fatalf("the card was charged %d times for one call, want 1", got)
			}
			if got := srv.SessionsStarted(); got != 1 {
				t.Fatalf("sessions started = %d, want 1 (the session never ended)", got)
			}
		})
	}

	t.Run("a real ended session", func(t *testing.T) {
		mode.Store("ok")
		before := charges.Load()
		srv.ExpireSessions()
		res, err := call(l, "charge", nil)
		if err != nil || res.Text != "charged" {
			t.Fatalf("call after the session ended = %q, %v", res.Text, err)
		}
		if got := charges.Load() - before; got != 1 {
			t.Fatalf("charged %d times, want 1", got)
		}
		if got := srv.SessionsStarted(); got != 2 {
			t.Fatalf("sessions started = %d, want 2 (one reconnect)", got)
		}
	})
}
