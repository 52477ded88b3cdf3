package tools_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/tools"
)

// Shutdown waits for the tool calls of cancelled turns (Manager.Wait): a turn stops waiting
// for its call once cancelled, and the call finishes its audit row on its own goroutine, which
// the store must outlive. Wait returns at once with no call running, only after a running
// call's audit row is finished, and, for a tool that ignores its cancellation, once its
// context ends, with an error that says how many calls still run.
func TestWaitOutlastsTheCallsStillEnding(t *testing.T) {
	tests := []struct {
		name string
		// honours: the tool sees its cancellation (and still takes until release to end);
		// otherwise it runs on until release.
		honours bool
		calls   int
		wantErr bool
	}{
		{"no call running", true, 0, false},
		{"a cancelled call that ends", true, 1, false},
		{"two parallel calls that end", true, 2, false},
		{"a call that ignores its cancellation", false, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release, started := make(chan struct{}), make(chan struct{}, 2)
				mcp := newStub(audit.SourceMCP, "kit").add("slow", func(ctx context.Context, _ tools.Invocation) (tools.Result, error) {
					started <- struct{}{}
					if tt.honours {
						select {
						case <-ctx.Done():
							<-release // the call is still ending when the turn gave up on it
							return tools.Result{}, ctx.Err()
						case <-release:
						}
					} else {
						<-release
					}
					return tools.Result{Text: "done"}, nil
				})
				f := newFixture(t, tools.ManagerOptions{ParallelTools: []string{"slow"}}, mcp)
				ctx, cancel := context.WithCancel(context.Background())
				turn := f.m.ForTurn(tools.TurnInfo{}, nil)
				ended := make(chan struct{})
				switch tt.calls {
				case 0:
					close(ended)
				case 1:
					go func() {
						defer close(ended)
						turn.Execute(ctx, tools.Call{ToolCall: chat.ToolCall{ID: "c1", Name: "slow", Arguments: `{}`}})
					}()
				default:
					go func() {
						defer close(ended)
						turn.RunParallel(ctx, []tools.Call{{ToolCall: chat.ToolCall{ID: "c1", Name: "slow", Arguments: `{}`}}, {ToolCall: chat.ToolCall{ID: "c2", Name: "slow", Arguments: `{}`}}}, nil)
					}()
				}
				for range tt.calls {
					<-started
				}
				cancel() // the turn is cancelled; its calls are still ending

				wctx, wcancel := context.WithCancel(context.Background())
				defer wcancel()
				waited := make(chan error, 1)
				go func() { waited <- f.m.Wait(wctx) }()
				synctest.Wait() // every goroutine of the bubble is blocked: Wait has had its chance
				if tt.calls > 0 {
					select {
					case err := <-waited:
						t.Fatalf("Wait returned (%v) while %d calls were still ending", err, tt.calls)
					default:
					}
				}
				if tt.wantErr {
					wcancel() // shutdown gives up on the call that ignores its cancellation
					err := <-waited
					if !errors.Is(err, context.Canceled) || err == nil {
						t.Fatalf("Wait = %v, want the context's error", err)
					}
					if want := "1 calls still running"; !strings.Contains(err.Error(), want) {
						t.Errorf("Wait = %q, want it to say %q", err, want)
					}
					close(release)
					<-ended
					return
				}
				close(release)
				if err := <-waited; err != nil {
					t.Fatalf("Wait = %v, want nil once the calls ended", err)
				}
				<-ended
				for _, r := range f.rec.Records() {
					if r.Status == audit.StatusRunning || r.FinishedAt.IsZero() {
						t.Errorf("audit row %d (%s) not finished when Wait returned: %+v", r.ID, r.ToolCallID, r)
					}
				}
				if got := len(f.rec.Records()); got != tt.calls {
					t.Errorf("%d audit rows, want %d", got, tt.calls)
				}
			})
		})
	}
}
