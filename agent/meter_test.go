package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"relaybot/agent"
	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	"relaybot/tools"
)

// recMeter records the calls it is asked about and refuses with refuse when set.
type recMeter struct {
	mu      sync.Mutex
	refuse  error
	prompts []int
	ended   []chat.ModelCall
}

func (m *recMeter) Start(ctx context.Context, call chat.ModelCall, prompt int) (func(chat.ModelCall), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refuse != nil {
		return nil, m.refuse
	}
	m.prompts = append(m.prompts, prompt)
	return func(c chat.ModelCall) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.ended = append(m.ended, c)
	}, nil
}

// wordsEstimate counts a token per word of the messages' text, so the tests know the numbers.
func wordsEstimate(model string, msgs []chat.Message, specs []tools.Spec) int {
	n := 0
	for _, m := range msgs {
		for _, s := range []string{m.Content, m.Reasoning} {
			if s != "" {
				n += len(strings.Fields(s))
			}
		}
		for _, c := range m.ToolCalls {
			n += len(strings.Fields(c.Name + " " + c.Arguments))
		}
	}
	return n + len(specs)
}

// A call the Meter refuses is never sent, no fallback candidate is tried, and the turn ends
// with the Meter's error.
func TestMeterRefusalSendsNothingAndTriesNoFallback(t *testing.T) {
	srvs := newServers(t, 2)
	r := newRunner(t, agent.Options{}, srvs...)
	over := errors.New("over quota")
	res := r.Run(context.Background(), agent.Request{Stream: true, Meter: &recMeter{refuse: over},
		Messages: []chat.Message{{Role: chat.RoleUser, Content: "hi"}}}, nil)
	if !errors.Is(res.Err, over) || res.Status != chat.StatusError {
		t.Fatalf("result = %v %v, want the Meter's refusal", res.Status, res.Err)
	}
	if n := srvs[0].RequestCount() + srvs[1].RequestCount(); n != 0 || len(res.LLMCalls) != 0 {
		t.Fatalf("a refused call made %d requests and %d call records, want none", n, len(res.LLMCalls))
	}
}

// A call that ends without a usage report records the prompt's estimate plus that of what was
// generated, marked estimated; a reported usage is kept as reported; an HTTP refusal before any
// answer costs nothing.
func TestCallsWithoutUsageRecordAnEstimate(t *testing.T) {
	tests := []struct {
		name          string
		reply         llm.Reply
		wantIn        int
		wantOut       int
		wantEstimated bool
	}{
		{"reported", usage(llm.Text("one two three"), 40, 3), 40, 3, false},
		{"cut mid-stream", llm.Reply{Chunks: []llm.Chunk{{Content: "one two"}, {Content: " three"}}, Cut: true}, 5, 3, true},
		{"cut in a tool call", llm.Reply{Chunks: []llm.Chunk{{ToolCalls: []llm.ToolCallDelta{{ID: "c1", Name: "shell", Arguments: `{"command": "ls`}}}}, Cut: true}, 5 + 2, 3, true},
		{"refused with 500", llm.Fault(500, "boom"), 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServers(t, 1)[0]
			srv.Push(tc.reply)
			r := newRunner(t, agent.Options{}, srv)
			m := &recMeter{}
			req := agent.Request{Stream: true, Meter: m, Estimate: wordsEstimate,
				Messages: []chat.Message{{Role: chat.RoleSystem, Content: "be brief"}, {Role: chat.RoleUser, Content: "count to three"}}}
			if tc.name == "cut in a tool call" {
				req.Tools = shellSpec
			}
			res := r.Run(context.Background(), req, nil)
			if len(res.LLMCalls) != 1 || len(m.ended) != 1 {
				t.Fatalf("calls = %+v, ended = %+v, want one of each", res.LLMCalls, m.ended)
			}
			c := m.ended[0]
			if c.TokensIn != tc.wantIn || c.TokensOut != tc.wantOut || c.Estimated != tc.wantEstimated {
				t.Fatalf("call = %d in, %d out, estimated %v; want %d, %d, %v", c.TokensIn, c.TokensOut, c.Estimated, tc.wantIn, tc.wantOut, tc.wantEstimated)
			}
			if m.prompts[0] != 5+len(req.Tools) {
				t.Fatalf("prompt estimate = %d, want %d", m.prompts[0], 5+len(req.Tools))
			}
			if res.Usage.TokensIn != tc.wantIn || res.Usage.TokensOut != tc.wantOut {
				t.Fatalf("turn usage = %+v, want the call's", res.Usage)
			}
		})
	}
}

func usage(r llm.Reply, in, out int) llm.Reply {
	r.Usage = &llm.Usage{PromptTokens: in, CompletionTokens: out}
	return r
}
