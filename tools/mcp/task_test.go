package mcp_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"relaybot/audit"
	testmcp "relaybot/internal/testkit/mcp"
	"relaybot/internal/testkit/wait"
	"relaybot/tools"
)

// A tool that requires a task (MCP 2025-11-25 Tasks) is called as one: it is not refused for
// want of task augmentation, its progress reaches the call's status line while the bot polls,
// and its result comes back in the same round. The call timeout does not apply to it.
func TestATaskToolRunsAsATask(t *testing.T) {
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			w := &watcher{}
			cfg := serveLegacy(t, tr, testmcp.New("kit"))
			cfg.ToolCallTimeout = 50 * time.Millisecond // a task is not bound by it
			tt, rec := liveTurn(t, cfg, w, tools.ManagerOptions{})
			out := exec(tt, context.Background(), "c1", "research", map[string]any{"steps": 3, "seconds": 0.3})
			if out.Status != audit.StatusOK || out.Content != "researched" {
				t.Fatalf("the task call ended %s %q (%v), want ok \"researched\"", out.Status, out.Content, out.Err)
			}
			if got := rec.Records()[0]; got.Status != audit.StatusOK {
				t.Fatalf("audit row %+v", got)
			}
		})
	}
}

// Stopping a turn whose task is running cancels the task on the server (tasks/cancel): the
// server's work ends, and the call ends cancelled at once.
func TestStoppingATaskCancelsItOnTheServer(t *testing.T) {
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			w := &watcher{}
			tt, _ := liveTurn(t, serveLegacy(t, tr, testmcp.New("kit")), w, tools.ManagerOptions{})
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
		})
	}
}

// A task runs within the server's task timeout, not its call timeout: past it the call fails as
// a timeout naming it, and the task is cancelled on the server.
func TestATaskOutlivingItsTimeoutIsCancelled(t *testing.T) {
	k := testmcp.New("kit")
	cfg := serveLegacy(t, "http", k)
	cfg.TaskTimeout = time.Second
	l := startLoader(t, cfg)
	waitUp(t, l, "srv")
	_, err := call(l, "research", map[string]any{"steps": 1, "seconds": 600})
	if !errors.Is(err, tools.ErrTimeout) || !strings.Contains(err.Error(), "timed out after 1 seconds") {
		t.Fatalf("err = %v, want a timeout after the task timeout of 1 s", err)
	}
	wait.For(t, "the server's task to be cancelled", func() bool { return k.Cancelled() == 1 })
}
