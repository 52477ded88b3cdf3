package mcp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// post sends one JSON-RPC request of protocol 2026-07-28 to the kit over HTTP, declaring the
// tasks extension or not, and returns the HTTP status and the decoded answer.
func post(t *testing.T, url, method string, params map[string]any, declare bool, header map[string]string) (int, map[string]any) {
	t.Helper()
	caps := map[string]any{}
	if declare {
		caps["extensions"] = map[string]any{extTasksID: map[string]any{}}
	}
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": mcp.ProtocolVersion20260728,
		"io.modelcontextprotocol/clientCapabilities": caps}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
	req.Header.Set(mcp.HeaderMethod, method)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s answered %d with no JSON: %v", method, resp.StatusCode, err)
	}
	return resp.StatusCode, out
}

func errCode(out map[string]any) float64 {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

// The kit refuses what the extension says a server refuses: the task tool and the task methods
// without the extension declared (-32021, naming it), a task it does not know (-32602), and over
// HTTP a request whose Mcp-Name is not the task's id (-32020).
func TestTheKitRefusesWhatTheTasksExtensionRefuses(t *testing.T) {
	h := StartHTTP(t, New("kit"))
	call := map[string]any{"name": "research", "arguments": map[string]any{"steps": 1, "seconds": 600}}
	status, out := post(t, h.URL, "tools/call", call, false, map[string]string{mcp.HeaderName: "research"})
	data, _ := json.Marshal(out["error"])
	if status != http.StatusBadRequest || errCode(out) != mcp.MISSING_REQUIRED_CLIENT_CAPABILITY || !bytes.Contains(data, []byte(extTasksID)) {
		t.Fatalf("research without the extension: %d %v, want 400 -32021 naming the extension", status, out)
	}
	call = map[string]any{"name": "research", "arguments": map[string]any{"steps": 1, "seconds": 600}}
	status, out = post(t, h.URL, "tools/call", call, true, map[string]string{mcp.HeaderName: "research"})
	res, _ := out["result"].(map[string]any)
	id, _ := res["taskId"].(string)
	if status != http.StatusOK || res["resultType"] != "task" || id == "" || res["status"] != "working" {
		t.Fatalf("research with the extension: %d %v, want a task", status, out)
	}
	for _, c := range []struct {
		what    string
		id      string
		declare bool
		name    string
		code    float64
	}{
		{"without the extension", id, false, id, mcp.MISSING_REQUIRED_CLIENT_CAPABILITY},
		{"without Mcp-Name", id, true, "", mcp.HEADER_MISMATCH},
		{"with another Mcp-Name", id, true, "other", mcp.HEADER_MISMATCH},
		{"for an unknown task", "nope", true, "nope", mcp.INVALID_PARAMS},
	} {
		for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			hdr := map[string]string{}
			if c.name != "" {
				hdr[mcp.HeaderName] = c.name
			}
			status, out := post(t, h.URL, method, map[string]any{"taskId": c.id, "inputResponses": map[string]any{}}, c.declare, hdr)
			if status != http.StatusBadRequest || errCode(out) != c.code {
				t.Errorf("%s %s: %d %v, want 400 %v", method, c.what, status, out, c.code)
			}
		}
	}
	status, out = post(t, h.URL, "tasks/get", map[string]any{"taskId": id}, true, map[string]string{mcp.HeaderName: id})
	if res, _ := out["result"].(map[string]any); status != http.StatusOK || res["statusMessage"] != "step 1 of 1" {
		t.Fatalf("tasks/get as the spec has it: %d %v, want the task's first step", status, out)
	}
}
