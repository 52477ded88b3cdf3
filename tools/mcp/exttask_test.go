package mcp_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"relaybot/audit"
	testmcp "relaybot/internal/testkit/mcp"
	"relaybot/internal/testkit/wait"
	"relaybot/tools"
)

// The Tasks extension of 2026-07-28 (io.modelcontextprotocol/tasks): the kit, a server of that
// revision, makes every research call a task when the call declares the extension, and refuses
// the call without it.

// messages are the status lines a watcher saw, in order.
func messages(w *watcher) []string {
	var out []string
	for _, p := range w.reports() {
		out = append(out, p.Message)
	}
	return out
}

// A call the server makes a task is followed to its end: each step the server reports while
// the bot polls reaches the call's status line, and the result comes back in the same round.
// The call timeout bounds only the server's first answer; the task outlives it.
func TestAnExtensionTaskRunsToItsResult(t *testing.T) {
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			w := &watcher{}
			cfg := serve(t, tr, testmcp.New("kit"))
			cfg.ToolCallTimeout = time.Second // the task takes longer
			tt, rec := liveTurn(t, cfg, w, tools.ManagerOptions{})
			out := exec(tt, context.Background(), "c1", "research", map[string]any{"steps": 3, "seconds": 1.5})
			if out.Status != audit.StatusOK || out.Content != "researched" {
				t.Fatalf("the task call ended %s %q (%v), want ok \"researched\"", out.Status, out.Content, out.Err)
			}
			want := []string{"started", "step 1 of 3", "step 2 of 3", "step 3 of 3", "researching"}
			if got := messages(w); !slices.Equal(got, want) {
				t.Fatalf("the status line showed %q, want %q", got, want)
			}
			if got := rec.Records()[0]; got.Status != audit.StatusOK || got.Progress != "researching" {
				t.Fatalf("audit row %+v", got)
			}
		})
	}
}

// Stopping a turn whose task is running cancels the task on the server (tasks/cancel): the call
// ends cancelled at once, and the server's task with it.
func TestStoppingAnExtensionTaskCancelsIt(t *testing.T) {
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			w := &watcher{}
			tt, _ := liveTurn(t, serve(t, tr, testmcp.New("kit")), w, tools.ManagerOptions{})
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
		})
	}
}

// A task runs within the server's task timeout: past it the call fails as a timeout naming it,
// and the task is cancelled on the server.
func TestAnExtensionTaskOutlivingItsTimeoutIsCancelled(t *testing.T) {
	k := testmcp.New("kit")
	cfg := serve(t, "http", k)
	cfg.TaskTimeout = time.Second
	l := startLoader(t, cfg)
	waitUp(t, l, "srv")
	_, err := call(l, "research", map[string]any{"steps": 1, "seconds": 600})
	if !errors.Is(err, tools.ErrTimeout) || !strings.Contains(err.Error(), "timed out after 1 seconds") {
		t.Fatalf("err = %v, want a timeout after the task timeout of 1 s", err)
	}
	wait.For(t, "the server's task to be cancelled", func() bool { return k.Cancelled() == 1 })
}

// A task that needs input asks the user (its question comes with tasks/get), sends the answer
// with tasks/update and goes on to its result.
func TestAnExtensionTaskAsksItsQuestion(t *testing.T) {
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			w := &watcher{answers: []tools.ElicitAnswer{{Action: tools.ElicitAccept, Content: map[string]any{"answer": "sea otters"}}}}
			tt, _ := liveTurn(t, serve(t, tr, testmcp.New("kit")), w, tools.ManagerOptions{})
			out := exec(tt, context.Background(), "c1", "research", map[string]any{"steps": 1, "question": "Which otters?"})
			if want := `researched: accept {"answer":"sea otters"}`; out.Status != audit.StatusOK || out.Content != want {
				t.Fatalf("the task call ended %s %q (%v), want ok %q", out.Status, out.Content, out.Err, want)
			}
			if q := w.questions(); len(q) != 1 || q[0].Message != "Which otters?" || len(q[0].Fields) != 1 {
				t.Fatalf("the user was asked %+v, want the task's one question once", q)
			}
		})
	}
}
