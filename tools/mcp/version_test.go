package mcp_test

import (
	"slices"
	"testing"

	testmcp "relaybot/internal/testkit/mcp"
	"relaybot/internal/testkit/wait"
	"relaybot/tools/mcp"
)

// The bot speaks the newest protocol a server knows: 2026-07-28 (server/discover, no session)
// with a current server, the 2025-11-25 initialize handshake with one that refuses discover and
// over legacy SSE; the Servers page shows which. Either way a tool list change reaches the next
// listing.
func TestNegotiatesTheNewestVersionTheServerSpeaks(t *testing.T) {
	cases := []struct {
		transport string
		legacy    bool
		want      string
	}{
		{"stdio", false, "2026-07-28"},
		{"stdio", true, "2025-11-25"},
		{"http", false, "2026-07-28"},
		{"http", true, "2025-11-25"},
		{"sse", false, "2025-11-25"},
		{"inprocess", false, "2026-07-28"},
	}
	for _, c := range cases {
		name := c.transport
		if c.legacy {
			name += "/legacy server"
		}
		t.Run(name, func(t *testing.T) {
			k := testmcp.New("kit")
			var cfg mcp.ServerConfig
			if c.legacy {
				cfg = serveLegacy(t, c.transport, k)
			} else {
				cfg = serve(t, c.transport, k)
			}
			l := startLoader(t, cfg)
			waitUp(t, l, "srv")
			if got := health(l, "srv").ProtocolVersion; got != c.want {
				t.Fatalf("the Servers page says protocol %q, want %q", got, c.want)
			}
			if res, err := call(l, "echo", map[string]string{"text": "hi"}); err != nil || res.Text != "hi" {
				t.Fatalf("echo on %s = %q, %v", c.want, res.Text, err)
			}
			if c.transport == "stdio" {
				return // the stdio server's tools are fixed
			}
			k.AddEchoTool("shout")
			wait.For(t, "shout to be listed", func() bool { return slices.Contains(toolNames(l), "shout") })
		})
	}
}
