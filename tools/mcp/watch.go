package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"relaybot/tools"
)

// watched is one tool call in flight on a session: what its progress token and questions reach.
type watched struct {
	token   string
	running tools.Running
	// ctx is the call's context: a question for the call ends with it, whatever context the
	// transport hands the question (over stdio, the session's).
	ctx context.Context
}

// calls are a session's tool calls in flight, by progress token. Progress notifications name
// their call by its token; log messages and elicitation requests over stdio and SSE name none,
// so they go to the session's call only while it has exactly one (over streamable HTTP a
// question comes on the call's own response stream and is matched to it exactly).
type calls struct {
	next atomic.Int64
	mu   sync.Mutex
	by   map[string]*watched
}

type callKey struct{}

// watch registers a call about to be sent and returns the context to send it with (which
// carries the call to questions on its response stream) and the function that ends the watch.
func (cs *calls) watch(ctx context.Context, r tools.Running) (context.Context, *watched, func()) {
	w := &watched{token: "relaybot-" + strconv.FormatInt(cs.next.Add(1), 10), running: r, ctx: ctx}
	if r == nil {
		return ctx, w, func() {}
	}
	cs.mu.Lock()
	if cs.by == nil {
		cs.by = map[string]*watched{}
	}
	cs.by[w.token] = w
	cs.mu.Unlock()
	return context.WithValue(ctx, callKey{}, w), w, func() {
		cs.mu.Lock()
		delete(cs.by, w.token)
		cs.mu.Unlock()
	}
}

func (cs *calls) byToken(token any) *watched {
	t, ok := token.(string)
	if !ok {
		t = fmt.Sprint(token)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.by[t]
}

// only returns the session's one call in flight, or nil when it has none or several.
func (cs *calls) only() *watched {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(cs.by) != 1 {
		return nil
	}
	for _, w := range cs.by {
		return w
	}
	return nil
}

// of returns the call a server request belongs to: the one its context carries (streamable
// HTTP), else the session's only call.
func (cs *calls) of(ctx context.Context) *watched {
	if w, ok := ctx.Value(callKey{}).(*watched); ok {
		return w
	}
	return cs.only()
}

// notified hands a progress or log notification to its call.
func (cs *calls) notified(n mcpgo.JSONRPCNotification) {
	switch n.Method {
	case string(mcpgo.MethodNotificationProgress):
		f := n.Params.AdditionalFields
		w := cs.byToken(f["progressToken"])
		if w == nil {
			return
		}
		p := tools.Progress{Done: num(f["progress"]), Total: num(f["total"])}
		p.Message, _ = f["message"].(string)
		w.running.Progress(p)
	case "notifications/message":
		w := cs.only()
		if w == nil {
			return
		}
		if msg := logText(n.Params.AdditionalFields["data"]); msg != "" {
			w.running.Progress(tools.Progress{Message: msg})
		}
	}
}

func num(v any) float64 {
	switch n := v.(type) {
	case float64:
		return n
	case json.Number:
		f, _ := n.Float64()
		return f
	case int:
		return float64(n)
	case int64:
		return float64(n)
	}
	return 0
}

// logTextMax caps a log message shown as progress.
const logTextMax = 200

// logText renders a log message's data for a status line: its text, or its JSON.
func logText(data any) string {
	s, ok := data.(string)
	if !ok {
		if m, isMap := data.(map[string]any); isMap {
			if msg, isStr := m["message"].(string); isStr {
				s = msg
			}
		}
		if s == "" {
			b, err := json.Marshal(data)
			if err != nil || string(b) == "null" {
				return ""
			}
			s = string(b)
		}
	}
	s = strings.Join(strings.Fields(s), " ")
	return tools.Truncate(s, logTextMax)
}

// elicitor answers a session's elicitation/create requests by asking the user of the call they
// belong to.
type elicitor struct {
	calls  *calls
	server string
}

// Elicit asks the question of the call the request belongs to; a question no call can be found
// for (several calls in flight over stdio or SSE, none at all) is answered cancel, and so is one
// the bot cannot show. URL mode shows the link; the bot never opens it.
func (e *elicitor) Elicit(ctx context.Context, req mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error) {
	w := e.calls.of(ctx)
	if w == nil {
		return elicitResult(mcpgo.ElicitationResponseActionCancel, nil), nil
	}
	q := tools.Elicitation{Message: req.Params.Message, Mode: tools.ElicitForm}
	if req.Params.Mode == mcpgo.ElicitationModeURL {
		q.Mode, q.URL = tools.ElicitURL, req.Params.URL
	} else {
		raw, err := json.Marshal(req.Params.RequestedSchema)
		if err == nil {
			q.Fields, err = tools.ParseForm(raw)
		}
		if err != nil {
			// A form the chat cannot show is declined (the spec's decline lets the tool go on),
			// and the chat and the audit are told why.
			q.Fields, q.Unshowable = nil, err.Error()
		}
	}
	// The question ends with the call (stopped, timed out) as well as with the transport's
	// context.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(w.ctx, func() { cancel(context.Cause(w.ctx)) })
	defer stop()
	ans := w.running.Elicit(ctx, q)
	switch ans.Action {
	case tools.ElicitAccept:
		var content any
		if q.Mode == tools.ElicitForm {
			content = ans.Content
		}
		return elicitResult(mcpgo.ElicitationResponseActionAccept, content), nil
	case tools.ElicitDecline:
		return elicitResult(mcpgo.ElicitationResponseActionDecline, nil), nil
	default:
		return elicitResult(mcpgo.ElicitationResponseActionCancel, nil), nil
	}
}

func elicitResult(a mcpgo.ElicitationResponseAction, content any) *mcpgo.ElicitationResult {
	return &mcpgo.ElicitationResult{ElicitationResponse: mcpgo.ElicitationResponse{Action: a, Content: content}}
}

// cancelNotifyTimeout bounds sending notifications/cancelled for an abandoned call.
const cancelNotifyTimeout = time.Second

// sendCancelled tells the server about a tool call the bot gave up on (deadline or
// cancellation) with notifications/cancelled, as the MCP spec asks of a client on every
// transport. mcp-go sends it itself only over stdio.
func sendCancelled(ctx context.Context, t transport.Interface, req transport.JSONRPCRequest, err error) {
	if err == nil || req.Method != string(mcpgo.MethodToolsCall) || (ctx.Err() == nil && !pastDeadline(ctx)) {
		return
	}
	if p, ok := req.Params.(map[string]any); ok && p["task"] != nil {
		return // a task is stopped with tasks/cancel, not by cancelling the request that made it
	}
	reason := "the client stopped waiting"
	if cause := context.Cause(ctx); cause != nil {
		reason = cause.Error()
	}
	n := mcpgo.JSONRPCNotification{JSONRPC: mcpgo.JSONRPC_VERSION}
	n.Method = string(mcpgo.MethodNotificationCancelled)
	n.Params.AdditionalFields = map[string]any{"requestId": req.ID, "reason": reason}
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelNotifyTimeout)
	_ = t.SendNotification(nctx, n)
	cancel()
}

// cancellingHTTP does the same over streamable HTTP: the spec does not let a server take a
// closed response stream for a cancellation.
// It also follows the tasks of a 2026-07-28 session (ext).
type cancellingHTTP struct {
	*transport.StreamableHTTP
	ext *extTasks
}

// RequiresLegacyProtocol is false although the transport listens on the standalone GET stream:
// mcp-go's transport opens that stream only once a session of the initialize handshake exists,
// so the client may still try server/discover, and a server of 2025-11-25 gets its one session
// with the stream its notifications need.
func (t cancellingHTTP) RequiresLegacyProtocol() bool { return false }

func (t cancellingHTTP) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, task, err := t.ext.send(ctx, req, t.StreamableHTTP.SendRequest)
	if !task {
		sendCancelled(ctx, t.StreamableHTTP, req, err)
	}
	return resp, err
}

// stdioTasks follows the tasks of a 2026-07-28 session over stdio.
type stdioTasks struct {
	*transport.Stdio
	ext *extTasks
}

func (t stdioTasks) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, _, err := t.ext.send(ctx, req, t.Stdio.SendRequest)
	return resp, err
}
