package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"relaybot/agent"
	"relaybot/chat"
	"relaybot/internal/testkit/llm"
)

// An answer cut by the model's length limit is kept, the turn stays ok, Result.Truncated says
// so and the model call records finish_reason "length".
func TestLengthLimitKeepsTheAnswerAndSaysSo(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			srv := newServers(t, 1)[0]
			srv.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "The three reasons are: one, "}, {Content: "two and"}}, FinishReason: "length"})
			r := newRunner(t, agent.Options{}, srv)
			res := r.Run(t.Context(), agent.Request{Messages: userTurn("why?"), Stream: stream}, nil)
			mustOK(t, res)
			if !res.Truncated {
				t.Errorf("Truncated = false, want true")
			}
			if n := len(res.Messages); n != 1 || res.Messages[0].Content != "The three reasons are: one, two and" {
				t.Errorf("messages = %+v, want the cut answer", res.Messages)
			}
			if len(res.LLMCalls) != 1 || res.LLMCalls[0].FinishReason != "length" {
				t.Errorf("llm calls = %+v, want one with finish reason length", res.LLMCalls)
			}
		})
	}
}

func TestCompleteAnswerIsNotTruncated(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(llm.Text("All done."))
	r := newRunner(t, agent.Options{}, srv)
	res := r.Run(t.Context(), agent.Request{Messages: userTurn("hi"), Stream: true}, nil)
	mustOK(t, res)
	if res.Truncated || len(res.LLMCalls) != 1 || res.LLMCalls[0].FinishReason != "stop" {
		t.Errorf("truncated %v, llm calls %+v; want not truncated, finish reason stop", res.Truncated, res.LLMCalls)
	}
}

// A tool call whose arguments the length limit cut off is never run: the model is told, the
// complete calls of the round run, and the turn goes on with a valid transcript.
func TestLengthLimitCutToolCallIsNotRun(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			srv := newServers(t, 1)[0]
			cut := llm.ToolCalls(
				llm.Call{ID: "c1", Name: "shell", Args: []string{`{"command":`, `"ls"}`}},
				llm.Call{ID: "c2", Name: "shell", Args: []string{`{"command":"cat /very/long/pa`}},
			)
			cut.FinishReason = "length"
			srv.Push(cut, llm.Text("Listed; the second call was too long."))
			exec := &testExecutor{}
			r := newRunner(t, agent.Options{}, srv)
			res := r.Run(t.Context(), agent.Request{Messages: userTurn("look"), Tools: shellSpec, Executor: exec, Stream: stream}, nil)
			mustOK(t, res)
			calls := exec.Calls()
			if len(calls) != 1 || calls[0].ID != "c1" {
				t.Fatalf("executor calls = %+v, want only the complete call c1", calls)
			}
			if got := strings.Join(roles(res.Messages), ","); got != "assistant,tool,tool,assistant" {
				t.Fatalf("roles = %s", got)
			}
			if m := res.Messages[2]; m.ToolCallID != "c2" || m.Content != "err: arguments cut off by the length limit" {
				t.Errorf("answer to the cut call = %+v", m)
			}
			if res.Truncated {
				t.Errorf("Truncated = true; the final answer was complete")
			}
			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("requests = %d, want 2", len(reqs))
			}
			if last := reqs[1].Messages[len(reqs[1].Messages)-1]; last.ToolCallID != "c2" || !strings.Contains(last.Content, "length limit") {
				t.Errorf("model was told %+v, want the length-limit error for c2", last)
			}
		})
	}
}

// A stream cancelled while reasoning is shown keeps the <think> block out of the partial
// message's content: the reasoning goes in Reasoning, as on a completed answer.
func TestCancelledPartialKeepsReasoningApart(t *testing.T) {
	srv := newServers(t, 1)[0]
	srv.Push(llm.Reply{Chunks: []llm.Chunk{{Reasoning: "let me think"}, {Content: "Once upon"}}, Hang: true})
	r := newRunner(t, agent.Options{FlushChunks: 2}, srv)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	res := r.Run(ctx, agent.Request{Messages: userTurn("story"), Stream: true}, func(e agent.Event) {
		if c, ok := e.(agent.Chunk); ok && strings.HasSuffix(c.Text, "Once upon") {
			cancel()
		}
	})
	if res.Status != chat.StatusCancelled {
		t.Fatalf("status %s err %v, want cancelled", res.Status, res.Err)
	}
	if !strings.Contains(res.PartialText, "<think>") {
		t.Errorf("partial text = %q, want the shown reasoning", res.PartialText)
	}
	p := res.Partial
	if p.Role != chat.RoleAssistant || p.Content != "Once upon" || p.Reasoning != "let me think" || len(p.ToolCalls) != 0 {
		t.Errorf("partial message = %+v, want content %q and reasoning %q apart", p, "Once upon", "let me think")
	}
}
