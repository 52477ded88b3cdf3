package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The tools of a Kit that talk while they run:
//
//   - progress(steps, seconds): reports steps progress notifications ("step N of M", total
//     steps) to the call's progress token, then waits seconds (cancellable), then returns "done".
//   - log(message, seconds): sends message as an info log notification, then waits seconds.
//   - ask(form): asks an elicitation question and returns "ACTION {content}". form is "choice"
//     (color enum red|green|blue and confirm boolean), "text" (name string and age integer
//     1..150, both required), "optional" (note string, not required) or "url" (URL mode).
//   - read_sleep(seconds): annotated readOnlyHint: true; waits, then returns "slept".
//   - cancel_notices(): how many notifications/cancelled the server received (CancelNotices).
//
// Every wait counts a cancelled call in Cancelled, and records its start and end (Spans).

// Span is when a waiting tool ran on the server.
type Span struct {
	Tool       string
	Start, End time.Time
}

func (k *Kit) addLiveTools() {
	k.Server.AddTools(
		server.ServerTool{
			Tool: mcp.NewTool("progress", mcp.WithDescription("Reports progress, then waits."),
				mcp.WithNumber("steps", mcp.Required()), mcp.WithNumber("seconds")),
			Handler: k.counted("progress", func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				steps := r.GetInt("steps", 1)
				token := progressToken(r)
				for i := 1; i <= steps; i++ {
					if token != nil {
						_ = k.Server.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
							"progressToken": token, "progress": i, "total": steps, "message": fmt.Sprintf("step %d of %d", i, steps),
						})
					}
				}
				return k.wait(ctx, "progress", r.GetFloat("seconds", 0), "done")
			}),
		},
		server.ServerTool{
			Tool: mcp.NewTool("log", mcp.WithDescription("Logs a message, then waits."),
				mcp.WithString("message", mcp.Required()), mcp.WithNumber("seconds")),
			Handler: k.counted("log", func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				_ = k.Server.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(mcp.LoggingLevelInfo, "kit", r.GetString("message", "")))
				return k.wait(ctx, "log", r.GetFloat("seconds", 0), "logged")
			}),
		},
		server.ServerTool{
			Tool: mcp.NewTool("ask", mcp.WithDescription("Asks the user a question."),
				mcp.WithString("form", mcp.Required())),
			Handler: k.counted("ask", k.ask),
		},
		server.ServerTool{
			Tool: mcp.NewTool("read_sleep", mcp.WithDescription("Reads for some seconds."),
				mcp.WithNumber("seconds", mcp.Required()), mcp.WithReadOnlyHintAnnotation(true)),
			Handler: k.counted("read_sleep", func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return k.wait(ctx, "read_sleep", r.GetFloat("seconds", 0), "slept")
			}),
		},
		server.ServerTool{
			Tool: mcp.NewTool("cancel_notices", mcp.WithDescription("Counts the notifications/cancelled received.")),
			Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(fmt.Sprint(k.CancelNotices())), nil
			},
		},
	)
}

func progressToken(r mcp.CallToolRequest) any {
	if r.Params.Meta == nil {
		return nil
	}
	return r.Params.Meta.ProgressToken
}

// wait waits seconds or until the call is cancelled, recording the span.
func (k *Kit) wait(ctx context.Context, tool string, seconds float64, result string) (*mcp.CallToolResult, error) {
	start := time.Now()
	defer func() {
		k.mu.Lock()
		k.spans = append(k.spans, Span{Tool: tool, Start: start, End: time.Now()})
		k.mu.Unlock()
	}()
	t := time.NewTimer(time.Duration(seconds * float64(time.Second)))
	defer t.Stop()
	select {
	case <-t.C:
		return mcp.NewToolResultText(result), nil
	case <-ctx.Done():
		k.cancelled.Add(1)
		return nil, ctx.Err()
	}
}

func (k *Kit) ask(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	req := mcp.ElicitationRequest{}
	switch form := r.GetString("form", ""); form {
	case "choice":
		req.Params = mcp.ElicitationParams{Message: "Pick a colour", RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"color":   map[string]any{"type": "string", "enum": []string{"red", "green", "blue"}, "title": "Colour"},
				"confirm": map[string]any{"type": "boolean", "title": "Sure?"},
			},
			"required": []string{"color", "confirm"},
		}}
	case "text":
		req.Params = mcp.ElicitationParams{Message: "Who are you?", RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name": map[string]any{"type": "string", "title": "Name"},
				"age":  map[string]any{"type": "integer", "minimum": 1, "maximum": 150},
			},
			"required": []string{"name", "age"},
		}}
	case "optional":
		req.Params = mcp.ElicitationParams{Message: "Anything to add?", RequestedSchema: map[string]any{
			"type": "object", "properties": map[string]any{"note": map[string]any{"type": "string"}},
		}}
	case "multi": // a titled multi-select (MCP 2025-11-25) with a default
		req.Params = mcp.ElicitationParams{Message: "Pick your fish", RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"fish": map[string]any{"type": "array", "title": "Fish", "minItems": 1, "maxItems": 2,
					"items": map[string]any{"anyOf": []map[string]any{
						{"const": "f1", "title": "Tuna"}, {"const": "f2", "title": "Salmon"}, {"const": "f3", "title": "Trout"}}},
					"default": []string{"f1"}},
			},
			"required": []string{"fish"},
		}}
	case "defaults": // a default for a text, a boolean and a single-select
		req.Params = mcp.ElicitationParams{Message: "Settings?", RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"greeting": map[string]any{"type": "string", "default": "hello"},
				"loud":     map[string]any{"type": "boolean", "default": false},
				"size":     map[string]any{"type": "string", "enum": []string{"s", "m", "l"}, "default": "m"},
			},
			"required": []string{"greeting", "loud", "size"},
		}}
	case "nested": // a nested object, which the spec forbids in a form
		req.Params = mcp.ElicitationParams{Message: "Where do you live?", RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"address": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
			},
		}}
	case "url":
		req.Params = mcp.ElicitationParams{Mode: mcp.ElicitationModeURL, Message: "Sign in to the library",
			URL: "https://library.example/login?state=abc", ElicitationID: "el-1"}
	default:
		return mcp.NewToolResultError("unknown form " + form), nil
	}
	res, err := k.Server.RequestElicitation(ctx, req)
	if err != nil {
		return mcp.NewToolResultError("elicitation failed: " + err.Error()), nil
	}
	content, _ := json.Marshal(res.Content)
	return mcp.NewToolResultText(fmt.Sprintf("%s %s", res.Action, content)), nil
}

// CancelNotices reports how many notifications/cancelled messages reached the server (counted
// on the wire by StartHTTP and cmd/mcptestserver through Kit.Stdio).
func (k *Kit) CancelNotices() int64 { return k.notices.Load() }

// Spans returns when the waiting tools ran, in the order they ended.
func (k *Kit) Spans() []Span {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Span(nil), k.spans...)
}

// noteMessage counts a notifications/cancelled among the JSON-RPC messages in body (one message
// or a batch).
func (k *Kit) noteMessage(body []byte) {
	var one struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &one) == nil && one.Method == string(mcp.MethodNotificationCancelled) {
		k.notices.Add(1)
		return
	}
	var batch []struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &batch) == nil {
		for _, m := range batch {
			if m.Method == string(mcp.MethodNotificationCancelled) {
				k.notices.Add(1)
			}
		}
	}
}

// Stdio returns r as the server's input and w as its output: the notifications/cancelled lines
// that pass through are counted, and a Legacy server's refusals of server/discover are written
// to w beside the server's own lines (a stdio server's stdin and stdout), and so are the
// answers of the tasks extension (exttasks.go).
func (k *Kit) Stdio(r io.Reader, w io.Writer) (io.Reader, io.Writer) {
	out := &stdioOut{w: w}
	return k.countCancels(r, out), out
}

func (k *Kit) countCancels(r io.Reader, out io.Writer) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
		for sc.Scan() {
			line := sc.Bytes()
			if bytes.Contains(line, []byte(mcp.MethodNotificationCancelled)) {
				k.noteMessage(line)
			}
			refusal, refused := k.refuseDiscover(line)
			if !refused {
				refusal, _, refused = k.answerExt(line, nil)
			}
			if refused {
				if _, err := out.Write(append(refusal, '\n')); err != nil {
					pw.CloseWithError(err)
					return
				}
				continue
			}
			if _, err := pw.Write(append(line, '\n')); err != nil {
				return
			}
		}
		pw.CloseWithError(sc.Err())
	}()
	return pr
}
