package mcp_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"relaybot/audit"
	"relaybot/chat"
	testmcp "relaybot/internal/testkit/mcp"
	"relaybot/internal/testkit/wait"
	"relaybot/tools"
	"relaybot/tools/mcp"
	"relaybot/tools/toolstest"
)

// watcher is a Manager turn's progress sink and elicitor: it keeps what the calls reported and
// answers questions with the scripted answers in order.
type watcher struct {
	mu       sync.Mutex
	progress []tools.Progress
	asked    []tools.Elicitation
	answers  []tools.ElicitAnswer
	block    bool // questions wait for the end of their context
	closed   int  // questions that ended with their context
}

func (w *watcher) report(_ tools.Call, p tools.Progress) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.progress = append(w.progress, p)
}

func (w *watcher) reports() []tools.Progress {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]tools.Progress(nil), w.progress...)
}

func (w *watcher) Elicit(ctx context.Context, q tools.Elicitation) (tools.ElicitAnswer, error) {
	w.mu.Lock()
	w.asked = append(w.asked, q)
	n := len(w.asked)
	block := w.block || n > len(w.answers)
	w.mu.Unlock()
	if block {
		<-ctx.Done()
		w.mu.Lock()
		w.closed++
		w.mu.Unlock()
		return tools.ElicitAnswer{}, ctx.Err()
	}
	return w.answers[n-1], nil
}

func (w *watcher) questions() []tools.Elicitation {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]tools.Elicitation(nil), w.asked...)
}

// liveTurn is a Manager turn over one MCP server, watched by w.
func liveTurn(t *testing.T, cfg mcp.ServerConfig, w *watcher, opts tools.ManagerOptions) (*tools.Turn, *toolstest.Recorder) {
	t.Helper()
	l := startLoader(t, cfg)
	waitUp(t, l, cfg.Name)
	rec := toolstest.NewRecorder()
	m, err := tools.NewManager([]tools.Loader{l}, rec, opts)
	if err != nil {
		t.Fatal(err)
	}
	tt := m.ForTurn(tools.TurnInfo{Platform: "telegram", ChatID: "1", UserID: "7"}, nil)
	tt.SetProgress(w.report)
	tt.SetElicitor(w)
	return tt, rec
}

func exec(tt *tools.Turn, ctx context.Context, id, name string, args any) tools.Outcome {
	b, _ := json.Marshal(args)
	return tt.Execute(ctx, tools.Call{ToolCall: chat.ToolCall{ID: id, Name: name, Arguments: string(b)}, Round: 1})
}

// Every call carries a progress token: the server's progress notifications for it reach the
// call's watcher, and the audit row keeps the last message. A log message about the call does
// too.
func TestProgressAndLogMessagesReachTheCall(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			w := &watcher{}
			tt, rec := liveTurn(t, tr.serve(t, testmcp.New("kit"), 0), w, tools.ManagerOptions{})
			// The tools wait after they reported, until the test has seen the reports arrive
			// mid-call; then the call is stopped.
			last := func() tools.Progress {
				r := w.reports()
				if len(r) == 0 {
					return tools.Progress{}
				}
				return r[len(r)-1]
			}
			midCall := func(id, tool string, args map[string]any, want string) {
				t.Helper()
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan tools.Outcome, 1)
				go func() { done <- exec(tt, ctx, id, tool, args) }()
				wait.For(t, tool+"'s report mid-call", func() bool { return last().Message == want })
				cancel()
				<-done
			}
			midCall("c1", "progress", map[string]any{"steps": 3, "seconds": 60}, "step 3 of 3")
			// Streamable HTTP may deliver a session's notifications out of order; a report
			// overtaken by a later one is dropped, so the reports only grow.
			got := w.reports()
			for i := 1; i < len(got); i++ {
				if got[i].Done < got[i-1].Done {
					t.Fatalf("progress went back: %+v", got)
				}
			}
			if p := last(); p.Done != 3 || p.Total != 3 {
				t.Fatalf("last progress report = %+v, want 3 of 3", p)
			}
			wait.For(t, "the audit row", func() bool { return len(rec.Records()) == 1 && rec.Records()[0].Status != audit.StatusRunning })
			if p := rec.Records()[0].Progress; p != "step 3 of 3" {
				t.Fatalf("audit row progress = %q, want the last message", p)
			}
			if tr.name == "inprocess" {
				return // mcp-go's in-process transport delivers no log messages
			}
			midCall("c2", "log", map[string]any{"message": "reading page 3", "seconds": 60}, "reading page 3")
		})
	}
}

// A call the bot abandons (the call timeout, or the turn's context ending: /stop, the Stop
// button, the turn limit) is announced to the server with notifications/cancelled on every
// transport, and its audit row says timeout or cancelled.
func TestEveryAbandonedCallTellsTheServer(t *testing.T) {
	for _, tr := range transports {
		if tr.name == "inprocess" {
			continue // no wire to count on
		}
		t.Run(tr.name, func(t *testing.T) {
			k := testmcp.New("kit")
			w := &watcher{}
			tt, rec := liveTurn(t, tr.serve(t, k, 300*time.Millisecond), w, tools.ManagerOptions{})
			notices := func() int64 {
				if tr.name != "stdio" {
					return k.CancelNotices()
				}
				out := exec(tt, context.Background(), "n", "cancel_notices", map[string]any{})
				n, _ := strconv.ParseInt(strings.TrimSpace(out.Content), 10, 64)
				return n
			}
			out := exec(tt, context.Background(), "c1", "read_sleep", map[string]any{"seconds": 30})
			if out.Status != audit.StatusTimeout {
				t.Fatalf("a call past its timeout ended %s (%v), want timeout", out.Status, out.Err)
			}
			wait.For(t, "the server to be told of the timed-out call", func() bool { return notices() >= 1 })

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan tools.Outcome, 1)
			go func() { done <- exec(tt, ctx, "c2", "progress", map[string]any{"steps": 1, "seconds": 30}) }()
			wait.For(t, "the call to run", func() bool { return len(w.reports()) > 0 })
			cancel()
			if out := <-done; out.Status != audit.StatusCancelled {
				t.Fatalf("a stopped call ended %s (%v), want cancelled", out.Status, out.Err)
			}
			wait.For(t, "the server to be told of the stopped call", func() bool { return notices() >= 2 })
			wait.For(t, "the audit rows", func() bool {
				for _, r := range rec.Records() {
					if r.ToolCallID == "c2" {
						return r.Status == audit.StatusCancelled
					}
				}
				return false
			})
		})
	}
}

// A server's question during a call is asked through the turn's elicitor and its answer goes
// back as the spec's accept, decline or cancel; an answer that breaks the form is asked again
// once, then declined; a question nobody answers in time is cancelled. The audit row keeps
// question, answer and who gave it.
func TestElicitationAnswersReachTheServer(t *testing.T) {
	accept := func(c map[string]any) tools.ElicitAnswer {
		return tools.ElicitAnswer{Action: tools.ElicitAccept, Content: c, By: "Ann"}
	}
	cases := []struct {
		name    string
		form    string
		answers []tools.ElicitAnswer
		timeout time.Duration
		want    string
		asked   int
	}{
		{"accepted", "choice", []tools.ElicitAnswer{accept(map[string]any{"color": "green", "confirm": true})},
			0, `accept {"color":"green","confirm":true}`, 1},
		{"declined", "choice", []tools.ElicitAnswer{{Action: tools.ElicitDecline, By: "Ann"}}, 0, "decline null", 1},
		{"re-asked once", "text", []tools.ElicitAnswer{accept(map[string]any{"name": "Ann", "age": 200.0}),
			accept(map[string]any{"name": "Ann", "age": 33.0})}, 0, `accept {"age":33,"name":"Ann"}`, 2},
		{"broken twice", "text", []tools.ElicitAnswer{accept(map[string]any{"name": "Ann"}),
			accept(map[string]any{"name": "Ann", "age": "old"})}, 0, "decline null", 2},
		{"timeout", "choice", nil, 200 * time.Millisecond, "cancel null", 1},
		{"url", "url", []tools.ElicitAnswer{{Action: tools.ElicitAccept, By: "Ann"}}, 0, "accept null", 1},
	}
	for _, tr := range transports {
		if tr.name == "inprocess" || tr.name == "sse" {
			continue // mcp-go's in-process and SSE client transports carry no server requests
		}
		for _, c := range cases {
			t.Run(tr.name+"/"+c.name, func(t *testing.T) {
				w := &watcher{answers: c.answers}
				// Questions during a call are server requests on the 2025-11-25 session; on
				// 2026-07-28 they ride in the result (multi round-trip), which the kit does not do.
				tt, rec := liveTurn(t, serveLegacy(t, tr.name, testmcp.New("kit")), w, tools.ManagerOptions{ElicitationTimeout: c.timeout})
				out := exec(tt, context.Background(), "c1", "ask", map[string]any{"form": c.form})
				if out.Status != audit.StatusOK || out.Content != c.want {
					t.Fatalf("the tool saw %q (%s %v), want %q", out.Content, out.Status, out.Err, c.want)
				}
				qs := w.questions()
				if len(qs) != c.asked || qs[0].Tool != "ask" || qs[0].Server != "srv" {
					t.Fatalf("asked %d questions (%+v), want %d from ask on srv", len(qs), qs, c.asked)
				}
				if c.asked == 2 && qs[1].Problem == "" {
					t.Fatalf("the second question does not say what was wrong")
				}
				if c.form == "url" && (qs[0].Mode != tools.ElicitURL || qs[0].URL != "https://library.example/login?state=abc") {
					t.Fatalf("URL question = %+v", qs[0])
				}
				var asked []tools.Asked
				if err := json.Unmarshal([]byte(rec.Records()[0].Elicitation), &asked); err != nil || len(asked) != 1 {
					t.Fatalf("audit row elicitation = %q (%v)", rec.Records()[0].Elicitation, err)
				}
				if want := strings.Fields(c.want)[0]; string(asked[0].Action) != want {
					t.Fatalf("audit row says %q, want %q", asked[0].Action, want)
				}
			})
		}
	}
}

// Stopping a call while its question waits closes the question at once, on stdio too (where
// the question comes with the session's context, not the call's).
func TestStoppingACallClosesItsQuestion(t *testing.T) {
	for _, tr := range transports {
		if tr.name == "inprocess" || tr.name == "sse" {
			continue
		}
		t.Run(tr.name, func(t *testing.T) {
			w := &watcher{block: true}
			tt, _ := liveTurn(t, serveLegacy(t, tr.name, testmcp.New("kit")), w, tools.ManagerOptions{})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan tools.Outcome, 1)
			go func() { done <- exec(tt, ctx, "c1", "ask", map[string]any{"form": "choice"}) }()
			wait.For(t, "the question", func() bool { return len(w.questions()) == 1 })
			cancel()
			if out := <-done; out.Status != audit.StatusCancelled {
				t.Fatalf("the stopped call ended %s", out.Status)
			}
			wait.For(t, "the question to close", func() bool {
				w.mu.Lock()
				defer w.mu.Unlock()
				return w.closed == 1
			})
		})
	}
}

// Over a transport that cannot carry the server's requests (mcp-go's SSE client) the bot does
// not declare elicitation, so a server that would ask is refused at once instead of waiting.
func TestNoElicitationWhereTheTransportCannotCarryIt(t *testing.T) {
	w := &watcher{}
	tt, _ := liveTurn(t, mcp.ServerConfig{Name: "srv", Transport: "sse", Local: true, URL: testmcp.StartSSE(t, testmcp.New("kit")).URL}, w, tools.ManagerOptions{})
	out := exec(tt, context.Background(), "c1", "ask", map[string]any{"form": "choice"})
	if !strings.Contains(out.Content, "session does not support elicitation") || len(w.questions()) != 0 {
		t.Fatalf("the tool saw %q (%s), questions %d; want the server refused elicitation", out.Content, out.Status, len(w.questions()))
	}
}

// A tool annotated readOnlyHint is offered as read-only, and three calls to it run side by side:
// their spans on the server overlap, and the results keep the model's order. A round with a call
// to an unannotated tool runs one call after another.
func TestReadOnlyCallsOverlapOthersDoNot(t *testing.T) {
	k := testmcp.New("kit")
	w := &watcher{}
	tt, rec := liveTurn(t, mcp.ServerConfig{Name: "srv", Transport: "http", Local: true, URL: testmcp.StartHTTP(t, k).URL}, w, tools.ManagerOptions{})
	for _, s := range tt.Specs() {
		if (s.Name == "read_sleep") != s.ReadOnly {
			t.Fatalf("tool %s: ReadOnly = %v", s.Name, s.ReadOnly)
		}
	}
	round := func(names ...string) []tools.Call {
		var cs []tools.Call
		for i, n := range names {
			cs = append(cs, tools.Call{ToolCall: chat.ToolCall{ID: "c" + strconv.Itoa(i), Name: n, Arguments: `{"seconds":0.3}`}, Round: 1})
		}
		return cs
	}
	safe := round("read_sleep", "read_sleep", "read_sleep")
	if !tt.Parallel(safe) {
		t.Fatal("a round of read-only calls is not run side by side")
	}
	outs := tt.RunParallel(context.Background(), safe, nil)
	for i, o := range outs {
		if o.Status != audit.StatusOK || o.Content != "slept" {
			t.Fatalf("call %d: %s %q", i, o.Status, o.Content)
		}
	}
	recs := rec.Records()
	for i := range 3 {
		if recs[i].ToolCallID != "c"+strconv.Itoa(i) {
			t.Fatalf("audit rows out of the model's order: %v", []string{recs[0].ToolCallID, recs[1].ToolCallID, recs[2].ToolCallID})
		}
	}
	if !overlap(recs[0], recs[1]) || !overlap(recs[1], recs[2]) {
		t.Fatalf("the read-only calls did not overlap: %v", spans(recs))
	}
	if tt.Parallel(round("read_sleep", "sleep", "read_sleep")) {
		t.Fatal("a round with an unannotated call runs side by side")
	}
}

func overlap(a, b audit.Record) bool {
	return a.StartedAt.Before(b.FinishedAt) && b.StartedAt.Before(a.FinishedAt)
}

func spans(recs []audit.Record) []string {
	var s []string
	for _, r := range recs {
		s = append(s, r.StartedAt.Format("15:04:05.000")+"–"+r.FinishedAt.Format("15:04:05.000"))
	}
	return s
}
