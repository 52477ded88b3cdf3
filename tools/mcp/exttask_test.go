package mcp_test

import (
	"context"
	"errors"
	"slices"
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

// The Tasks extension of 2026-07-28 (io.modelcontextprotocol/tasks): the kit, a server of that
// revision, makes every research call a task when the call declares the extension, and refuses
// the call without it. Over HTTP the server runs in memory on the bubble's clock (inMemory);
// over stdio it is a process on the real clock, and those variants wait only for the server's
// polls (100 ms each).

// messages are the status lines a watcher saw, in order.
func messages(w *watcher) []string {
	var out []string
	for _, p := range w.reports() {
		out = append(out, p.Message)
	}
	return out
}

// bothTransports runs check over stdio (a process, the real clock) and over HTTP in memory (a
// synctest bubble).
func bothTransports(t *testing.T, check func(t *testing.T, cfg mcp.ServerConfig)) {
	t.Run("stdio", func(t *testing.T) { check(t, serve(t, "stdio", testmcp.New("kit"))) })
	t.Run("http", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) { check(t, inMemory(t, testmcp.New("kit"))) })
	})
}

// A call the server makes a task is followed to its end: each step the server reports while
// the bot polls reaches the call's status line, and the result comes back in the same round.
// The call timeout bounds only the server's first answer; the task outlives it.
func TestAnExtensionTaskRunsToItsResult(t *testing.T) {
	check := func(t *testing.T, cfg mcp.ServerConfig, seconds float64, wantSteps []string) {
		w := &watcher{}
		tt, rec := liveTurn(t, cfg, w, tools.ManagerOptions{})
		out := exec(tt, context.Background(), "c1", "research", map[string]any{"steps": 3, "seconds": seconds})
		if out.Status != audit.StatusOK || out.Content != "researched" {
			t.Fatalf("the task call ended %s %q (%v), want ok \"researched\"", out.Status, out.Content, out.Err)
		}
		if got := messages(w); !slices.Equal(got, wantSteps) {
			t.Fatalf("the status line showed %q, want %q", got, wantSteps)
		}
		if got := rec.Records()[0]; got.Status != audit.StatusOK || got.Progress != wantSteps[len(wantSteps)-1] {
			t.Fatalf("audit row %+v", got)
		}
	}
	t.Run("stdio", func(t *testing.T) {
		cfg := serve(t, "stdio", testmcp.New("kit"))
		check(t, cfg, 0, []string{"started", "step 1 of 3", "step 2 of 3", "step 3 of 3"})
	})
	t.Run("http", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg := inMemory(t, testmcp.New("kit"))
			cfg.ToolCallTimeout = time.Second // the task takes longer
			check(t, cfg, 5, []string{"started", "step 1 of 3", "step 2 of 3", "step 3 of 3", "researching"})
		})
	})
}

// Stopping a turn whose task is running cancels the task on the server (tasks/cancel): the call
// ends cancelled at once, and the server's task with it.
func TestStoppingAnExtensionTaskCancelsIt(t *testing.T) {
	bothTransports(t, func(t *testing.T, cfg mcp.ServerConfig) {
		w := &watcher{}
		tt, _ := liveTurn(t, cfg, w, tools.ManagerOptions{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan tools.Outcome, 1)
		go func() { done <- exec(tt, ctx, "c1", "research", map[string]any{"steps": 2, "seconds": 600}) }()
		wait.For(t, "the task's last step", func() bool { return slices.Contains(messages(w), "step 2 of 2") })
		cancel()
		if out := <-done; out.Status != audit.StatusCancelled {
			t.Fatalf("the stopped task call ended %s (%v)", out.Status, out.Err)
		}
		// The kit counts the tasks cancelled (in the stdio process, its own).
		wait.For(t, "the server's task to be cancelled", func() bool {
			return exec(tt, context.Background(), "c2", "cancelled", map[string]any{}).Content == "1"
		})
		// A task is cancelled with tasks/cancel only, never notifications/cancelled.
		if n := exec(tt, context.Background(), "c3", "cancel_notices", map[string]any{}).Content; n != "0" {
			t.Fatalf("the server got %s notifications/cancelled for the task's call, want none", n)
		}
	})
}

// A task runs within the server's task timeout: past it the call fails as a timeout naming it,
// and the task is cancelled on the server.
func TestAnExtensionTaskOutlivingItsTimeoutIsCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := testmcp.New("kit")
		cfg := inMemory(t, k)
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

// A task that needs input asks the user (its question comes with tasks/get), sends the answer
// with tasks/update and goes on to its result.
func TestAnExtensionTaskAsksItsQuestion(t *testing.T) {
	bothTransports(t, func(t *testing.T, cfg mcp.ServerConfig) {
		w := &watcher{answers: []tools.ElicitAnswer{{Action: tools.ElicitAccept, Content: map[string]any{"answer": "sea otters"}}}}
		tt, _ := liveTurn(t, cfg, w, tools.ManagerOptions{})
		out := exec(tt, context.Background(), "c1", "research", map[string]any{"steps": 1, "question": "Which otters?"})
		if want := `researched: accept {"answer":"sea otters"}`; out.Status != audit.StatusOK || out.Content != want {
			t.Fatalf("the task call ended %s %q (%v), want ok %q", out.Status, out.Content, out.Err, want)
		}
		if q := w.questions(); len(q) != 1 || q[0].Message != "Which otters?" || len(q[0].Fields) != 1 {
			t.Fatalf("the user was asked %+v, want the task's one question once", q)
		}
	})
}
