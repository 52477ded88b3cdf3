package mcp_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/audit"
	testmcp "relaybot/internal/testkit/mcp"
	"relaybot/internal/testkit/wait"
	"relaybot/tools"
	"relaybot/tools/mcp"
)

// Tasks of MCP 2025-11-25 (SEP-1686), asked for by the bot for the tools that take them. Over
// HTTP the server runs in memory on the bubble's clock (inMemory); over stdio the server is a
// process, on the real clock, so those variants wait for nothing but the server's polls.

// legacyInMemory is a 2025-11-25 kit served in memory.
func legacyInMemory(t *testing.T) (*testmcp.Kit, mcp.ServerConfig) {
	k := testmcp.New("kit")
	k.Legacy()
	return k, inMemory(t, k)
}

// A tool that requires a task (MCP 2025-11-25 Tasks) is called as one: it is not refused for
// want of task augmentation, its progress reaches the call's status line while the bot polls,
// and its result comes back in the same round. The call timeout does not apply to it.
func TestATaskToolRunsAsATask(t *testing.T) {
	check := func(t *testing.T, cfg mcp.ServerConfig, seconds float64) {
		w := &watcher{}
		cfg.ToolCallTimeout = time.Second // a task is not bound by it
		tt, rec := liveTurn(t, cfg, w, tools.ManagerOptions{})
		out := exec(tt, context.Background(), "c1", "research", map[string]any{"steps": 3, "seconds": seconds})
		if out.Status != audit.StatusOK || out.Content != "researched" {
			t.Fatalf("the task call ended %s %q (%v), want ok \"researched\"", out.Status, out.Content, out.Err)
		}
		if got := rec.Records()[0]; got.Status != audit.StatusOK {
			t.Fatalf("audit row %+v", got)
		}
	}
	t.Run("stdio", func(t *testing.T) { check(t, serveLegacy(t, "stdio", testmcp.New("kit")), 0) })
	t.Run("http", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, cfg := legacyInMemory(t)
			check(t, cfg, 5) // past the call timeout, on the bubble's clock
		})
	})
}

// Stopping a turn whose task is running cancels the task on the server (tasks/cancel): the
// server's work ends, and the call ends cancelled at once.
func TestStoppingATaskCancelsItOnTheServer(t *testing.T) {
	check := func(t *testing.T, cfg mcp.ServerConfig) {
		w := &watcher{}
		tt, _ := liveTurn(t, cfg, w, tools.ManagerOptions{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan tools.Outcome, 1)
		go func() { done <- exec(tt, ctx, "c1", "research", map[string]any{"steps": 2, "seconds": 600}) }()
		wait.For(t, "the task's progress", func() bool {
			for _, p := range w.reports() {
				if p.Message == "step 2 of 2" {
					return true
				}
			}
			return false
		})
		cancel()
		if out := <-done; out.Status != audit.StatusCancelled {
			t.Fatalf("the stopped task call ended %s (%v)", out.Status, out.Err)
		}
		// The kit counts the waits that ended cancelled (in the stdio process, its own).
		wait.For(t, "the server's task to be cancelled", func() bool {
			return exec(tt, context.Background(), "c2", "cancelled", map[string]any{}).Content == "1"
		})
	}
	t.Run("stdio", func(t *testing.T) { check(t, serveLegacy(t, "stdio", testmcp.New("kit"))) })
	t.Run("http", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, cfg := legacyInMemory(t)
			check(t, cfg)
		})
	})
}

// A task runs within the server's task timeout, not its call timeout: past it the call fails as
// a timeout naming it, and the task is cancelled on the server.
func TestATaskOutlivingItsTimeoutIsCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, cfg := legacyInMemory(t)
		cfg.TaskTimeout = time.Minute
		l := startLoader(t, cfg)
		waitUp(t, l, "srv")
		_, err := call(l, "research", map[string]any{"steps": 1, "seconds": 600})
		if !errors.Is(err, tools.ErrTimeout) || !strings.Contains(err.Error(), "timed out after 60 seconds") {
			t.Fatalf("err = %v, want a timeout after the task timeout of a minute", err)
		}
		wait.For(t, "the server's task to be cancelled", func() bool { return k.Cancelled() == 1 })
	})
}
