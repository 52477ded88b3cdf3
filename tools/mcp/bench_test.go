package mcp_test

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"relaybot/chat"
	testmcp "relaybot/internal/testkit/mcp"
	"relaybot/tools"
	"relaybot/tools/mcp"
	"relaybot/tools/toolstest"
)

// BenchmarkBareInProcessCall is one tools/call through an mcp-go client to an in-process server,
// the floor the loader adds to.
func BenchmarkBareInProcessCall(b *testing.B) {
	ctx := context.Background()
	k := testmcp.New("kit")
	c, err := client.NewInProcessClientWithOptions(k.Server, client.WithProtocolVersion(mcpgo.LATEST_LEGACY_PROTOCOL_VERSION))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	init := mcpgo.InitializeRequest{}
	init.Params.ProtocolVersion = mcpgo.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcpgo.Implementation{Name: "bench", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		b.Fatal(err)
	}
	req := mcpgo.CallToolRequest{}
	req.Params.Name = "echo"
	req.Params.Arguments = map[string]any{"text": "hi"}
	b.ReportAllocs()
	for b.Loop() {
		res, err := c.CallTool(ctx, req)
		if err != nil || res.IsError {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoaderCall is the same call through Loader.Call, with the default 300 s deadline.
func BenchmarkLoaderCall(b *testing.B) {
	ctx := context.Background()
	k := testmcp.New("kit")
	l := mcp.NewLoader([]mcp.ServerConfig{mcp.InProcess("srv", k.Server, 300*time.Second)}, quietLogger())
	l.Start(ctx)
	defer l.Close()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := l.WaitStarted(wctx); err != nil {
		b.Fatal(err)
	}
	inv := tools.Invocation{Name: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)}
	b.ReportAllocs()
	for b.Loop() {
		res, err := l.Call(ctx, inv)
		if err != nil || res.Text != "hi" {
			b.Fatal(res.Text, err)
		}
	}
}

// BenchmarkRoundOfThreeReadOnlyCalls measures the pause of a tool round of three read-only calls
// of 1 s each over streamable HTTP, one after another (parallel = "off") and side by side
// (the default, read_only). Run: go test -run '^$' -bench RoundOfThree -benchtime 3x ./tools/mcp/
func BenchmarkRoundOfThreeReadOnlyCalls(b *testing.B) {
	k := testmcp.New("kit")
	l := mcp.NewLoader([]mcp.ServerConfig{{Name: "kit", Transport: "http", Local: true, URL: testmcp.StartHTTP(b, k).URL}}, nil)
	l.Start(context.Background())
	b.Cleanup(l.Close)
	for len(l.Tools(context.Background())) == 0 {
		runtime.Gosched()
	}
	calls := []tools.Call{
		{ToolCall: chat.ToolCall{ID: "a", Name: "read_sleep", Arguments: `{"seconds":1}`}, Round: 1},
		{ToolCall: chat.ToolCall{ID: "b", Name: "read_sleep", Arguments: `{"seconds":1}`}, Round: 1},
		{ToolCall: chat.ToolCall{ID: "c", Name: "read_sleep", Arguments: `{"seconds":1}`}, Round: 1},
	}
	for _, mode := range []tools.ParallelMode{tools.ParallelOff, tools.ParallelReadOnly} {
		b.Run(string(mode), func(b *testing.B) {
			m, err := tools.NewManager([]tools.Loader{l}, toolstest.NewRecorder(), tools.ManagerOptions{Parallel: mode})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				tt := m.ForTurn(tools.TurnInfo{}, nil)
				if tt.Parallel(calls) {
					tt.RunParallel(context.Background(), calls, nil)
					continue
				}
				for _, c := range calls {
					tt.Execute(context.Background(), c)
				}
			}
		})
	}
}
