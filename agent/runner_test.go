package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"relaybot/agent"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	"relaybot/provider"
	"relaybot/tools"
)

// newServers starts n fake APIs closed at the end of the test.
func newServers(t *testing.T, n int) []*llm.Server {
	t.Helper()
	out := make([]*llm.Server, n)
	for i := range out {
		out[i] = llm.NewServer()
		t.Cleanup(out[i].Close)
	}
	return out
}

// newRunner makes a runner with one tool-capable candidate per server, named m1, m2, ...
func newRunner(t *testing.T, opts agent.Options, servers ...*llm.Server) *agent.Runner {
	t.Helper()
	models := make([]agent.Model, len(servers))
	for i, s := range servers {
		models[i] = agent.Model{Endpoint: provider.Endpoint{Name: fmt.Sprintf("m%d", i+1), BaseURL: s.URL, APIKey: "sk-test", Model: "fake-model", Timeout: 10 * time.Second}, SupportsTools: true}
	}
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	opts.HTTPClient = &http.Client{Transport: transport}
	r, err := agent.NewRunner(models, opts)
	if err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	return r
}

var shellSpec = []tools.Spec{
	{Name: "shell", Description: "run a command", Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}}}`)},
	{Name: "wait", Description: "waits until cancelled"},
}

// testExecutor knows "shell" (echoes its command) and "wait" (blocks until ctx ends). Like
// tools.Manager it answers bad JSON and unknown tools with "err: ...".
type testExecutor struct {
	mu      sync.Mutex
	calls   []tools.Call
	started chan tools.Call // receives "wait" calls when not nil
	ended   chan struct{}   // closed when a "wait" call returns, when not nil
}

func (e *testExecutor) Execute(ctx context.Context, call tools.Call) tools.Outcome {
	e.mu.Lock()
	e.calls = append(e.calls, call)
	e.mu.Unlock()
	var args map[string]any
	if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
		return tools.Outcome{Content: "err: invalid arguments: " + err.Error(), Status: audit.StatusBadArgs, Err: err}
	}
	switch call.Name {
	case "shell":
		return tools.Outcome{Content: fmt.Sprintf("ran %v", args["command"]), Status: audit.StatusOK}
	case "wait":
		if e.ended != nil {
			defer close(e.ended)
		}
		if e.started != nil {
			e.started <- call
		}
		<-ctx.Done()
		return tools.Outcome{Content: "err: cancelled", Status: audit.StatusCancelled, Err: ctx.Err()}
	}
	return tools.Outcome{Content: "err: Tool not found: " + call.Name, Status: audit.StatusNotFound, Err: tools.ErrNotFound}
}

func (e *testExecutor) Skip(_ context.Context, _ tools.Call, reason error) tools.Outcome {
	return tools.NotRun(reason)
}

func (e *testExecutor) Calls() []tools.Call {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.calls)
}

type recorder struct{ events []agent.Event }

func (r *recorder) emit(e agent.Event) { r.events = append(r.events, e) }

func (r *recorder) chunks() []agent.Chunk {
	var out []agent.Chunk
	for _, e := range r.events {
		if c, ok := e.(agent.Chunk); ok {
			out = append(out, c)
		}
	}
	return out
}

func userTurn(text string) []chat.Message {
	return []chat.Message{{Role: chat.RoleSystem, Content: "be brief"}, {Role: chat.RoleUser, Content: text}}
}

func roles(msgs []chat.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Role))
	}
	return out
}

func mustOK(t *testing.T, res *agent.Result) {
	t.Helper()
	if res.Status != chat.StatusOK || res.Err != nil {
		t.Fatalf("turn: status %s, err %v", res.Status, res.Err)
	}
}

func TestToolRound(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			srv := newServers(t, 1)[0]
			round1 := llm.ToolCalls(llm.Call{ID: "call_a", Name: "shell", Args: []string{`{"command":"pwd"}`}})
			round1.Chunks = append([]llm.Chunk{{Content: "Let me check. "}}, round1.Chunks...)
			srv.Push(round1, llm.Text("You are ", "in /work."))
			r := newRunner(t, agent.Options{}, srv)
			var rec recorder
			exec := &testExecutor{}
			res := r.Run(t.Context(), agent.Request{Messages: userTurn("where am I?"), Tools: shellSpec, Executor: exec, Stream: stream}, rec.emit)
			mustOK(t, res)

			if got, want := roles(res.Messages), []string{"assistant", "tool", "assistant"}; !slices.Equal(got, want) {
				t.Fatalf("new history roles = %v, want %v", got, want)
			}
			if tc := res.Messages[0].ToolCalls; len(tc) != 1 || tc[0].ID != "call_a" || tc[0].Name != "shell" {
				t.Errorf("assistant tool calls = %+v", tc)
			}
			if m := res.Messages[1]; m.ToolCallID != "call_a" || m.Content != "ran pwd" {
				t.Errorf("tool message = %+v", m)
			}
			final := res.Messages[2]
			if final.Content != "You are in /work." || strings.Contains(final.Content, "Let me check") {
				t.Errorf("final content = %q, want only the round-2 text", final.Content)
			}
			chunks := rec.chunks()
			last := chunks[len(chunks)-1]
			if !last.Final || last.Round != 2 || last.Text != "You are in /work." || len(last.ToolCalls) != 0 {
				t.Errorf("last chunk = %+v, want final round-2 text exactly", last)
			}
			// Round 1's final chunk carries the assembled call; no earlier chunk does.
			for _, c := range chunks {
				if len(c.ToolCalls) > 0 && (!c.Final || c.Round != 1) {
					t.Errorf("tool calls on a non-final chunk: %+v", c)
				}
			}
			if calls := exec.Calls(); len(calls) != 1 || calls[0].Round != 1 || calls[0].Arguments != `{"command":"pwd"}` {
				t.Errorf("executor calls = %+v", calls)
			}
			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("model calls = %d, want 2", len(reqs))
			}
			if reqs[0].Stream != stream || reqs[0].IncludeUsage != stream {
				t.Errorf("request 1: stream %v include_usage %v, want %v", reqs[0].Stream, reqs[0].IncludeUsage, stream)
			}
			got := reqs[1].Messages
			if len(got) != 4 || got[2].Role != "assistant" || got[3].Role != "tool" || got[3].ToolCallID != "call_a" || got[3].Content != "ran pwd" {
				t.Errorf("round-2 request messages = %+v", got)
			}
			if len(res.LLMCalls) != 2 || res.LLMCalls[0].Status != chat.StatusOK || res.Usage.TokensOut == 0 || res.Usage.TokensIn == 0 {
				t.Errorf("LLM calls %+v, usage %+v", res.LLMCalls, res.Usage)
			}
		})
	}
}

func TestFlushCadence(t *testing.T) {
	srv := newServers(t, 1)[0]
	parts := make([]string, 19) // + the finish chunk = 20 raw chunks
	for i := range parts {
		parts[i] = fmt.Sprintf("w%d ", i+1)
	}
	srv.Push(llm.Text(parts...))
	r := newRunner(t, agent.Options{}, srv)
	var rec recorder
	res := r.Run(t.Context(), agent.Request{Messages: userTurn("count"), Stream: true}, rec.emit)
	mustOK(t, res)
	chunks := rec.chunks()
	want := []agent.Chunk{
		{Round: 1, Text: parts[0]},
		{Round: 1, Text: strings.Join(parts[:8], "")},
		{Round: 1, Text: strings.Join(parts[:16], "")},
		{Round: 1, Text: strings.Join(parts, ""), Final: true},
	}
	if len(chunks) != len(want) {
		t.Fatalf("chunks = %+v, want flushes at the first words, raw chunks 8, 16 and the final", chunks)
	}
	for i := range want {
		if chunks[i].Text != want[i].Text || chunks[i].Final != want[i].Final || chunks[i].Round != 1 {
			t.Errorf("chunk %d = %+v, want %+v", i, chunks[i], want[i])
		}
	}
}

func TestToolCallAssembly(t *testing.T) {
	cases := []struct {
		name      string
		reply     llm.Reply
		wantCalls []chat.ToolCall
	}{
		{
			name:      "fragmented arguments merge",
			reply:     llm.ToolCalls(llm.Call{ID: "call_x", Name: "shell", Args: []string{`{"command":`, `"pwd"}`}}),
			wantCalls: []chat.ToolCall{{ID: "call_x", Name: "shell", Arguments: `{"command":"pwd"}`}},
		},
		{
			name: "id-less parallel calls get call_round_index and run in order",
			reply: llm.ToolCalls(
				llm.Call{Name: "shell", Args: []string{`{"command":"a"}`}},
				llm.Call{Name: "shell", Args: []string{`{"comm`, `and":"b"}`}},
			),
			wantCalls: []chat.ToolCall{
				{ID: "call_1_0", Name: "shell", Arguments: `{"command":"a"}`},
				{ID: "call_1_1", Name: "shell", Arguments: `{"command":"b"}`},
			},
		},
		{
			name:      "empty arguments mean {}",
			reply:     llm.ToolCalls(llm.Call{ID: "c1", Name: "shell"}),
			wantCalls: []chat.ToolCall{{ID: "c1", Name: "shell", Arguments: "{}"}},
		},
		{
			name: "interleaved fragments by index, id only on the first",
			reply: llm.Reply{Chunks: []llm.Chunk{
				{ToolCalls: []llm.ToolCallDelta{{Index: 0, ID: "a", Name: "shell", Arguments: `{"command"`}}},
				{ToolCalls: []llm.ToolCallDelta{{Index: 1, ID: "b", Name: "shell", Arguments: `{"command"`}}},
				{ToolCalls: []llm.ToolCallDelta{{Index: 0, Arguments: `:"x"}`}, {Index: 1, Name: "ignored", Arguments: `:"y"}`}}},
			}},
			wantCalls: []chat.ToolCall{
				{ID: "a", Name: "shell", Arguments: `{"command":"x"}`},
				{ID: "b", Name: "shell", Arguments: `{"command":"y"}`},
			},
		},
	}
	for _, tc := range cases {
		for _, stream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stream=%v", tc.name, stream), func(t *testing.T) {
				srv := newServers(t, 1)[0]
				srv.Push(tc.reply, llm.Text("done"))
				r := newRunner(t, agent.Options{}, srv)
				exec := &testExecutor{}
				res := r.Run(t.Context(), agent.Request{Messages: userTurn("go"), Tools: shellSpec, Executor: exec, Stream: stream}, nil)
				mustOK(t, res)
				if got := res.Messages[0].ToolCalls; !reflect.DeepEqual(got, tc.wantCalls) {
					t.Errorf("tool calls = %+v, want %+v", got, tc.wantCalls)
				}
				var ran []string
				for _, c := range exec.Calls() {
					ran = append(ran, c.ID+" "+c.Arguments)
				}
				var want []string
				for _, c := range tc.wantCalls {
					want = append(want, c.ID+" "+c.Arguments)
				}
				if !slices.Equal(ran, want) {
					t.Errorf("executed %v, want %v in order", ran, want)
				}
				msgs := srv.Requests()[1].Messages
				for i, c := range tc.wantCalls {
					if m := msgs[3+i]; m.Role != "tool" || m.ToolCallID != c.ID {
						t.Errorf("tool message %d = %+v, want answer to %s", i, m, c.ID)
					}
				}
			})
		}
	}
}

func TestThink(t *testing.T) {
	cases := []struct {
		name          string
		remove        bool
		reply         llm.Reply
		wantShown     string
		wantContent   string
		wantReasoning string
	}{
		{
			name: "tags split across chunks", remove: true,
			reply:     llm.Text("<thi", "nk>hidden", " reasoning</think>Answer"),
			wantShown: "Answer", wantContent: "Answer", wantReasoning: "hidden reasoning",
		},
		{
			name: "leading orphan close", remove: true,
			reply:     llm.Text("I should ", "greet.</thi", "nk>\n\nHello"),
			wantShown: "Hello", wantContent: "Hello", wantReasoning: "I should greet.",
		},
		{
			name: "block in the middle", remove: true,
			reply:     llm.Text("Use <think>x</think> as", " a name"),
			wantShown: "Use  as a name", wantContent: "Use  as a name", wantReasoning: "x",
		},
		{
			name: "a lone < is kept", remove: true,
			reply:     llm.Text("1 <", " 2"),
			wantShown: "1 < 2", wantContent: "1 < 2",
		},
		{
			name: "reasoning_content hidden when removing", remove: true,
			reply:     llm.Reply{Chunks: []llm.Chunk{{Reasoning: "think "}, {Reasoning: "hard"}, {Content: "42"}}},
			wantShown: "42", wantContent: "42", wantReasoning: "think hard",
		},
		{
			name:      "reasoning_content shown in a think block by default",
			reply:     llm.Reply{Chunks: []llm.Chunk{{Reasoning: "think "}, {Reasoning: "hard"}, {Content: "42"}}},
			wantShown: "<think>\nthink hard\n</think>\n42", wantContent: "42", wantReasoning: "think hard",
		},
		{
			name:      "think tags kept by default",
			reply:     llm.Text("<think>x</think>", "y"),
			wantShown: "<think>x</think>y", wantContent: "<think>x</think>y",
		},
	}
	for _, tc := range cases {
		for _, stream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stream=%v", tc.name, stream), func(t *testing.T) {
				srv := newServers(t, 1)[0]
				srv.Push(tc.reply)
				r := newRunner(t, agent.Options{RemoveThink: tc.remove, FlushChunks: 1}, srv)
				var rec recorder
				res := r.Run(t.Context(), agent.Request{Messages: userTurn("q"), Stream: stream}, rec.emit)
				mustOK(t, res)
				chunks := rec.chunks()
				if last := chunks[len(chunks)-1]; last.Text != tc.wantShown || !last.Final {
					t.Errorf("shown = %q, want %q", last.Text, tc.wantShown)
				}
				if tc.remove {
					for _, c := range chunks {
						if strings.Contains(c.Text, "think") || strings.Contains(c.Text, "hidden") {
							t.Errorf("chunk shows reasoning: %q", c.Text)
						}
					}
				}
				m := res.Messages[0]
				if m.Content != tc.wantContent || m.Reasoning != tc.wantReasoning {
					t.Errorf("message content %q reasoning %q, want %q and %q", m.Content, m.Reasoning, tc.wantContent, tc.wantReasoning)
				}
			})
		}
	}
}

func TestToolFailuresGoBackToTheModel(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(
		llm.ToolCalls(
			llm.Call{ID: "bad", Name: "shell", Args: []string{`{"command":`}},
			llm.Call{ID: "nope", Name: "launch_rockets", Args: []string{`{}`}},
		),
		llm.Text("Sorry, both failed."),
	)
	r := newRunner(t, agent.Options{}, srv)
	var rec recorder
	res := r.Run(t.Context(), agent.Request{Messages: userTurn("go"), Tools: shellSpec, Executor: &testExecutor{}, Stream: true}, rec.emit)
	mustOK(t, res)
	if res.Messages[len(res.Messages)-1].Content != "Sorry, both failed." {
		t.Errorf("final answer = %+v", res.Messages[len(res.Messages)-1])
	}
	msgs := srv.Requests()[1].Messages
	bad, nope := msgs[3], msgs[4]
	if bad.ToolCallID != "bad" || !strings.HasPrefix(bad.Content, "err: ") {
		t.Errorf("bad JSON tool message = %+v, want err: ...", bad)
	}
	if nope.ToolCallID != "nope" || nope.Content != "err: Tool not found: launch_rockets" {
		t.Errorf("unknown tool message = %+v", nope)
	}
	var results []agent.ToolResult
	for _, e := range rec.events {
		if tr, ok := e.(agent.ToolResult); ok {
			results = append(results, tr)
		}
	}
	if len(results) != 2 || results[1].Outcome.Status != audit.StatusNotFound {
		t.Errorf("tool result events = %+v", results)
	}
}

func TestNoExecutorAnswersToolNotFound(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(llm.ToolCalls(llm.Call{ID: "c", Name: "shell"}), llm.Text("ok"))
	r := newRunner(t, agent.Options{}, srv)
	res := r.Run(t.Context(), agent.Request{Messages: userTurn("go"), Tools: shellSpec, Stream: true}, nil)
	mustOK(t, res)
	if got := res.Messages[1].Content; got != "err: Tool not found: shell" {
		t.Errorf("tool message = %q", got)
	}
}

func TestFallback(t *testing.T) {
	cases := []struct {
		name  string
		first llm.Reply
		// timeout for candidate 1, to catch a hang
		timeout time.Duration
	}{
		{name: "500", first: llm.Fault(500, "upstream exploded")},
		{name: "429", first: llm.Reply{Status: 429, Error: "slow down", RetryAfter: 3}},
		{name: "empty stream without finish", first: llm.Reply{Cut: true}},
		{name: "hang before the first chunk", first: llm.Reply{Hang: true}, timeout: 200 * time.Millisecond},
	}
	for _, tc := range cases {
		for _, stream := range []bool{true, false} {
			if tc.name == "empty stream without finish" && !stream {
				continue
			}
			t.Run(fmt.Sprintf("%s/stream=%v", tc.name, stream), func(t *testing.T) {
				srvs := newServers(t, 2)
				srvs[0].Push(tc.first)
				srvs[1].Push(llm.Text("from ", "backup"))
				models := []agent.Model{
					{Endpoint: provider.Endpoint{Name: "primary", BaseURL: srvs[0].URL, Model: "a", Timeout: tc.timeout}},
					{Endpoint: provider.Endpoint{Name: "backup", BaseURL: srvs[1].URL, Model: "b"}},
				}
				r, err := agent.NewRunner(models, agent.Options{})
				if err != nil {
					t.Fatal(err)
				}
				res := r.Run(t.Context(), agent.Request{Messages: userTurn("hi"), Stream: stream}, nil)
				mustOK(t, res)
				if got := res.Messages[0].Content; got != "from backup" {
					t.Errorf("answer = %q", got)
				}
				if len(res.LLMCalls) != 2 {
					t.Fatalf("LLM calls = %+v", res.LLMCalls)
				}
				failed, ok := res.LLMCalls[0], res.LLMCalls[1]
				if failed.Model != "primary" || failed.Status != chat.StatusError || failed.Err == nil {
					t.Errorf("failed call = %+v", failed)
				}
				if ok.Model != "backup" || ok.Candidate != 1 || ok.Status != chat.StatusOK || ok.FallbackReason == "" {
					t.Errorf("fallback call = %+v", ok)
				}
				if !strings.Contains(ok.FallbackReason, "primary") {
					t.Errorf("fallback reason %q does not name the failed model", ok.FallbackReason)
				}
			})
		}
	}
}

func TestOnlyTransientErrorsMoveToTheNextModel(t *testing.T) {
	cases := []struct {
		name         string
		first        llm.Reply
		fallback     bool
		contextLimit bool // the turn's error is agent.ErrContextTooLong
		inError      string
	}{
		{name: "rate limit", first: llm.Fault(429, "slow down"), fallback: true},
		{name: "overloaded", first: llm.Fault(529, "Overloaded"), fallback: true},
		{name: "unavailable", first: llm.Fault(503, "try later"), fallback: true},
		{name: "server error", first: llm.Fault(500, "boom"), fallback: true},
		{name: "wrong key", first: llm.Fault(401, "Incorrect API key provided"), inError: "api_key"},
		{name: "no access", first: llm.Fault(403, "forbidden"), inError: "credentials"},
		{name: "bad request", first: llm.Fault(400, "messages: roles must alternate"), inError: "roles must alternate"},
		{name: "unknown model", first: llm.Fault(404, "model_not_found"), inError: "base_url and model"},
		{name: "context too long", first: llm.Fault(400, "This model's maximum context length is 8192 tokens"), contextLimit: true, inError: "context"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srvs := newServers(t, 2)
			srvs[0].Push(tc.first)
			srvs[1].Push(llm.Text("from backup"))
			r := newRunner(t, agent.Options{}, srvs...)
			res := r.Run(t.Context(), agent.Request{Messages: userTurn("hi"), Stream: true}, nil)
			if tc.fallback {
				mustOK(t, res)
				if got := res.Messages[0].Content; got != "from backup" {
					t.Errorf("answer = %q, want the backup's", got)
				}
				return
			}
			if res.Status != chat.StatusError {
				t.Fatalf("status %s (answer %+v): a %s must fail the turn, not fall back", res.Status, res.Messages, tc.name)
			}
			if n := srvs[1].RequestCount(); n != 0 {
				t.Errorf("the backup was asked %d times; a fallback hides the primary's misconfiguration", n)
			}
			if !strings.Contains(res.Err.Error(), tc.inError) {
				t.Errorf("error %q does not say %q", res.Err, tc.inError)
			}
			if got := errors.Is(res.Err, agent.ErrContextTooLong); got != tc.contextLimit {
				t.Errorf("errors.Is(err, ErrContextTooLong) = %v, want %v (err %v)", got, tc.contextLimit, res.Err)
			}
			var me *agent.ModelError
			if !errors.As(res.Err, &me) || me.Kind.Transient() {
				t.Errorf("error %v is not a *ModelError of a lasting kind", res.Err)
			}
		})
	}
}

func TestContextTooLongInALaterRoundIsTyped(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(llm.ToolCalls(llm.Call{ID: "c1", Name: "shell", Args: []string{`{"command":"cat big"}`}}),
		llm.Fault(400, "prompt is too long: 210000 tokens > 200000 maximum"))
	r := newRunner(t, agent.Options{}, srv)
	res := r.Run(t.Context(), agent.Request{Messages: userTurn("read it"), Tools: shellSpec, Executor: &testExecutor{}, Stream: true}, nil)
	if res.Status != chat.StatusError || !errors.Is(res.Err, agent.ErrContextTooLong) {
		t.Fatalf("status %s err %v, want ErrContextTooLong so the pipeline can compact and retry", res.Status, res.Err)
	}
	if got := roles(res.Messages); !slices.Equal(got, []string{"assistant", "tool"}) {
		t.Errorf("completed part = %v", got)
	}
}

func TestAllCandidatesFail(t *testing.T) {
	srvs := newServers(t, 2)
	srvs[0].Push(llm.Fault(500, "one"))
	srvs[1].Push(llm.Fault(503, "two down"))
	r := newRunner(t, agent.Options{}, srvs...)
	res := r.Run(t.Context(), agent.Request{Messages: userTurn("hi"), Stream: true}, nil)
	if res.Status != chat.StatusError || res.Err == nil || !strings.Contains(res.Err.Error(), "two down") {
		t.Fatalf("result = %+v, want the last candidate's error", res)
	}
	if strings.Contains(res.Err.Error(), "sk-test") {
		t.Errorf("error leaks the API key: %v", res.Err)
	}
}

func TestNoFallbackAfterFirstChunk(t *testing.T) {
	srvs := newServers(t, 2)
	srvs[0].Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Half an "}, {Content: "answer"}}, Cut: true})
	srvs[1].Push(llm.Text("should never be asked"))
	r := newRunner(t, agent.Options{}, srvs...)
	var rec recorder
	res := r.Run(t.Context(), agent.Request{Messages: userTurn("hi"), Stream: true}, rec.emit)
	if res.Status != chat.StatusError || res.Err == nil || !strings.Contains(res.Err.Error(), "finish_reason") {
		t.Fatalf("status %s err %v, want an error about the missing finish_reason", res.Status, res.Err)
	}
	if res.PartialText != "Half an answer" {
		t.Errorf("partial text = %q", res.PartialText)
	}
	if n := srvs[1].RequestCount(); n != 0 {
		t.Errorf("candidate 2 got %d requests, want none", n)
	}
	if len(res.Messages) != 0 {
		t.Errorf("messages = %+v, want none for a failed first round", res.Messages)
	}
}

func TestHangAfterFirstChunkIsTheTurnsError(t *testing.T) {
	srvs := newServers(t, 2)
	srvs[0].Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Thinking about"}}, Hang: true})
	srvs[1].Push(llm.Text("should never be asked"))
	models := []agent.Model{
		{Endpoint: provider.Endpoint{Name: "slow", BaseURL: srvs[0].URL, Model: "a", Timeout: 200 * time.Millisecond}},
		{Endpoint: provider.Endpoint{Name: "backup", BaseURL: srvs[1].URL, Model: "b"}},
	}
	r, err := agent.NewRunner(models, agent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res := r.Run(t.Context(), agent.Request{Messages: userTurn("hi"), Stream: true}, nil)
	if res.Status != chat.StatusError || !strings.Contains(res.Err.Error(), "no data within 200ms") {
		t.Fatalf("status %s err %v", res.Status, res.Err)
	}
	if res.PartialText != "Thinking about" || srvs[1].RequestCount() != 0 {
		t.Errorf("partial %q, backup requests %d", res.PartialText, srvs[1].RequestCount())
	}
}

type panickyExecutor struct{}

func (panickyExecutor) Execute(context.Context, tools.Call) tools.Outcome { panic("boom") }

func (panickyExecutor) Skip(_ context.Context, _ tools.Call, reason error) tools.Outcome {
	return tools.NotRun(reason)
}

func TestPanickingToolGoesBackAsError(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(llm.ToolCalls(llm.Call{ID: "p", Name: "shell"}), llm.Text("that broke"))
	r := newRunner(t, agent.Options{}, srv)
	res := r.Run(t.Context(), agent.Request{Messages: userTurn("go"), Tools: shellSpec, Executor: panickyExecutor{}, Stream: true}, nil)
	mustOK(t, res)
	if got := res.Messages[1].Content; got != "err: tool shell panicked: boom" {
		t.Errorf("tool message = %q", got)
	}
}

func TestToolRoundsNeverSwitchModel(t *testing.T) {
	srvs := newServers(t, 3)
	// Candidate 1 is down; candidate 2 serves round 1 and must serve round 2 too, even though it fails.
	srvs[0].Push(llm.Fault(500, "down"), llm.Text("not me"))
	srvs[1].Push(llm.ToolCalls(llm.Call{ID: "c", Name: "shell", Args: []string{`{"command":"ls"}`}}), llm.Fault(500, "round two broke"))
	srvs[2].Push(llm.Text("not me either"))
	r := newRunner(t, agent.Options{}, srvs...)
	res := r.Run(t.Context(), agent.Request{Messages: userTurn("hi"), Tools: shellSpec, Executor: &testExecutor{}, Stream: true}, nil)
	if res.Status != chat.StatusError || !strings.Contains(res.Err.Error(), "round two broke") {
		t.Fatalf("status %s err %v", res.Status, res.Err)
	}
	if a, b, c := srvs[0].RequestCount(), srvs[1].RequestCount(), srvs[2].RequestCount(); a != 1 || b != 2 || c != 0 {
		t.Errorf("requests per candidate = %d, %d, %d; want 1, 2, 0", a, b, c)
	}
	// The completed round stays a valid transcript: tool calls with their results.
	if got := roles(res.Messages); !slices.Equal(got, []string{"assistant", "tool"}) {
		t.Errorf("messages = %v", got)
	}
}

func TestRoundCap(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			srv := newServers(t, 1)[0]
			var mu sync.Mutex
			calls := 0
			srv.SetHandler(func(req llm.Request) llm.Reply {
				mu.Lock()
				defer mu.Unlock()
				calls++
				if calls > 10 {
					return llm.Fault(500, "runaway: the cap did not stop the loop")
				}
				if string(req.ToolChoice) == `"none"` {
					return llm.Text("Final answer without tools.")
				}
				return llm.ToolCalls(llm.Call{ID: fmt.Sprintf("c%d", calls), Name: "shell", Args: []string{`{"command":"again"}`}})
			})
			r := newRunner(t, agent.Options{MaxToolRounds: 3}, srv)
			var rec recorder
			exec := &testExecutor{}
			res := r.Run(t.Context(), agent.Request{Messages: userTurn("loop"), Tools: shellSpec, Executor: exec, Stream: stream}, rec.emit)
			mustOK(t, res)
			if !res.RoundCapHit {
				t.Error("RoundCapHit not set")
			}
			if n := len(exec.Calls()); n != 3 {
				t.Errorf("tool calls run = %d, want 3", n)
			}
			reqs := srv.Requests()
			if len(reqs) != 4 {
				t.Fatalf("%d model calls, want 3 tool rounds and one final call", len(reqs))
			}
			// Anthropic- and Bedrock-style gateways reject a history with tool calls when the
			// request lists no tools: the last call keeps them and forbids calling them.
			if last := reqs[3]; !slices.Equal(last.Tools, []string{"shell", "wait"}) || string(last.ToolChoice) != `"none"` {
				t.Errorf("round-cap call: tools %v, tool_choice %s; want the tools listed with tool_choice \"none\"", last.Tools, last.ToolChoice)
			}
			if string(reqs[2].ToolChoice) != "" {
				t.Errorf("a normal round sent tool_choice %s", reqs[2].ToolChoice)
			}
			last := res.Messages[len(res.Messages)-1]
			if last.Role != "assistant" || last.Content != "Final answer without tools." || len(last.ToolCalls) != 0 {
				t.Errorf("last message = %+v", last)
			}
			if got, want := roles(res.Messages), []string{"assistant", "tool", "assistant", "tool", "assistant", "tool", "assistant"}; !slices.Equal(got, want) {
				t.Errorf("roles = %v, want %v", got, want)
			}
			var capEvents []agent.RoundCapHit
			for _, e := range rec.events {
				if c, ok := e.(agent.RoundCapHit); ok {
					capEvents = append(capEvents, c)
				}
			}
			if len(capEvents) != 1 || capEvents[0].MaxToolRounds != 3 || capEvents[0].Round != 4 {
				t.Errorf("cap events = %+v", capEvents)
			}
		})
	}
}

func TestCapDropsCallsOfAModelThatIgnoresIt(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.SetHandler(func(llm.Request) llm.Reply {
		r := llm.ToolCalls(llm.Call{ID: "again", Name: "shell", Args: []string{`{"command":"x"}`}})
		r.Chunks = append([]llm.Chunk{{Content: "still calling"}}, r.Chunks...)
		return r
	})
	r := newRunner(t, agent.Options{MaxToolRounds: 1}, srv)
	var rec recorder
	res := r.Run(t.Context(), agent.Request{Messages: userTurn("loop"), Tools: shellSpec, Executor: &testExecutor{}, Stream: true}, rec.emit)
	mustOK(t, res)
	last := res.Messages[len(res.Messages)-1]
	if len(last.ToolCalls) != 0 || last.Content != "still calling" {
		t.Errorf("last message = %+v, want the text without dangling tool calls", last)
	}
	chunks := rec.chunks()
	if c := chunks[len(chunks)-1]; len(c.ToolCalls) != 0 {
		t.Errorf("final chunk shows calls that will not run: %+v", c)
	}
}

func TestCancelMidStream(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Once "}, {Content: "upon"}}, Hang: true})
	r := newRunner(t, agent.Options{FlushChunks: 2}, srv)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var rec recorder
	res := r.Run(ctx, agent.Request{Messages: userTurn("story"), Stream: true}, func(e agent.Event) {
		rec.emit(e)
		if c, ok := e.(agent.Chunk); ok && c.Text == "Once upon" {
			cancel()
		}
	})
	if res.Status != chat.StatusCancelled || !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("status %s err %v, want cancelled", res.Status, res.Err)
	}
	if res.PartialText != "Once upon" {
		t.Errorf("partial text = %q", res.PartialText)
	}
	if len(res.LLMCalls) != 1 || res.LLMCalls[0].Status != chat.StatusCancelled {
		t.Errorf("LLM calls = %+v", res.LLMCalls)
	}
}

func TestCancelMidTool(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(
		llm.Reply{Chunks: append([]llm.Chunk{{Content: "Working on it."}}, llm.ToolCalls(
			llm.Call{ID: "w", Name: "wait"},
			llm.Call{ID: "after", Name: "shell", Args: []string{`{"command":"never"}`}},
		).Chunks...)},
		llm.Text("never asked"),
	)
	r := newRunner(t, agent.Options{}, srv)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	exec := &testExecutor{started: make(chan tools.Call, 1), ended: make(chan struct{})}
	go func() {
		<-exec.started
		cancel()
	}()
	res := r.Run(ctx, agent.Request{Messages: userTurn("go"), Tools: shellSpec, Executor: exec, Stream: true}, nil)
	if res.Status != chat.StatusCancelled {
		t.Fatalf("status %s err %v, want cancelled", res.Status, res.Err)
	}
	if res.PartialText != "Working on it." {
		t.Errorf("partial text = %q", res.PartialText)
	}
	if got, want := roles(res.Messages), []string{"assistant", "tool", "tool"}; !slices.Equal(got, want) {
		t.Fatalf("roles = %v, want every call answered", got)
	}
	for _, m := range res.Messages[1:] {
		if !strings.HasPrefix(m.Content, "err: ") {
			t.Errorf("tool message after cancel = %+v", m)
		}
	}
	if calls := exec.Calls(); len(calls) != 1 {
		t.Errorf("executed %d calls, want only the running one", len(calls))
	}
	if n := srv.RequestCount(); n != 1 {
		t.Errorf("model asked %d times, want 1", n)
	}
	<-exec.ended // the tool saw the cancellation and returned
}

// stubbornExecutor ignores cancellation until released.
type stubbornExecutor struct {
	started chan struct{}
	release chan struct{}
}

func (e stubbornExecutor) Execute(context.Context, tools.Call) tools.Outcome {
	close(e.started)
	<-e.release
	return tools.Outcome{Content: "too late", Status: audit.StatusOK}
}

func (e stubbornExecutor) Skip(_ context.Context, _ tools.Call, reason error) tools.Outcome {
	return tools.NotRun(reason)
}

func TestCancelDoesNotWaitForAStubbornTool(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(llm.ToolCalls(llm.Call{ID: "s", Name: "shell", Args: []string{`{}`}}))
	r := newRunner(t, agent.Options{}, srv)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	exec := stubbornExecutor{started: make(chan struct{}), release: make(chan struct{})}
	defer close(exec.release)
	go func() {
		<-exec.started
		cancel()
	}()
	res := r.Run(ctx, agent.Request{Messages: userTurn("go"), Tools: shellSpec, Executor: exec, Stream: true}, nil)
	if res.Status != chat.StatusCancelled {
		t.Fatalf("status %s err %v", res.Status, res.Err)
	}
	if got := res.Messages[len(res.Messages)-1]; got.Role != "tool" || got.Content == "too late" || !strings.HasPrefix(got.Content, "err: ") {
		t.Errorf("tool message = %+v, want an err: for the abandoned call", got)
	}
}

func TestUpstreamMessagesCarryOnlyWireFields(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(
		llm.Reply{Chunks: append([]llm.Chunk{{Reasoning: "need pwd"}}, llm.ToolCalls(llm.Call{ID: "c", Name: "shell", Args: []string{`{"command":"pwd"}`}}).Chunks...)},
		llm.Text("done"),
	)
	r := newRunner(t, agent.Options{}, srv)
	history := []chat.Message{
		{Role: chat.RoleSystem, Content: "sys"},
		{Role: chat.RoleUser, Content: "earlier", Name: "alice"},
		{Role: chat.RoleAssistant, Content: "earlier answer", Reasoning: "old thoughts"},
		{Role: chat.RoleAssistant}, // empty: must not go upstream
		{Role: chat.RoleUser, Content: "now"},
	}
	res := r.Run(t.Context(), agent.Request{Messages: history, Tools: shellSpec, Executor: &testExecutor{}, Stream: true}, nil)
	mustOK(t, res)
	var body struct {
		Messages []map[string]json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(srv.Requests()[1].Body, &body); err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"role": true, "content": true, "name": true, "tool_calls": true, "tool_call_id": true, "reasoning_content": true}
	for i, m := range body.Messages {
		for k := range m {
			if !allowed[k] {
				t.Errorf("message %d carries %q upstream", i, k)
			}
		}
	}
	msgs := srv.Requests()[1].Messages
	if len(msgs) != 6 {
		t.Fatalf("upstream messages = %+v", msgs)
	}
	if msgs[1].Name != "alice" || msgs[2].ReasoningContent != "" {
		t.Errorf("history messages upstream = %+v", msgs[:3])
	}
	if msgs[4].ReasoningContent != "need pwd" || msgs[4].ToolCalls[0].ID != "c" {
		t.Errorf("assistant tool-call message upstream = %+v, want its reasoning sent back", msgs[4])
	}
}

func TestImages(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nfake")
	for _, vision := range []bool{true, false} {
		t.Run(fmt.Sprintf("vision=%v", vision), func(t *testing.T) {
			srv := newServers(t, 1)[0]
			srv.Push(llm.Text("a cat"))
			r, err := agent.NewRunner([]agent.Model{{Endpoint: provider.Endpoint{BaseURL: srv.URL, Model: "v"}, SupportsVision: vision}}, agent.Options{})
			if err != nil {
				t.Fatal(err)
			}
			msgs := []chat.Message{{Role: chat.RoleUser, Content: "what is this?", Images: []chat.Image{{MIME: "image/png", Data: png}}}}
			mustOK(t, r.Run(t.Context(), agent.Request{Messages: msgs, Stream: true}, nil))
			got := srv.Requests()[0].Messages[0]
			if vision {
				if len(got.ImageURLs) != 1 || !strings.HasPrefix(got.ImageURLs[0], "data:image/png;base64,") || got.Content != "what is this?" {
					t.Errorf("vision message = %+v", got)
				}
			} else if len(got.ImageURLs) != 0 || !strings.Contains(got.Content, "cannot see images") {
				t.Errorf("text-only message = %+v", got)
			}
		})
	}
}

func TestToolsOnlyForCapableModels(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(llm.Text("plain"))
	r, err := agent.NewRunner([]agent.Model{{Endpoint: provider.Endpoint{BaseURL: srv.URL, Model: "no-tools"}}}, agent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, r.Run(t.Context(), agent.Request{Messages: userTurn("hi"), Tools: shellSpec, Stream: true}, nil))
	if tl := srv.Requests()[0].Tools; len(tl) != 0 {
		t.Errorf("tools offered to a model without tool support: %v", tl)
	}
}

func TestNewRunnerRejectsBadInput(t *testing.T) {
	cases := []struct {
		name   string
		models []agent.Model
		opts   agent.Options
		want   string
	}{
		{"no models", nil, agent.Options{}, "no models"},
		{"no base url", []agent.Model{{Endpoint: provider.Endpoint{Name: "x", Model: "m"}}}, agent.Options{}, "empty BaseURL"},
		{"no model id", []agent.Model{{Endpoint: provider.Endpoint{BaseURL: "http://127.0.0.1:1/v1"}}}, agent.Options{}, "empty Model"},
		{"negative rounds", []agent.Model{{Endpoint: provider.Endpoint{BaseURL: "http://127.0.0.1:1/v1", Model: "m"}}}, agent.Options{MaxToolRounds: -1}, "MaxToolRounds"},
		{"negative flush", []agent.Model{{Endpoint: provider.Endpoint{BaseURL: "http://127.0.0.1:1/v1", Model: "m"}}}, agent.Options{FlushChunks: -1}, "FlushChunks"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := agent.NewRunner(tc.models, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// A provider's content filter ending the answer is not a successful turn: the user would get an
// empty (or cut) reply with no word of why. The turn fails with the reason, keeps what was shown,
// and never falls back once the stream began.
func TestContentFilterEndsTheTurnWithAnError(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			srvs := newServers(t, 2)
			srvs[0].Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Sure, here "}, {Content: "is how"}}, FinishReason: "content_filter"})
			srvs[1].Push(llm.Text("should never be asked"))
			r := newRunner(t, agent.Options{}, srvs...)
			res := r.Run(t.Context(), agent.Request{Messages: userTurn("hi"), Stream: stream}, nil)
			if res.Status != chat.StatusError || res.Err == nil || !strings.Contains(res.Err.Error(), "content filter") {
				t.Fatalf("status %s err %v, want an error naming the content filter", res.Status, res.Err)
			}
			if res.PartialText != "Sure, here is how" {
				t.Errorf("partial text = %q, want the text shown", res.PartialText)
			}
			if n := srvs[1].RequestCount(); n != 0 {
				t.Errorf("candidate 2 got %d requests, want none", n)
			}
			if len(res.LLMCalls) != 1 || res.LLMCalls[0].Status != chat.StatusError {
				t.Errorf("llm calls = %+v, want one failed call", res.LLMCalls)
			}
		})
	}
}

// A turn that failed before the model answered leaves its user message in history without an
// answer; the next turn must not send two user messages in a row (providers with strict role
// alternation reject the request, so one failure would break the conversation). They go as one
// user message holding both texts, images included.
func TestConsecutiveUserMessagesGoUpstreamAsOne(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nfake")
	tests := []struct {
		name     string
		vision   bool
		history  []chat.Message
		want     []string // role:content of each upstream message
		wantImgs int      // images on the last upstream message
	}{
		{
			name: "failed turn",
			history: []chat.Message{
				{Role: chat.RoleSystem, Content: "sys"},
				{Role: chat.RoleUser, Content: "first, unanswered"},
				{Role: chat.RoleUser, Content: "now"},
			},
			want: []string{"system:sys", "user:first, unanswered\n\nnow"},
		},
		{
			name: "empty answer skipped",
			history: []chat.Message{
				{Role: chat.RoleUser, Content: "a"},
				{Role: chat.RoleAssistant, Content: "b"},
				{Role: chat.RoleUser, Content: "c"},
				{Role: chat.RoleAssistant},
				{Role: chat.RoleUser, Content: "d"},
			},
			want: []string{"user:a", "assistant:b", "user:c\n\nd"},
		},
		{
			name:   "images on the new message",
			vision: true,
			history: []chat.Message{
				{Role: chat.RoleUser, Content: "unanswered"},
				{Role: chat.RoleUser, Content: "what is this?", Images: []chat.Image{{MIME: "image/png", Data: png}}},
			},
			want:     []string{"user:unanswered\nwhat is this?"},
			wantImgs: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServers(t, 1)[0]
			srv.Push(llm.Text("ok"))
			r, err := agent.NewRunner([]agent.Model{{Endpoint: provider.Endpoint{BaseURL: srv.URL, Model: "m"}, SupportsVision: tt.vision}}, agent.Options{})
			if err != nil {
				t.Fatal(err)
			}
			mustOK(t, r.Run(t.Context(), agent.Request{Messages: tt.history, Stream: true}, nil))
			msgs := srv.Requests()[0].Messages
			var got []string
			for _, m := range msgs {
				got = append(got, m.Role+":"+m.Content)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("upstream = %q, want %q", got, tt.want)
			}
			if n := len(msgs[len(msgs)-1].ImageURLs); n != tt.wantImgs {
				t.Errorf("images on the last message = %d, want %d", n, tt.wantImgs)
			}
		})
	}
}

// Each model call records when it was made, so the llm_calls rows of a turn with a tool round
// and a fallback show when each call started, not all the turn's end.
func TestLLMCallsRecordTheirStart(t *testing.T) {
	srvs := newServers(t, 2)
	srvs[0].Push(llm.Reply{Status: 500, Error: "down"})
	srvs[1].Push(llm.ToolCalls(llm.Call{ID: "c", Name: "shell", Args: []string{`{"command":"pwd"}`}}), llm.Text("done"))
	r := newRunner(t, agent.Options{}, srvs...)
	before := time.Now()
	res := r.Run(t.Context(), agent.Request{Messages: userTurn("hi"), Tools: shellSpec, Executor: &testExecutor{}, Stream: true}, nil)
	mustOK(t, res)
	after := time.Now()
	if len(res.LLMCalls) != 3 {
		t.Fatalf("llm calls = %+v, want 3", res.LLMCalls)
	}
	prev := before
	for i, c := range res.LLMCalls {
		if c.StartedAt.Before(prev) || c.StartedAt.After(after) {
			t.Errorf("call %d started at %v, want in order within [%v, %v]", i, c.StartedAt, before, after)
		}
		prev = c.StartedAt
	}
}

// TestIDLessToolCallsGetIDsUniqueAcrossTheTurn: a provider that sends no tool-call ids (Ollama)
// used to get call_0 in every round, so the model was sent two different calls under one id and
// the second round's result answered the first round's call.
func TestIDLessToolCallsGetIDsUniqueAcrossTheTurn(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			srv := newServers(t, 1)[0]
			srv.Push(
				llm.ToolCalls(llm.Call{Name: "shell", Args: []string{`{"command":"a"}`}}, llm.Call{Name: "shell", Args: []string{`{"command":"b"}`}}),
				llm.ToolCalls(llm.Call{Name: "shell", Args: []string{`{"command":"c"}`}}),
				llm.Text("done"),
			)
			r := newRunner(t, agent.Options{}, srv)
			res := r.Run(t.Context(), agent.Request{Messages: userTurn("go"), Tools: shellSpec, Executor: &testExecutor{}, Stream: stream}, nil)
			if res.Status != chat.StatusOK {
				t.Fatalf("turn ended %s: %v", res.Status, res.Err)
			}
			reqs := srv.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d model requests, want 3", len(reqs))
			}
			// The third request carries both rounds: every call id once, each answered by its own result.
			seen := map[string]string{}
			var ids []string
			for _, m := range reqs[2].Messages {
				for _, c := range m.ToolCalls {
					if _, dup := seen[c.ID]; dup {
						t.Fatalf("the model was sent call id %q twice in one turn", c.ID)
					}
					seen[c.ID] = c.Arguments
					ids = append(ids, c.ID)
				}
				if m.Role == "tool" {
					want := "ran " + strings.Trim(strings.TrimPrefix(seen[m.ToolCallID], `{"command":`), `"}`)
					if m.Content != want {
						t.Fatalf("result for %s is %q, want %q", m.ToolCallID, m.Content, want)
					}
				}
			}
			if got := strings.Join(ids, ","); got != "call_1_0,call_1_1,call_2_0" {
				t.Fatalf("call ids %s, want call_1_0,call_1_1,call_2_0", got)
			}
		})
	}
}
