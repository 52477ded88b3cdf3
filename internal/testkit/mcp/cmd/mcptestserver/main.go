// Command mcptestserver serves the testkit's MCP tools over stdio, for tests of stdio clients.
// It counts the notifications/cancelled it reads (the cancel_notices tool tells).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/mark3labs/mcp-go/server"

	testmcp "relaybot/internal/testkit/mcp"
)

func main() {
	k := testmcp.New("stdio-test")
	if err := server.NewStdioServer(k.Server).Listen(context.Background(), k.CountCancels(os.Stdin), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mcptestserver:", err)
		os.Exit(1)
	}
}
