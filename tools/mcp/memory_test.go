package mcp_test

import (
	"net/http"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	testmcp "relaybot/internal/testkit/mcp"
	"relaybot/internal/testkit/memnet"
	"relaybot/tools/mcp"
)

// inMemory serves k over streamable HTTP on a network in memory. A test that calls it inside a
// synctest bubble runs the server, the bot's client and every timer between them on the
// bubble's clock: a task's seconds, its poll interval and the timeouts pass without waiting.
func inMemory(t *testing.T, k *testmcp.Kit) mcp.ServerConfig {
	t.Helper()
	ln := memnet.Listen("mcp.test:80")
	srv := &http.Server{Handler: k.Serve(server.NewStreamableHTTPServer(k.Server))}
	go func() { _ = srv.Serve(ln) }()
	hc := &http.Client{Transport: &http.Transport{DialContext: ln.Dial}}
	t.Cleanup(func() {
		hc.CloseIdleConnections()
		_ = srv.Close()
	})
	return mcp.OverHTTP("srv", "http://mcp.test:80/mcp", hc)
}
