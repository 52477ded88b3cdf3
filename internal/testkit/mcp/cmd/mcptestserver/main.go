// Command mcptestserver serves the testkit's MCP tools over stdio, for tests of stdio clients.
package main

import (
	"fmt"
	"os"

	"github.com/mark3labs/mcp-go/server"

	testmcp "relaybot/internal/testkit/mcp"
)

func main() {
	if err := server.ServeStdio(testmcp.New("stdio-test").Server); err != nil {
		fmt.Fprintln(os.Stderr, "mcptestserver:", err)
		os.Exit(1)
	}
}
