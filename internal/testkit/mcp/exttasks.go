package mcp

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// The Tasks extension of MCP 2026-07-28 (io.modelcontextprotocol/tasks, SEP-2663), which mcp-go
// v1.2.1 does not serve: a Kit that is not Legacy speaks it in front of its mcp-go server (over
// streamable HTTP, Serve and stdio alike), as the extension's specification has it.
//
//   - The server declares the extension in server/discover (capabilities.extensions).
//   - research(steps, seconds, question) called on 2026-07-28 with the extension in the
//     request's capabilities is answered at once with a task (resultType "task", pollIntervalMs
//     100, ttlMs an hour); without it, with -32021 "Missing required client capability" naming
//     the extension (the tool cannot run but as a task).
//   - tasks/get tells the task: each one while steps remain takes the next step ("step N of M"
//     in statusMessage, status working), as a job advancing while its client watches; after
//     the last step the task needs input when a question is asked (input_required, the
//     question an elicitation form with one string field "answer" under the key "q1") until a
//     tasks/update answers it, and ends completed once seconds have passed since it was
//     created, its result "researched" (or "researched: ACTION {content}" with the answer).
//   - tasks/cancel stops a running task (status cancelled; counted in Cancelled).
//   - tasks/get, tasks/update and tasks/cancel are refused with -32021 without the extension in
//     the request's capabilities, with -32602 for a task the server does not know, and over
//     HTTP with -32020 (400) when the Mcp-Name header is not the task's id.
//
// A Legacy Kit (2025-11-25) does none of this: research is mcp-go's task tool of that revision.

const extTasksID = "io.modelcontextprotocol/tasks"

// extTask is a task of the extension the kit runs. Its end is worked out when it is asked
// about, so no goroutine outlives a test.
type extTask struct {
	id        string
	steps     int
	shown     int // steps shown so far
	until     time.Time
	question  string
	answer    json.RawMessage // the answer to the question, once given
	cancelled bool
}

// extMessage is a client's JSON-RPC request as the extension reads it.
type extMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name           string                     `json:"name"`
		Arguments      map[string]any             `json:"arguments"`
		TaskID         string                     `json:"taskId"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
		Meta           struct {
			Version string `json:"io.modelcontextprotocol/protocolVersion"`
			Caps    struct {
				Extensions map[string]json.RawMessage `json:"extensions"`
			} `json:"io.modelcontextprotocol/clientCapabilities"`
		} `json:"_meta"`
	} `json:"params"`
}

// answerExt answers body when it is a request of the extension: the JSON-RPC answer and its
// HTTP status. header is the HTTP request's (nil over stdio).
func (k *Kit) answerExt(body []byte, header http.Header) ([]byte, int, bool) {
	var m extMessage
	if k.legacy.Load() || json.Unmarshal(body, &m) != nil || len(m.ID) == 0 || !mcp.IsModernProtocol(m.Params.Meta.Version) {
		return nil, 0, false
	}
	_, declared := m.Params.Meta.Caps.Extensions[extTasksID]
	switch m.Method {
	case string(mcp.MethodToolsCall):
		if m.Params.Name != "research" {
			return nil, 0, false
		}
		if !declared {
			return missingExt(m.ID)
		}
		return k.startTask(m)
	case string(mcp.MethodTasksGet), "tasks/update", string(mcp.MethodTasksCancel):
	default:
		return nil, 0, false
	}
	if !declared {
		return missingExt(m.ID)
	}
	if header != nil {
		name, ok := mcp.DecodeHeaderValue(header.Get(mcp.HeaderName))
		if !ok || name != m.Params.TaskID {
			return rpcError(m.ID, mcp.HEADER_MISMATCH, "Mcp-Name header does not match params.taskId", nil)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.extTasks[m.Params.TaskID]
	if t == nil {
		return rpcError(m.ID, mcp.INVALID_PARAMS, "Failed to retrieve task: Task not found", nil)
	}
	switch m.Method {
	case string(mcp.MethodTasksGet):
		return rpcResult(m.ID, t.poll())
	case "tasks/update":
		if raw, ok := m.Params.InputResponses["q1"]; ok && t.question != "" && t.answer == nil {
			t.answer = raw
		}
	default:
		if !t.cancelled && t.state()["status"] != "completed" {
			t.cancelled = true
			k.cancelled.Add(1)
		}
	}
	return rpcResult(m.ID, map[string]any{"resultType": "complete"})
}

func (k *Kit) startTask(m extMessage) ([]byte, int, bool) {
	var id [16]byte
	_, _ = rand.Read(id[:])
	steps, _ := m.Params.Arguments["steps"].(float64)
	seconds, _ := m.Params.Arguments["seconds"].(float64)
	question, _ := m.Params.Arguments["question"].(string)
	t := &extTask{id: hex.EncodeToString(id[:]), steps: int(steps), question: question,
		until: time.Now().Add(time.Duration(seconds * float64(time.Second)))}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls["research"]++
	if k.extTasks == nil {
		k.extTasks = map[string]*extTask{}
	}
	k.extTasks[t.id] = t
	out := t.state()
	out["resultType"] = "task"
	out["status"], out["statusMessage"] = "working", "started"
	delete(out, "result")
	return rpcResult(m.ID, out)
}

// poll answers a tasks/get: the next step while steps remain, else the task as it stands.
func (t *extTask) poll() map[string]any {
	if !t.cancelled && t.shown < t.steps {
		t.shown++
		out := t.base()
		out["status"], out["statusMessage"] = "working", fmt.Sprintf("step %d of %d", t.shown, t.steps)
		return out
	}
	return t.state()
}

// state is the task as it stands, its steps all shown.
func (t *extTask) state() map[string]any {
	out := t.base()
	switch {
	case t.cancelled:
		out["status"], out["statusMessage"] = "cancelled", "cancelled by the client"
	case t.question != "" && t.answer == nil:
		out["status"], out["statusMessage"] = "input_required", "waiting for an answer"
		out["inputRequests"] = map[string]any{"q1": map[string]any{"method": "elicitation/create", "params": map[string]any{
			"mode": "form", "message": t.question, "requestedSchema": map[string]any{
				"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}, "required": []string{"answer"}}}}}
	case time.Now().Before(t.until):
		out["status"], out["statusMessage"] = "working", "researching"
	default:
		text := "researched"
		if t.answer != nil {
			var a struct {
				Action  string         `json:"action"`
				Content map[string]any `json:"content"`
			}
			_ = json.Unmarshal(t.answer, &a)
			content, _ := json.Marshal(a.Content)
			text = fmt.Sprintf("researched: %s %s", a.Action, content)
		}
		out["status"] = "completed"
		out["result"] = mcp.NewToolResultText(text)
	}
	return out
}

func (t *extTask) base() map[string]any {
	return map[string]any{"resultType": "complete", "taskId": t.id, "createdAt": "2026-12-07T00:00:00Z",
		"lastUpdatedAt": "2026-12-07T00:00:00Z", "ttlMs": 3600000, "pollIntervalMs": 100}
}

func missingExt(id json.RawMessage) ([]byte, int, bool) {
	return rpcError(id, mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, "Missing required client capability",
		map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{extTasksID: map[string]any{}}}})
}

func rpcResult(id json.RawMessage, result any) ([]byte, int, bool) {
	out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	return out, http.StatusOK, true
}

// rpcError answers with a JSON-RPC error and, over HTTP, 400 as a 2026-07-28 server does for
// these codes.
func rpcError(id json.RawMessage, code int, msg string, data any) ([]byte, int, bool) {
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": e})
	return out, http.StatusBadRequest, true
}

// serveExt writes the answer to a POSTed request of the extension; false when the server is to
// handle the request.
func (k *Kit) serveExt(w http.ResponseWriter, r *http.Request, body []byte) bool {
	out, status, ok := k.answerExt(body, r.Header)
	if !ok {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(out)
	return true
}
