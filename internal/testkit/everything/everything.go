// Package everything runs the MCP reference server, @modelcontextprotocol/server-everything (the
// version pinned in .ci/mcp-everything/package.json), for tests: over stdio (its entry point,
// for a server config's command) and over streamable HTTP (a process on a free loopback port).
// .ci/run installs it and sets BOT_TEST_MCP_EVERYTHING to its dist/index.js; without it, a test
// asking for it is skipped, saying how to install it.
package everything

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Entry returns the reference server's entry point (run as `node ENTRY stdio`), or skips t
// saying why it cannot.
func Entry(t testing.TB) string {
	t.Helper()
	entry := os.Getenv("BOT_TEST_MCP_EVERYTHING")
	if entry == "" {
		t.Skip("BOT_TEST_MCP_EVERYTHING is not set: the MCP reference server is not installed " +
			"(npm ci in .ci/mcp-everything, then point it at node_modules/@modelcontextprotocol/server-everything/dist/index.js)")
	}
	if _, err := os.Stat(entry); err != nil {
		t.Fatalf("BOT_TEST_MCP_EVERYTHING: %v", err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("BOT_TEST_MCP_EVERYTHING is set but node is not on PATH: %v", err)
	}
	return entry
}

// StartHTTP runs the reference server at entry over streamable HTTP on a free loopback port
// until t ends, and returns its MCP endpoint's URL once it listens.
func StartHTTP(t testing.TB, entry string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("node", entry, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() { // read to the end, so the server never blocks writing its log
			if !once && strings.Contains(sc.Text(), fmt.Sprintf("listening on port %d", port)) {
				once = true
				close(listening)
			}
		}
	}()
	select {
	case <-listening:
	case <-time.After(60 * time.Second):
		t.Fatalf("the reference server did not listen on port %d within 60 s", port)
	}
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}
