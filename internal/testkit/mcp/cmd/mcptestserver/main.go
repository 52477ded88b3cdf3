// Command mcptestserver serves the testkit's MCP tools over stdio, for tests of stdio clients.
// It counts the notifications/cancelled it reads (the cancel_notices tool tells). With the
// argument -legacy it is a server of protocol 2025-11-25, which refuses server/discover.
package main

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/mark3labs/mcp-go/server"

	testmcp "relaybot/internal/testkit/mcp"
)

func main() {
	k := testmcp.New("stdio-test")
	if slices.Contains(os.Args[1:], "-legacy") {
		k.Legacy()
	}
	in, out := k.Stdio(os.Stdin, os.Stdout)
	if err := server.NewStdioServer(k.Server).Listen(context.Background(), in, out); err != nil {
		fmt.Fprintln(os.Stderr, "mcptestserver:", err)
		os.Exit(1)
	}
}
