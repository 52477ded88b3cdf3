// Package mcp runs real MCP servers built with mcp-go for tests: a scripted tool set that can be
// served in process, over streamable HTTP, over legacy SSE, and as a stdio binary
// (cmd/mcptestserver). Servers can inject the faults the MCP client must survive: slow tools,
// expired sessions, a remote that refuses streamable HTTP, a stdio process that dies.
package mcp

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"relaybot/internal/testkit/otlp"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// PNG is a 1×1 transparent PNG: the image the "image" tool returns.
var PNG = []byte{
	0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
	0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
	0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
	0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
	0x42, 0x60, 0x82,
}

// Kit is an MCP server with a fixed set of tools, counting the calls it gets:
//
//   - echo(text): returns text.
//   - sleep(seconds): waits, then returns "slept"; a cancelled call is counted in Cancelled.
//   - fail(message): an isError result carrying message (no content at all when it is empty).
//   - image(): a text part and a PNG image.
//   - resource(size): an embedded text resource of size bytes.
//   - cancelled(): how many sleep calls were cancelled (Cancelled, readable over any transport).
//   - env(name): the server's environment variable name.
//   - pid(): the process id of the server.
//
// and the tools that talk while they run (live.go), the task tool (tasks.go; on 2026-07-28 the
// tasks extension's, exttasks.go), two resources
// (resources.go) and two prompts (prompts.go).
type Kit struct {
	// Server is the mcp-go server; serve it with any transport.
	Server *server.MCPServer

	mu        sync.Mutex
	calls     map[string]int
	records   map[string]int // executions of the record tool, by key
	spans     []Span
	name      string
	traceTo   string // OTLP/HTTP receiver of the server's own spans; empty: none
	cancelled atomic.Int64
	notices   atomic.Int64
	legacy    atomic.Bool
	discovers atomic.Int64
	reads     atomic.Int64
	tasks     map[int]context.CancelFunc // running tasks' work, by a number of the kit's
	nextTask  int
	extTasks  map[string]*extTask // the tasks extension's tasks (exttasks.go), by id
	handbook  string              // kit://handbook's text when not Handbook (SetHandbook)
	subs      map[string][]string // sessions subscribed to each resource, by URI
}

// TraceTo makes the server record a span of every tool call whose request carries a W3C
// traceparent in params._meta (as a server instrumented with OpenTelemetry does): a server
// span "tools/call NAME" in that trace, child of the caller's span, sent to the OTLP/HTTP
// receiver at endpoint when the call ends.
func (k *Kit) TraceTo(endpoint string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.traceTo = endpoint
}

// New builds a Kit whose server is called name. It announces tools list changes.
func New(name string) *Kit {
	k := &Kit{calls: map[string]int{}, records: map[string]int{}, name: name}
	hooks := &server.Hooks{}
	hooks.AddBeforeCancelTask(k.cancelTasks)
	hooks.AddAfterSubscribe(k.subscribed)
	k.Server = server.NewMCPServer(name, "1.0.0", server.WithToolCapabilities(true),
		server.WithLogging(), server.WithElicitation(), server.WithTaskCapabilities(true, true, true),
		server.WithResourceCapabilities(true, true), server.WithPromptCapabilities(true),
		server.WithHooks(hooks), server.WithExtensions(map[string]any{extTasksID: map[string]any{}}))
	k.Server.AddTools(
		server.ServerTool{
			Tool: mcp.NewTool("echo", mcp.WithDescription("Echoes its text."),
				mcp.WithString("text", mcp.Required(), mcp.Description("text to echo"))),
			Handler: k.counted("echo", func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(r.GetString("text", "")), nil
			}),
		},
		server.ServerTool{
			Tool: mcp.NewTool("sleep", mcp.WithDescription("Sleeps for some seconds."),
				mcp.WithNumber("seconds", mcp.Required())),
			Handler: k.counted("sleep", func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				d := time.Duration(r.GetFloat("seconds", 0) * float64(time.Second))
				t := time.NewTimer(d)
				defer t.Stop()
				select {
				case <-t.C:
					return mcp.NewToolResultText("slept"), nil
				case <-ctx.Done():
					k.cancelled.Add(1)
					return nil, ctx.Err()
				}
			}),
		},
		server.ServerTool{
			Tool: mcp.NewTool("fail", mcp.WithDescription("Fails with a message."), mcp.WithString("message")),
			Handler: k.counted("fail", func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				msg := r.GetString("message", "")
				if msg == "" {
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{}}, nil
				}
				return mcp.NewToolResultError(msg), nil
			}),
		},
		server.ServerTool{
			Tool: mcp.NewTool("image", mcp.WithDescription("Draws a picture.")),
			Handler: k.counted("image", func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultImage("a picture", base64.StdEncoding.EncodeToString(PNG), "image/png"), nil
			}),
		},
		server.ServerTool{
			Tool: mcp.NewTool("resource", mcp.WithDescription("Returns an embedded text resource."),
				mcp.WithNumber("size", mcp.Required())),
			Handler: k.counted("resource", func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultResource("a document", mcp.TextResourceContents{
					URI: "file:///doc.txt", MIMEType: "text/plain",
					Text: strings.Repeat("a", r.GetInt("size", 0)),
				}), nil
			}),
		},
		server.ServerTool{
			Tool: mcp.NewTool("cancelled", mcp.WithDescription("Counts the sleep calls that were cancelled.")),
			Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(fmt.Sprint(k.Cancelled())), nil
			},
		},
		server.ServerTool{
			Tool: mcp.NewTool("env", mcp.WithDescription("Returns an environment variable of the server."),
				mcp.WithString("name", mcp.Required())),
			Handler: k.counted("env", func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(os.Getenv(r.GetString("name", ""))), nil
			}),
		},
		server.ServerTool{
			Tool: mcp.NewTool("pid", mcp.WithDescription("Returns the server's process id.")),
			Handler: k.counted("pid", func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(fmt.Sprint(os.Getpid())), nil
			}),
		},
	)
	k.addLiveTools()
	k.addTaskTools()
	k.addResources()
	k.addPrompts()
	return k
}

func (k *Kit) counted(name string, h server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		k.mu.Lock()
		k.calls[name]++
		traceTo := k.traceTo
		k.mu.Unlock()
		tid, parent, traced := traceParent(r)
		if traceTo == "" || !traced {
			return h(ctx, r)
		}
		start := time.Now()
		res, err := h(ctx, r)
		span := otlp.ServerSpan{Service: k.name, Name: "tools/call " + name, TraceID: tid, ParentID: parent,
			Start: start, End: time.Now(), Attrs: map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": name}}
		if xerr := otlp.Export(context.WithoutCancel(ctx), traceTo, span); xerr != nil {
			return nil, fmt.Errorf("exporting the server's span: %w", xerr)
		}
		return res, err
	}
}

// traceParent reads the W3C traceparent ("00-TRACEID-SPANID-FLAGS") of a request's _meta.
func traceParent(r mcp.CallToolRequest) (traceID, spanID string, ok bool) {
	if r.Params.Meta == nil {
		return "", "", false
	}
	tp, _ := r.Params.Meta.AdditionalFields["traceparent"].(string)
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || parts[0] != "00" || len(parts[1]) != 32 || len(parts[2]) != 16 {
		return "", "", false
	}
	return parts[1], parts[2], true
}

// Calls reports how many times the tool name has been called.
func (k *Kit) Calls(name string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls[name]
}

// AddRecordTool adds the tool record, a side effect (a file written, a mail sent, a ticket
// opened) whose executions the test counts by its key argument (Records): a call run twice shows
// as 2.
func (k *Kit) AddRecordTool() {
	k.Server.AddTool(mcp.NewTool("record", mcp.WithDescription("Records an event once per call."),
		mcp.WithString("key", mcp.Required(), mcp.Description("what to record"))),
		k.counted("record", func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			key := r.GetString("key", "")
			k.mu.Lock()
			k.records[key]++
			n := k.records[key]
			k.mu.Unlock()
			return mcp.NewToolResultText(fmt.Sprintf("recorded %s (%d)", key, n)), nil
		}))
}

// Records reports how many times the record tool ran for each key.
func (k *Kit) Records() map[string]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[string]int, len(k.records))
	for key, n := range k.records {
		out[key] = n
	}
	return out
}

// Cancelled reports how many sleep calls ended because their request was cancelled.
func (k *Kit) Cancelled() int64 { return k.cancelled.Load() }

// AddEchoTool adds another echo tool called name; the server sends
// notifications/tools/list_changed to connected clients.
func (k *Kit) AddEchoTool(name string) {
	k.Server.AddTool(mcp.NewTool(name, mcp.WithDescription("Echoes its text."), mcp.WithString("text")),
		k.counted(name, func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(r.GetString("text", "")), nil
		}))
}
