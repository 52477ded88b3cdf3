package agent_test

import (
	"context"
	"fmt"
	"testing"

	"relaybot/agent"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	"relaybot/tools"
)

// parallelExecutor runs a round side by side: it ends the calls in reverse order, so the
// runner's ordering is what keeps the model's order.
type parallelExecutor struct {
	testExecutor
	ok      bool          // what Parallel answers
	block   chan struct{} // when not nil, RunParallel waits for it (or ctx) before ending a call
	rounds  int
	stopped chan struct{} // closed when RunParallel returned, when not nil
}

func (e *parallelExecutor) Parallel([]tools.Call) bool { return e.ok }

func (e *parallelExecutor) RunParallel(ctx context.Context, calls []tools.Call, done func(int, tools.Outcome)) []tools.Outcome {
	e.rounds++
	if e.stopped != nil {
		defer close(e.stopped)
	}
	outs := make([]tools.Outcome, len(calls))
	for i := len(calls) - 1; i >= 0; i-- {
		if e.block != nil {
			select {
			case <-e.block:
			case <-ctx.Done():
				outs[i] = tools.Outcome{Status: audit.StatusCancelled, Err: ctx.Err()}
				done(i, outs[i])
				continue
			}
		}
		outs[i] = tools.Outcome{Content: "result " + calls[i].ID, Status: audit.StatusOK}
		done(i, outs[i])
	}
	return outs
}

// A round the executor runs side by side: every ToolStart comes before any ToolResult, the
// results are emitted as the calls end, and the tool messages reach the model in its order.
func TestParallelRoundKeepsTheModelsOrder(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(llm.ToolCalls(llm.Call{ID: "a", Name: "shell", Args: []string{`{}`}}, llm.Call{ID: "b", Name: "shell", Args: []string{`{}`}},
		llm.Call{ID: "c", Name: "shell", Args: []string{`{}`}}), llm.Text("done"))
	r := newRunner(t, agent.Options{}, srv)
	exec := &parallelExecutor{ok: true}
	rec := &recorder{}
	res := r.Run(t.Context(), agent.Request{Messages: userTurn("go"), Tools: shellSpec, Executor: exec, Stream: true}, rec.emit)
	mustOK(t, res)
	if exec.rounds != 1 || len(exec.Calls()) != 0 {
		t.Fatalf("RunParallel ran %d rounds and Execute %d calls; want the round run side by side", exec.rounds, len(exec.Calls()))
	}
	var seq []string
	for _, e := range rec.events {
		switch e := e.(type) {
		case agent.ToolStart:
			seq = append(seq, "start "+e.Call.ID)
		case agent.ToolResult:
			seq = append(seq, "end "+e.Call.ID)
		}
	}
	if fmt.Sprint(seq) != "[start a start b start c end c end b end a]" {
		t.Fatalf("events %v, want every start first, then each end as it came", seq)
	}
	msgs := srv.Requests()[1].Messages
	var got []string
	for _, m := range msgs {
		if m.Role == "tool" {
			got = append(got, m.ToolCallID+"="+m.Content)
		}
	}
	if fmt.Sprint(got) != "[a=result a b=result b c=result c]" {
		t.Fatalf("tool messages %v, want the model's order", got)
	}
}

// Stopping a parallel round answers every call still running as cancelled at once; the
// executor gets the cancelled context.
func TestParallelRoundStops(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(llm.ToolCalls(llm.Call{ID: "a", Name: "shell", Args: []string{`{}`}}, llm.Call{ID: "b", Name: "shell", Args: []string{`{}`}}))
	r := newRunner(t, agent.Options{}, srv)
	exec := &parallelExecutor{ok: true, block: make(chan struct{}), stopped: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	started := 0
	res := r.Run(ctx, agent.Request{Messages: userTurn("go"), Tools: shellSpec, Executor: exec, Stream: true}, func(e agent.Event) {
		if _, ok := e.(agent.ToolStart); ok {
			if started++; started == 2 {
				cancel()
			}
		}
	})
	if res.Status != chat.StatusCancelled {
		t.Fatalf("turn ended %s, want cancelled", res.Status)
	}
	<-exec.stopped
	n := 0
	for _, m := range res.Messages {
		if m.Role == "tool" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d tool messages, want both calls answered", n)
	}
}

// An executor that says no runs the round one call after another, as before.
func TestRoundNotParallelRunsInOrder(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(llm.ToolCalls(llm.Call{ID: "a", Name: "shell", Args: []string{`{"command":"1"}`}},
		llm.Call{ID: "b", Name: "shell", Args: []string{`{"command":"2"}`}}), llm.Text("done"))
	r := newRunner(t, agent.Options{}, srv)
	exec := &parallelExecutor{ok: false}
	mustOK(t, r.Run(t.Context(), agent.Request{Messages: userTurn("go"), Tools: shellSpec, Executor: exec, Stream: true}, nil))
	if exec.rounds != 0 || len(exec.Calls()) != 2 {
		t.Fatalf("RunParallel ran %d rounds, Execute %d calls; want two calls one after another", exec.rounds, len(exec.Calls()))
	}
}
