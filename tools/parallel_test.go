package tools_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/policy"
	"relaybot/tools"
	"relaybot/tools/toolstest"
)

// barrier holds each call until n calls are running at once: a round that is not run side by
// side never gets there (its calls would wait forever, so they also give up when ctx ends).
type barrier struct {
	mu      sync.Mutex
	n       int
	running int
	all     chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, all: make(chan struct{})} }

func (b *barrier) tool(fail bool) func(context.Context, tools.Invocation) (tools.Result, error) {
	return func(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
		b.mu.Lock()
		b.running++
		if b.running == b.n {
			close(b.all)
		}
		b.mu.Unlock()
		select {
		case <-b.all:
		case <-ctx.Done():
			return tools.Result{}, ctx.Err()
		}
		if fail {
			return tools.Result{}, errors.New("broken")
		}
		<-ctx.Done() // the siblings of a failed call wait to be cancelled
		return tools.Result{}, ctx.Err()
	}
}

func roundOf(names ...string) []tools.Call {
	cs := make([]tools.Call, len(names))
	for i, n := range names {
		cs[i] = tools.Call{ToolCall: chat.ToolCall{ID: "c" + strconv.Itoa(i), Name: n, Arguments: "{}"}, Round: 2}
	}
	return cs
}

// When one call of a parallel round fails, the calls still running are cancelled (their
// servers are told) and say why; every call has its outcome in the model's order and its audit
// row in that order too.
func TestParallelSiblingFailureCancelsTheOthers(t *testing.T) {
	b := newBarrier(3)
	stub := newStub(audit.SourceMCP, "docs").add("a", b.tool(false)).add("b", b.tool(true)).add("c", b.tool(false))
	rec := toolstest.NewRecorder()
	m, err := tools.NewManager([]tools.Loader{stub}, rec, tools.ManagerOptions{ParallelTools: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	tt := m.ForTurn(tools.TurnInfo{}, nil)
	calls := roundOf("a", "b", "c")
	if !tt.Parallel(calls) {
		t.Fatal("tools configured parallel do not run side by side")
	}
	var ended []int
	outs := tt.RunParallel(context.Background(), calls, func(i int, _ tools.Outcome) { ended = append(ended, i) })
	if len(ended) != 3 || ended[0] != 1 {
		t.Fatalf("calls ended in order %v, want the failed one first", ended)
	}
	for i, want := range []audit.Status{audit.StatusCancelled, audit.StatusError, audit.StatusCancelled} {
		if outs[i].Status != want {
			t.Fatalf("call %d ended %s (%v), want %s", i, outs[i].Status, outs[i].Err, want)
		}
	}
	if !errors.Is(outs[0].Err, tools.ErrSiblingFailed) {
		t.Fatalf("a cancelled sibling says %v, want that another call failed", outs[0].Err)
	}
	recs := rec.Records()
	for i, r := range recs {
		if r.ToolCallID != "c"+strconv.Itoa(i) || r.Round != 2 {
			t.Fatalf("audit row %d is %s of round %d; rows must keep the model's order", i, r.ToolCallID, r.Round)
		}
	}
}

// parallel = "off" and a round with a tool nobody declared safe run one call after another.
func TestRoundsThatStaySerial(t *testing.T) {
	stub := newStub(audit.SourceMCP, "docs").add("read", text("r")).add("write", text("w"))
	for _, c := range []struct {
		name  string
		opts  tools.ManagerOptions
		calls []tools.Call
	}{
		{"off", tools.ManagerOptions{Parallel: tools.ParallelOff, ParallelTools: []string{"read"}}, roundOf("read", "read")},
		{"an unsafe call", tools.ManagerOptions{ParallelTools: []string{"read"}}, roundOf("read", "write")},
		{"an unknown tool", tools.ManagerOptions{ParallelTools: []string{"read"}}, roundOf("read", "nope")},
		{"one call", tools.ManagerOptions{ParallelTools: []string{"read"}}, roundOf("read")},
		{"max_parallel 1", tools.ManagerOptions{ParallelTools: []string{"read"}, MaxParallel: 1}, roundOf("read", "read")},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := tools.NewManager([]tools.Loader{stub}, toolstest.NewRecorder(), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if m.ForTurn(tools.TurnInfo{}, nil).Parallel(c.calls) {
				t.Fatal("the round would run side by side")
			}
		})
	}
	if _, err := tools.NewManager([]tools.Loader{stub}, toolstest.NewRecorder(), tools.ManagerOptions{Parallel: "always"}); err == nil {
		t.Fatal("an unknown parallel mode was accepted")
	}
}

// An ask rule's approvals are asked one after another before any call of a parallel round runs.
func TestParallelRoundAsksApprovalsFirst(t *testing.T) {
	var mu sync.Mutex
	var log []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		log = append(log, s)
	}
	stub := newStub(audit.SourceMCP, "docs").add("read", func(context.Context, tools.Invocation) (tools.Result, error) {
		note("ran")
		return tools.Result{Text: "ok"}, nil
	})
	policy, err := tools.NewPolicy([]policy.Rule{{Tool: "read", Action: policy.ActionAsk}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := tools.NewManager([]tools.Loader{stub}, toolstest.NewRecorder(), tools.ManagerOptions{Policy: policy, ParallelTools: []string{"read"}})
	if err != nil {
		t.Fatal(err)
	}
	tt := m.ForTurn(tools.TurnInfo{}, nil)
	tt.SetApprover(approverFunc(func(context.Context, tools.ApprovalRequest) (tools.Approval, error) {
		note("asked")
		return tools.Approval{Decision: tools.DecisionApproved, By: "Ann"}, nil
	}))
	outs := tt.RunParallel(context.Background(), roundOf("read", "read", "read"), nil)
	for _, o := range outs {
		if o.Status != audit.StatusOK {
			t.Fatalf("approved call ended %s (%v)", o.Status, o.Err)
		}
	}
	if len(log) != 6 || log[0] != "asked" || log[1] != "asked" || log[2] != "asked" {
		t.Fatalf("events %v, want three approvals before any call ran", log)
	}
}

type approverFunc func(context.Context, tools.ApprovalRequest) (tools.Approval, error)

func (f approverFunc) Approve(ctx context.Context, r tools.ApprovalRequest) (tools.Approval, error) {
	return f(ctx, r)
}

// A progress report that arrives after a later one is stale and not shown: progress only grows.
func TestStaleProgressIsDropped(t *testing.T) {
	stub := newStub(audit.SourceMCP, "docs").add("work", func(_ context.Context, inv tools.Invocation) (tools.Result, error) {
		inv.Running.Progress(tools.Progress{Done: 2, Total: 4, Message: "step 2"})
		inv.Running.Progress(tools.Progress{Done: 1, Total: 4, Message: "step 1"}) // overtaken
		inv.Running.Progress(tools.Progress{Message: "reading"})                   // a log message
		return tools.Result{Text: "ok"}, nil
	})
	rec := toolstest.NewRecorder()
	m, err := tools.NewManager([]tools.Loader{stub}, rec, tools.ManagerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tt := m.ForTurn(tools.TurnInfo{}, nil)
	var seen []string
	tt.SetProgress(func(_ tools.Call, p tools.Progress) { seen = append(seen, p.Message) })
	tt.Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{ID: "c", Name: "work"}})
	if len(seen) != 2 || seen[0] != "step 2" || seen[1] != "reading" {
		t.Fatalf("progress shown %q, want step 2 then the log message", seen)
	}
	if got := rec.Records()[0].Progress; got != "reading" {
		t.Fatalf("audit row keeps %q, want the last message shown", got)
	}
}
