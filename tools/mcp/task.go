package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"relaybot/tools"
)

// Tasks (MCP 2025-11-25, SEP-1686): a tools/call with a "task" parameter is answered at once
// with a task; the client polls tasks/get (whose statusMessage is the call's status line), takes
// the result with tasks/result and stops the work with tasks/cancel. mcp-go's client decodes a
// tools/call answer only as a result, so the bot sends the task requests on the session's
// transport itself.

// Bounds of the poll interval a server asks for; DefaultTaskPoll when it asks none.
const (
	DefaultTaskPoll = time.Second
	minTaskPoll     = 100 * time.Millisecond
	maxTaskPoll     = 30 * time.Second
	// taskCancelWait bounds the tasks/cancel sent for a call the bot stopped waiting for.
	taskCancelWait = 10 * time.Second
)

// DefaultTaskTimeout replaces a zero TaskTimeout.
const DefaultTaskTimeout = time.Hour

// asTask reports whether the call of the server's tool name is made task-augmented: on a
// 2025-11-25 session, for a tool that requires a task, or one that supports it on a server that
// offers task-augmented tool calls.
func (ss *session) asTask(name string) bool {
	if ss.modern() {
		return false
	}
	ss.taskMu.Lock()
	support := ss.taskTools[name]
	ss.taskMu.Unlock()
	switch support {
	case mcpgo.TaskSupportRequired:
		return true
	case mcpgo.TaskSupportOptional:
		t := ss.caps.Tasks
		return t != nil && t.Requests != nil && t.Requests.Tools != nil && t.Requests.Tools.Call != nil
	}
	return false
}

// noteTasks records which of the listed tools take tasks.
func (ss *session) noteTasks(listed []mcpgo.Tool) {
	m := map[string]mcpgo.TaskSupport{}
	for _, t := range listed {
		if t.Execution != nil && t.Execution.TaskSupport != "" && t.Execution.TaskSupport != mcpgo.TaskSupportForbidden {
			m[t.Name] = t.Execution.TaskSupport
		}
	}
	ss.taskMu.Lock()
	ss.taskTools = m
	ss.taskMu.Unlock()
}

func (s *serverConn) taskTimeout() time.Duration {
	if s.cfg.TaskTimeout > 0 {
		return s.cfg.TaskTimeout
	}
	return DefaultTaskTimeout
}

// callTask runs a task-augmented call (meta: the trace context for params._meta) within the server's task timeout (not the call timeout):
// it polls the task until it ends and returns its result; a call the bot stops waiting for (the
// turn stopped, the task timeout passed) cancels the task on the server.
func (s *serverConn) callTask(ctx context.Context, sess *session, name string, args, meta map[string]any, r tools.Running) (*mcpgo.CallToolResult, error) {
	limit := s.taskTimeout()
	tctx, cancel := context.WithTimeoutCause(ctx, limit, fmt.Errorf("the task timeout of %s passed", limit))
	defer cancel()
	tctx, w, unwatch := sess.calls.watch(tctx, r)
	defer unwatch()
	m := map[string]any{"progressToken": w.token}
	for k, v := range meta {
		m[k] = v
	}
	params := map[string]any{"name": name, "arguments": args, "task": map[string]any{}, "_meta": m}
	raw, err := s.send(tctx, sess, string(mcpgo.MethodToolsCall), params)
	if err != nil {
		return nil, s.callErr(ctx, tctx, sess, name, err, limit)
	}
	var created struct {
		Task *mcpgo.Task `json:"task"`
	}
	if err := json.Unmarshal(raw, &created); err != nil || created.Task == nil || created.Task.TaskId == "" {
		// The server ran the call at once instead.
		return mcpgo.ParseCallToolResult(&raw)
	}
	id := created.Task.TaskId
	s.beginTask(ctx, sess, id)
	res, ended, err := s.followTask(tctx, sess, *created.Task, r)
	if !ended {
		// The bot stops waiting (stopped, out of time, the server unreachable): the task is
		// cancelled, or, when that fails, left booked for the next process to cancel.
		ended = s.cancelTask(ctx, sess, id)
	}
	if ended {
		s.endTask(ctx, id)
	}
	if err != nil {
		return nil, s.callErr(ctx, tctx, sess, name, err, limit)
	}
	return res, nil
}

// followTask polls the task until it ends, reporting each new status message, then takes its
// result. A task that needs input is asked for its result at once: the server sends its
// questions on that request's stream. ended reports that the task is over on the server (its
// result taken, or it ended on its own); without it the bot stopped waiting.
func (s *serverConn) followTask(ctx context.Context, sess *session, task mcpgo.Task, r tools.Running) (_ *mcpgo.CallToolResult, ended bool, _ error) {
	said := ""
	for {
		if msg := task.StatusMessage; msg != "" && msg != said && r != nil {
			said = msg
			r.Progress(tools.Progress{Message: msg})
		}
		switch task.Status {
		case mcpgo.TaskStatusCompleted, mcpgo.TaskStatusFailed, mcpgo.TaskStatusInputRequired:
			raw, err := s.send(ctx, sess, string(mcpgo.MethodTasksResult), map[string]any{"taskId": task.TaskId})
			if err != nil {
				return nil, task.Status != mcpgo.TaskStatusInputRequired && ctx.Err() == nil, err
			}
			res, err := mcpgo.ParseCallToolResult(&raw)
			return res, true, err
		case mcpgo.TaskStatusCancelled:
			return nil, true, fmt.Errorf("the server cancelled the task (%s)", task.StatusMessage)
		}
		poll := DefaultTaskPoll
		if task.PollInterval != nil && *task.PollInterval > 0 {
			poll = min(max(time.Duration(*task.PollInterval)*time.Millisecond, minTaskPoll), maxTaskPoll)
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, false, context.Cause(ctx)
		case <-t.C:
		}
		got, err := sess.client.GetTask(ctx, mcpgo.GetTaskRequest{Params: mcpgo.GetTaskParams{TaskId: task.TaskId}})
		if err != nil {
			return nil, false, fmt.Errorf("tasks/get: %w", err)
		}
		task = got.Task
	}
}

// cancelTask tells the server to stop a task the bot no longer waits for, and reports whether
// the server took it.
func (s *serverConn) cancelTask(ctx context.Context, sess *session, id string) bool {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), taskCancelWait)
	defer cancel()
	if _, err := sess.client.CancelTask(cctx, mcpgo.CancelTaskRequest{Params: mcpgo.CancelTaskParams{TaskId: id}}); err != nil {
		s.logger.Warn("MCP server's task could not be cancelled", "task", id, "err", s.redact.err(err))
		return false
	}
	return true
}

// send sends one request on the session's transport and returns its result.
func (s *serverConn) send(ctx context.Context, sess *session, method string, params any) (json.RawMessage, error) {
	id := mcpgo.NewRequestId("relaybot-task-" + strconv.FormatInt(sess.calls.next.Add(1), 10))
	resp, err := sess.client.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: mcpgo.JSONRPC_VERSION, ID: id, Method: method, Params: params})
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, resp.Error.AsError()
	}
	return resp.Result, nil
}
