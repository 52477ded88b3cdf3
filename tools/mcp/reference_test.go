package mcp_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	osexec "os/exec"
	"strings"
	"testing"
	"time"

	"relaybot/internal/testkit/logbuf"
	"relaybot/internal/testkit/wait"
	"relaybot/tools/mcp"
)

// The MCP reference server, @modelcontextprotocol/server-everything (the version pinned in
// .ci/mcp-everything/package.json), run with node over stdio and streamable HTTP. .ci/run
// installs it and sets BOT_TEST_MCP_EVERYTHING to its dist/index.js.

// everything returns the reference server's entry point, or skips the test saying why.
func everything(t *testing.T) string {
	t.Helper()
	entry := os.Getenv("BOT_TEST_MCP_EVERYTHING")
	if entry == "" {
		t.Skip("BOT_TEST_MCP_EVERYTHING is not set: the MCP reference server is not installed " +
			"(npm ci in .ci/mcp-everything, then point it at node_modules/@modelcontextprotocol/server-everything/dist/index.js)")
	}
	if _, err := os.Stat(entry); err != nil {
		t.Fatalf("BOT_TEST_MCP_EVERYTHING: %v", err)
	}
	if _, err := osexec.LookPath("node"); err != nil {
		t.Fatalf("BOT_TEST_MCP_EVERYTHING is set but node is not on PATH: %v", err)
	}
	return entry
}

// everythingServers configures the reference server over stdio and over streamable HTTP (a
// process on a free loopback port, stopped when the test ends).
func everythingServers(t *testing.T) map[string]mcp.ServerConfig {
	entry := everything(t)
	return map[string]mcp.ServerConfig{
		"stdio": {Name: "everything", Transport: "stdio", Command: "node", Args: []string{entry, "stdio"}},
		"http":  {Name: "everything", Transport: "http", Local: true, URL: startEverythingHTTP(t, entry)},
	}
}

func startEverythingHTTP(t *testing.T, entry string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := osexec.Command("node", entry, "streamableHttp")
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
		for sc.Scan() {
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

// startLogged starts a loader over cfg whose log the test reads.
func startLogged(t *testing.T, cfg mcp.ServerConfig) (*mcp.Loader, *logbuf.Buffer) {
	t.Helper()
	var buf logbuf.Buffer
	l := mcp.NewLoader([]mcp.ServerConfig{cfg}, slog.New(slog.NewTextHandler(&buf, nil)),
		mcp.WithBackoff(20*time.Millisecond, 200*time.Millisecond))
	l.Start(context.Background())
	t.Cleanup(l.Close)
	waitUp(t, l, cfg.Name)
	return l, &buf
}

// The reference server speaks 2025-11-25: the bot offers 2026-07-28 (server/discover), falls back
// to the initialize handshake, shows the version it got, and sees the server's tool list change
// (it adds the tools for the client's capabilities right after the handshake).
func TestReferenceServerNegotiatesAndListsChanges(t *testing.T) {
	for tr, cfg := range everythingServers(t) {
		t.Run(tr, func(t *testing.T) {
			l, logs := startLogged(t, cfg)
			if got := health(l, "everything").ProtocolVersion; got != "2025-11-25" {
				t.Fatalf("negotiated %q with the reference server, want 2025-11-25", got)
			}
			wait.For(t, "the tool list change", func() bool {
				return strings.Contains(logs.String(), "MCP server's tool list changed")
			})
			res, err := call(l, "echo", map[string]string{"message": "héllo"})
			if err != nil || !strings.Contains(res.Text, "héllo") {
				t.Fatalf("echo = %q, %v", res.Text, err)
			}
		})
	}
}
