package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// scripted is a server of the tasks extension that answers from a script: the tools/call with
// the first answer, each tasks/get with the next; it records the methods it was sent.
type scripted struct {
	mu      sync.Mutex
	answers []string
	methods []string
}

func (s *scripted) send(_ context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.methods = append(s.methods, req.Method)
	if req.Method == string(mcpgo.MethodTasksCancel) || len(s.answers) == 0 {
		return &transport.JSONRPCResponse{ID: req.ID, Result: json.RawMessage(`{"resultType":"complete"}`)}, nil
	}
	a := s.answers[0]
	s.answers = s.answers[1:]
	return &transport.JSONRPCResponse{ID: req.ID, Result: json.RawMessage(a)}, nil
}

func (s *scripted) sent() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.methods, " ")
}

func extSession(declared bool) *extTasks {
	sess := &session{client: client.NewClient(nil), version: mcpgo.ProtocolVersion20260728, calls: &calls{}}
	if declared {
		sess.caps.Extensions = map[string]any{extTasksID: map[string]any{}}
	}
	return &extTasks{sess: sess, logger: slog.New(slog.DiscardHandler), redact: &redactor{}}
}

// What a hostile or odd server says about its task ends the call the way the extension means,
// and a task the bot stops following is cancelled.
func TestAnExtensionTaskEndsAsItsServerSays(t *testing.T) {
	const made = `{"resultType":"task","taskId":"t1","status":"working","ttlMs":null,"pollIntervalMs":1000}`
	for _, c := range []struct {
		name     string
		declared bool
		answers  []string
		want     string // in the error, or the result's text
		cancel   bool   // tasks/cancel sent
	}{
		{"completed", true, []string{made, `{"taskId":"t1","status":"completed","result":{"content":[{"type":"text","text":"done"}]}}`}, "done", false},
		{"failed", true, []string{made, `{"taskId":"t1","status":"failed","error":{"code":-32603,"message":"rate limit"}}`}, "rate limit", false},
		{"cancelled by the server", true, []string{made, `{"taskId":"t1","status":"cancelled","statusMessage":"shutting down"}`}, "the server cancelled the task (shutting down)", false},
		{"an unknown status keeps the poll going", true, []string{made, `{"taskId":"t1","status":"paused"}`, `{"taskId":"t1","status":"completed","result":{"content":[]}}`}, `"content":[]`, false},
		{"another task's answer", true, []string{made, `{"taskId":"t2","status":"working"}`}, "answered about another task", true},
		{"its time to live passed", true, []string{`{"resultType":"task","taskId":"t1","status":"working","ttlMs":1500}`, `{"taskId":"t1","status":"working","ttlMs":1500}`, `{"taskId":"t1","status":"working","ttlMs":1500}`}, "time to live of 1.5s", true},
		{"a result that is another task", true, []string{made, `{"taskId":"t1","status":"completed","result":{"resultType":"task","content":[]}}`}, "not final", false},
		{"a question the bot does not offer", true, []string{made, `{"taskId":"t1","status":"input_required","inputRequests":{"s":{"method":"sampling/createMessage","params":{}}}}`}, `asked for "sampling/createMessage"`, true},
		{"a task the bot did not declare", false, []string{made}, "did not declare the tasks extension", false},
		{"a task id with a newline", true, []string{`{"resultType":"task","taskId":"a\nb","status":"working"}`}, "control characters", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &scripted{answers: c.answers}
				req := transport.JSONRPCRequest{ID: mcpgo.NewRequestId(1), Method: string(mcpgo.MethodToolsCall), Params: map[string]any{"name": "x"}}
				resp, _, err := extSession(c.declared).send(context.Background(), req, srv.send)
				got := ""
				switch {
				case err != nil:
					got = err.Error()
				case resp.Error != nil:
					got = resp.Error.Message
				default:
					got = string(resp.Result)
				}
				if !strings.Contains(got, c.want) {
					t.Fatalf("the call ended with %q, want %q", got, c.want)
				}
				if cancelled := strings.Contains(srv.sent(), "tasks/cancel"); cancelled != c.cancel {
					t.Fatalf("the bot sent %q; tasks/cancel sent: %v, want %v", srv.sent(), cancelled, c.cancel)
				}
			})
		})
	}
}

// The bot declares the extension on a tools/call only to a server of 2026-07-28 that declared
// it, keeping the capabilities mcp-go put there.
func TestTheExtensionIsDeclaredOnlyToAServerThatHasIt(t *testing.T) {
	for _, declared := range []bool{true, false} {
		var got map[string]any
		capture := func(_ context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
			b, _ := json.Marshal(req.Params)
			_ = json.Unmarshal(b, &got)
			return &transport.JSONRPCResponse{ID: req.ID, Result: json.RawMessage(`{"content":[]}`)}, nil
		}
		params := map[string]any{"name": "x", "_meta": map[string]any{mcpgo.MetaKeyClientCapabilities: map[string]any{"elicitation": map[string]any{}}}}
		req := transport.JSONRPCRequest{ID: mcpgo.NewRequestId(1), Method: string(mcpgo.MethodToolsCall), Params: params}
		if _, _, err := extSession(declared).send(context.Background(), req, capture); err != nil {
			t.Fatal(err)
		}
		caps := got["_meta"].(map[string]any)[mcpgo.MetaKeyClientCapabilities].(map[string]any)
		ext, _ := caps["extensions"].(map[string]any)
		if _, ok := ext[extTasksID]; ok != declared || caps["elicitation"] == nil {
			t.Fatalf("server declared it: %v; the call's capabilities were %v", declared, caps)
		}
	}
}
