package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"relaybot/tools"
)

// The Tasks extension of MCP 2026-07-28 (io.modelcontextprotocol/tasks, SEP-2663). A server
// that declares it in server/discover may answer any tools/call that declares it in its
// per-request capabilities with a task (resultType "task") instead of the result. The client
// then polls tasks/get at the task's pollIntervalMs; the answer carries the status, its
// message, and, by status, the result (completed), the JSON-RPC error (failed) or the
// questions still open (input_required), which tasks/update answers. tasks/cancel asks the
// server to stop. There is no tasks/result and no tasks/list.
//
// mcp-go v1.2.1 has no client for the extension: its CallTool takes a task for a result without
// content. So the bot follows the task beneath mcp-go, in the session's transport: a tools/call
// answered with a task is polled to its end there, and mcp-go gets the task's result (or error)
// as the answer to its call, multi round-trip input and all.

// extTasksID names the extension in capabilities.
const extTasksID = "io.modelcontextprotocol/tasks"

// Bounds on what a server says about a task: everything in it is the server's to choose.
const (
	maxTaskIDLen     = 256
	maxTaskStatusLen = 32
	maxTaskMessage   = 200
	maxTaskErrorText = 500
	maxTaskInputs    = 8        // questions taken from one answer
	maxTaskAnswered  = 64       // questions answered over a task's life
	maxTaskInputKey  = 128      // bytes of a question's key
	maxTaskAnswer    = 32 << 20 // bytes of a tasks/get answer
)

// The task statuses of the extension. Any other is taken for a task still running.
const (
	taskWorking       = "working"
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

// extTask is a task as a server tells it (a CreateTaskResult or a tasks/get answer).
type extTask struct {
	ID      string
	Status  string
	Message string
	// Poll is the interval the server asks for (0: none); TTL how long it keeps the task
	// from its creation (0: unlimited or not said).
	Poll, TTL time.Duration
	// Result is a completed task's result, Err a failed task's error.
	Result json.RawMessage
	Err    *mcpgo.JSONRPCErrorDetails
	// Inputs are the questions of a task that needs input, by key.
	Inputs map[string]json.RawMessage
}

func (t extTask) terminal() bool {
	return t.Status == taskCompleted || t.Status == taskFailed || t.Status == taskCancelled
}

// parseExtTask reads a task; task says the answer must be a CreateTaskResult.
func parseExtTask(raw []byte, task bool) (extTask, error) {
	if len(raw) > maxTaskAnswer {
		return extTask{}, fmt.Errorf("the task's answer is %d bytes, more than %d", len(raw), maxTaskAnswer)
	}
	var w struct {
		ResultType     string                     `json:"resultType"`
		TaskID         string                     `json:"taskId"`
		Status         string                     `json:"status"`
		StatusMessage  string                     `json:"statusMessage"`
		PollIntervalMs *float64                   `json:"pollIntervalMs"`
		TTLMs          *float64                   `json:"ttlMs"`
		Result         json.RawMessage            `json:"result"`
		Error          json.RawMessage            `json:"error"`
		InputRequests  map[string]json.RawMessage `json:"inputRequests"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return extTask{}, fmt.Errorf("the task cannot be read: %w", err)
	}
	if task && w.ResultType != "task" {
		return extTask{}, fmt.Errorf("the answer is not a task (resultType %q)", tools.Truncate(w.ResultType, maxTaskStatusLen))
	}
	if err := checkTaskID(w.TaskID); err != nil {
		return extTask{}, err
	}
	if w.Status == "" || len(w.Status) > maxTaskStatusLen {
		return extTask{}, errors.New("the task has no valid status")
	}
	t := extTask{ID: w.TaskID, Status: w.Status, Message: tools.Truncate(strings.Join(strings.Fields(w.StatusMessage), " "), maxTaskMessage),
		Poll: millis(w.PollIntervalMs), TTL: millis(w.TTLMs)}
	switch t.Status {
	case taskCompleted:
		if !isObject(w.Result) {
			return extTask{}, errors.New("the completed task carries no result")
		}
		t.Result = w.Result
	case taskFailed:
		t.Err = taskError(w.Error)
	case taskInputRequired:
		t.Inputs = firstInputs(w.InputRequests)
	}
	return t, nil
}

// checkTaskID refuses an id the bot would not send back: empty, long, or with control
// characters (it goes into the Mcp-Name header).
func checkTaskID(id string) error {
	if id == "" || len(id) > maxTaskIDLen {
		return fmt.Errorf("the task's id is empty or longer than %d bytes", maxTaskIDLen)
	}
	if strings.IndexFunc(id, unicode.IsControl) >= 0 {
		return errors.New("the task's id has control characters")
	}
	return nil
}

// millis turns a server's integer milliseconds into a duration; absent, null or negative is 0,
// and a value past a year is a year.
func millis(ms *float64) time.Duration {
	const year = 365 * 24 * time.Hour
	if ms == nil || *ms <= 0 {
		return 0
	}
	if *ms >= float64(year/time.Millisecond) {
		return year
	}
	return time.Duration(*ms) * time.Millisecond
}

func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

// taskError reads a failed task's JSON-RPC error; one that cannot be read is an internal error.
func taskError(raw json.RawMessage) *mcpgo.JSONRPCErrorDetails {
	var e struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) != nil || e.Code == nil {
		return &mcpgo.JSONRPCErrorDetails{Code: mcpgo.INTERNAL_ERROR, Message: "the task failed without saying why"}
	}
	return &mcpgo.JSONRPCErrorDetails{Code: *e.Code, Message: tools.Truncate(e.Message, maxTaskErrorText)}
}

// firstInputs keeps the first questions by key, leaving out keys too long to send back.
func firstInputs(in map[string]json.RawMessage) map[string]json.RawMessage {
	keys := make([]string, 0, len(in))
	for k := range in {
		if k != "" && len(k) <= maxTaskInputKey {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make(map[string]json.RawMessage, min(len(keys), maxTaskInputs))
	for _, k := range keys[:min(len(keys), maxTaskInputs)] {
		out[k] = in[k]
	}
	return out
}

// extCall is one tools/call on a session that speaks the extension: whether the server made it
// a task, and who watches it.
type extCall struct {
	running tools.Running
	state   atomic.Int32 // callWaiting, callTask or callOutOfTime
}

const (
	callWaiting   = iota // no answer yet: the call timeout applies
	callTask             // the server made it a task: the task timeout applies
	callOutOfTime        // the call timeout passed before the server answered
)

type extCallKey struct{}

// limitPassed is why a call's context ended: its call or task timeout passed.
type limitPassed struct {
	what  string
	after time.Duration
}

func (e *limitPassed) Error() string {
	return fmt.Sprintf("the %s timeout of %s passed", e.what, e.after)
}

// extContext bounds a call on a session that speaks the extension: by the task timeout, and by
// the call timeout until the server makes the call a task.
func (s *serverConn) extContext(ctx context.Context, r tools.Running) (context.Context, func()) {
	taskLimit := s.taskTimeout()
	tctx, cancelTask := context.WithTimeoutCause(ctx, taskLimit, &limitPassed{what: "task", after: taskLimit})
	cctx, cancelCall := context.WithCancelCause(tctx)
	c := &extCall{running: r}
	stop := func() bool { return true }
	if t := s.cfg.ToolCallTimeout; t > 0 {
		timer := time.AfterFunc(t, func() {
			if c.state.CompareAndSwap(callWaiting, callOutOfTime) {
				cancelCall(&limitPassed{what: "call", after: t})
			}
		})
		stop = timer.Stop
	}
	return context.WithValue(cctx, extCallKey{}, c), func() {
		stop()
		cancelCall(nil)
		cancelTask()
	}
}

// extTasks follows the tasks of one session's calls.
type extTasks struct {
	sess   *session
	ask    *elicitor // nil when the transport cannot carry questions
	logger *slog.Logger
	redact *redactor
	// began and ended keep the task book (taskbook.go): a task the server made, and one the
	// bot is done with.
	began func(ctx context.Context, sess *session, id string)
	ended func(ctx context.Context, id string)
}

// on reports whether the session speaks the extension: a 2026-07-28 session whose server
// declared it.
func (x *extTasks) on() bool {
	if x == nil || x.sess == nil || !x.sess.modern() {
		return false
	}
	_, ok := x.sess.caps.Extensions[extTasksID]
	return ok
}

type sendFunc func(context.Context, transport.JSONRPCRequest) (*transport.JSONRPCResponse, error)

// send sends req with next. On a session that speaks the extension a tools/call declares it, and
// one the server answers with a task is followed to its end and answered with the task's result
// or error. task reports that the server made the call a task (the request itself is then not
// to be cancelled: tasks/cancel stopped the task).
func (x *extTasks) send(ctx context.Context, req transport.JSONRPCRequest, next sendFunc) (_ *transport.JSONRPCResponse, task bool, _ error) {
	if req.Method != string(mcpgo.MethodToolsCall) || x == nil || x.sess == nil || !x.sess.modern() {
		// A 2025-11-25 session's tasks are the bot's own asking (task.go).
		resp, err := next(ctx, req)
		return resp, false, err
	}
	on := x.on()
	if on {
		req.Params = declareExt(req.Params)
	}
	resp, err := next(ctx, req)
	if err != nil || resp == nil || resp.Error != nil || !isTaskAnswer(resp.Result) {
		return resp, false, err
	}
	if !on {
		return nil, false, errors.New("the server answered with a task although the bot did not declare the tasks extension")
	}
	t, err := parseExtTask(resp.Result, true)
	if err != nil {
		return nil, false, fmt.Errorf("the server's task: %w", err)
	}
	call, _ := ctx.Value(extCallKey{}).(*extCall)
	if call == nil {
		call = &extCall{}
	}
	if x.began != nil {
		x.began(ctx, x.sess, t.ID)
	}
	if !call.state.CompareAndSwap(callWaiting, callTask) {
		// The call timeout passed as the task was made.
		x.stop(ctx, t.ID, next)
		return &transport.JSONRPCResponse{JSONRPC: mcpgo.JSONRPC_VERSION, ID: req.ID, Error: &mcpgo.JSONRPCErrorDetails{
			Code: mcpgo.INTERNAL_ERROR, Message: "the call timeout passed before the server made the call a task"}}, true, nil
	}
	out, done, err := x.follow(ctx, call, t, next)
	switch {
	case err != nil && !done:
		x.stop(ctx, t.ID, next)
	case x.ended != nil:
		x.ended(ctx, t.ID)
	}
	if err != nil && ctx.Err() != nil {
		// Stopped or out of time: an error answer rather than a failed send, so mcp-go sends
		// no notifications/cancelled for the tools/call, which the server answered long ago
		// (the task is cancelled with tasks/cancel only). The caller reads why from ctx.
		out, err = &transport.JSONRPCResponse{JSONRPC: mcpgo.JSONRPC_VERSION,
			Error: &mcpgo.JSONRPCErrorDetails{Code: mcpgo.INTERNAL_ERROR, Message: err.Error()}}, nil
	}
	if err != nil {
		return nil, true, err
	}
	out.ID = req.ID
	return out, true, nil
}

// isTaskAnswer reports whether a result is a CreateTaskResult.
func isTaskAnswer(raw json.RawMessage) bool {
	var probe struct {
		ResultType string `json:"resultType"`
	}
	return json.Unmarshal(raw, &probe) == nil && probe.ResultType == "task"
}

// follow polls the task until it ends and returns the answer its call would have had. done
// reports that the task reached an end of its own (nothing to cancel).
func (x *extTasks) follow(ctx context.Context, call *extCall, t extTask, next sendFunc) (_ *transport.JSONRPCResponse, done bool, _ error) {
	said := ""
	answered := map[string]bool{}
	start := time.Now()
	for {
		if t.Message != "" && t.Message != said && call.running != nil {
			said = t.Message
			call.running.Progress(tools.Progress{Message: t.Message})
		}
		ttl := t.TTL // the latest the server said; it may change, 0 is unlimited
		switch t.Status {
		case taskCompleted:
			resp, err := finalResult(t.Result)
			return resp, true, err
		case taskFailed:
			return &transport.JSONRPCResponse{JSONRPC: mcpgo.JSONRPC_VERSION, Error: t.Err}, true, nil
		case taskCancelled:
			return nil, true, fmt.Errorf("the server cancelled the task (%s)", t.Message)
		case taskInputRequired:
			if err := x.answer(ctx, t, answered, next); err != nil {
				return nil, false, err
			}
		}
		if ttl > 0 && time.Since(start) > ttl {
			return nil, false, fmt.Errorf("the task did not end within its time to live of %s", ttl)
		}
		if err := sleepCtx(ctx, taskPoll(t.Poll)); err != nil {
			return nil, false, err
		}
		got, err := x.get(ctx, t.ID, next)
		if err != nil {
			return nil, false, err
		}
		t = got
	}
}

// taskPoll is the interval to poll at: the server's, within bounds, or DefaultTaskPoll.
func taskPoll(asked time.Duration) time.Duration {
	if asked <= 0 {
		return DefaultTaskPoll
	}
	return min(max(asked, minTaskPoll), maxTaskPoll)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// finalResult is a completed task's result as the answer to its tools/call; one that is not a
// final result (another task, a question) is refused.
func finalResult(raw json.RawMessage) (*transport.JSONRPCResponse, error) {
	var probe struct {
		ResultType string `json:"resultType"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("the task's result cannot be read: %w", err)
	}
	if probe.ResultType != "" && probe.ResultType != string(mcpgo.ResultTypeComplete) {
		return nil, fmt.Errorf("the task's result is not final (resultType %q)", tools.Truncate(probe.ResultType, maxTaskStatusLen))
	}
	return &transport.JSONRPCResponse{JSONRPC: mcpgo.JSONRPC_VERSION, Result: raw}, nil
}

// get asks the server for the task.
func (x *extTasks) get(ctx context.Context, id string, next sendFunc) (extTask, error) {
	raw, err := x.request(ctx, next, string(mcpgo.MethodTasksGet), id, nil)
	if err != nil {
		return extTask{}, fmt.Errorf("tasks/get: %w", err)
	}
	t, err := parseExtTask(raw, false)
	if err != nil {
		return extTask{}, fmt.Errorf("tasks/get: %w", err)
	}
	if t.ID != id {
		return extTask{}, errors.New("tasks/get answered about another task")
	}
	return t, nil
}

// answer asks the user the task's questions not asked yet, in the order of their keys, and
// sends each answer with tasks/update. A question of a kind the bot does not offer (sampling,
// roots) ends the call: the task cannot go on without it.
func (x *extTasks) answer(ctx context.Context, t extTask, answered map[string]bool, next sendFunc) error {
	keys := make([]string, 0, len(t.Inputs))
	for k := range t.Inputs {
		if !answered[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if len(answered) >= maxTaskAnswered {
			return fmt.Errorf("the task asked more than %d questions", maxTaskAnswered)
		}
		answered[k] = true
		var in struct {
			Method string                  `json:"method"`
			Params mcpgo.ElicitationParams `json:"params"`
		}
		if err := json.Unmarshal(t.Inputs[k], &in); err != nil {
			return fmt.Errorf("the task's question %q cannot be read: %w", k, err)
		}
		if in.Method != string(mcpgo.MethodElicitationCreate) {
			return fmt.Errorf("the task asked for %q, which the bot does not offer", tools.Truncate(in.Method, maxTaskStatusLen))
		}
		res := elicitResult(mcpgo.ElicitationResponseActionCancel, nil)
		if x.ask != nil {
			if got, err := x.ask.Elicit(ctx, mcpgo.ElicitationRequest{Params: in.Params}); err == nil && got != nil {
				res = got
			}
		}
		update := map[string]any{"inputResponses": mcpgo.InputResponses{k: mcpgo.NewElicitationInputResponse(*res)}}
		if _, err := x.request(ctx, next, "tasks/update", t.ID, update); err != nil {
			return fmt.Errorf("tasks/update: %w", err)
		}
	}
	return nil
}

// stop tells the server to cancel a task the bot no longer waits for; once the server took
// it, the task leaves the task book (else the next process cancels it).
func (x *extTasks) stop(ctx context.Context, id string, next sendFunc) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), taskCancelWait)
	defer cancel()
	if _, err := x.request(cctx, next, string(mcpgo.MethodTasksCancel), id, nil); err != nil {
		x.logger.Warn("MCP server's task could not be cancelled", "task", id, "err", x.redact.err(err))
		return
	}
	if x.ended != nil {
		x.ended(ctx, id)
	}
}

// request sends one of the extension's requests about task id, with the per-request metadata of
// 2026-07-28 (which mcp-go adds only to the requests it sends itself) and the Mcp-Name header
// that routes it to the task's server, and returns its result.
func (x *extTasks) request(ctx context.Context, next sendFunc, method, id string, extra map[string]any) (json.RawMessage, error) {
	caps := x.sess.client.GetClientCapabilities()
	if x.ask != nil && caps.Elicitation == nil {
		caps.Elicitation = &mcpgo.ElicitationCapability{}
	}
	ext := map[string]any{extTasksID: map[string]any{}}
	for k, v := range caps.Extensions {
		ext[k] = v
	}
	caps.Extensions = ext
	params := map[string]any{"taskId": id, "_meta": map[string]any{
		mcpgo.MetaKeyProtocolVersion:    x.sess.version,
		mcpgo.MetaKeyClientCapabilities: caps,
		mcpgo.MetaKeyClientInfo:         mcpgo.Implementation{Name: "relaybot", Version: clientVersion},
	}}
	for k, v := range extra {
		params[k] = v
	}
	h := http.Header{}
	h.Set(mcpgo.HeaderMethod, method)
	if v, ok := mcpgo.EncodeHeaderValue(id); ok {
		h.Set(mcpgo.HeaderName, v)
	}
	rid := mcpgo.NewRequestId("relaybot-task-" + strconv.FormatInt(x.sess.calls.next.Add(1), 10))
	resp, err := next(ctx, transport.JSONRPCRequest{JSONRPC: mcpgo.JSONRPC_VERSION, ID: rid, Method: method, Params: params, Header: h})
	if err != nil {
		return nil, err
	}
	if resp == nil {
		return nil, errors.New("no answer")
	}
	if resp.Error != nil {
		return nil, resp.Error.AsError()
	}
	return resp.Result, nil
}

// declareExt adds the extension to the client capabilities in a request's params._meta (which
// mcp-go fills with the capabilities it knows of). Params that are not an object are left alone.
func declareExt(params any) any {
	raw, err := json.Marshal(params)
	if err != nil {
		return params
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return params
	}
	meta := objectOf(fields["_meta"])
	caps := objectOf(meta[mcpgo.MetaKeyClientCapabilities])
	ext := objectOf(caps["extensions"])
	ext[extTasksID] = json.RawMessage(`{}`)
	caps["extensions"] = mustJSON(ext)
	meta[mcpgo.MetaKeyClientCapabilities] = mustJSON(caps)
	fields["_meta"] = mustJSON(meta)
	return fields
}

func objectOf(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil || m == nil {
		return map[string]json.RawMessage{}
	}
	return m
}

func mustJSON(m map[string]json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(m) // a map of raw messages that were valid JSON always encodes
	return b
}
