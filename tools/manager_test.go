package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/tools"
	"relaybot/tools/native"
	"relaybot/tools/plugin"
	"relaybot/tools/skill"
	"relaybot/tools/toolstest"
)

// stubLoader stands in for the MCP loader (tools/mcp): a loader of any source whose tools are
// functions and whose list can change at run time.
type stubLoader struct {
	source audit.Source
	server string
	mu     sync.Mutex
	fns    map[string]func(ctx context.Context, inv tools.Invocation) (tools.Result, error)
	order  []string
}

func newStub(source audit.Source, server string) *stubLoader {
	return &stubLoader{source: source, server: server, fns: map[string]func(context.Context, tools.Invocation) (tools.Result, error){}}
}

func (s *stubLoader) add(name string, fn func(ctx context.Context, inv tools.Invocation) (tools.Result, error)) *stubLoader {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.fns[name]; !ok {
		s.order = append(s.order, name)
	}
	s.fns[name] = fn
	return s
}

func (s *stubLoader) remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.fns, name)
	for i, n := range s.order {
		if n == name {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
}

func (s *stubLoader) Source() audit.Source { return s.source }

func (s *stubLoader) Tools(ctx context.Context) []tools.Spec {
	s.mu.Lock()
	defer s.mu.Unlock()
	var specs []tools.Spec
	for _, n := range s.order {
		specs = append(specs, tools.Spec{Name: n, Description: "stub " + n, Parameters: json.RawMessage(`{"type":"object"}`), Server: s.server})
	}
	return specs
}

func (s *stubLoader) Call(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
	s.mu.Lock()
	fn, ok := s.fns[inv.Name]
	s.mu.Unlock()
	if !ok {
		return tools.Result{}, fmt.Errorf("stub: %s: %w", inv.Name, tools.ErrNotFound)
	}
	return fn(ctx, inv)
}

func text(s string) func(context.Context, tools.Invocation) (tools.Result, error) {
	return func(context.Context, tools.Invocation) (tools.Result, error) { return tools.Result{Text: s}, nil }
}

// The test plugin: tools that echo, fail, block and produce files, registered like a real plugin.
func init() {
	plugin.Register("manager_test", func(deps plugin.Deps) ([]plugin.Tool, error) {
		obj := json.RawMessage(`{"type":"object"}`)
		return []plugin.Tool{
			{Spec: tools.Spec{Name: "current_time", Description: "shadowed by native", Parameters: obj}, Run: func(context.Context, tools.Invocation) (tools.Result, error) {
				return tools.Result{Text: "plugin current_time"}, nil
			}},
			{Spec: tools.Spec{Name: "echo", Description: "returns its arguments", Parameters: obj}, Run: func(_ context.Context, inv tools.Invocation) (tools.Result, error) {
				return tools.Result{Text: string(inv.Arguments)}, nil
			}},
			{Spec: tools.Spec{Name: "admin_tool", Description: "admins only", Parameters: obj, AdminOnly: true}, Run: func(_ context.Context, inv tools.Invocation) (tools.Result, error) {
				return tools.Result{Text: fmt.Sprintf("admin=%v", inv.Turn.Admin)}, nil
			}},
			{Spec: tools.Spec{Name: "big", Description: "a long result", Parameters: obj}, Run: func(context.Context, tools.Invocation) (tools.Result, error) {
				return tools.Result{Text: strings.Repeat("é", 30000)}, nil
			}},
			{Spec: tools.Spec{Name: "chart", Description: "draws a chart", Parameters: obj}, Run: func(context.Context, tools.Invocation) (tools.Result, error) {
				return tools.Result{Text: "Chart drawn.", Files: []chat.File{{Name: "chart.png", MIME: "image/png", Data: []byte("\x89PNG")}}}, nil
			}},
			{Spec: tools.Spec{Name: "export", Description: "exports files", Parameters: obj}, Run: func(context.Context, tools.Invocation) (tools.Result, error) {
				return tools.Result{Files: []chat.File{{Name: "data.csv", MIME: "text/csv"}, {Name: "chart.png", MIME: "image/png"}}}, nil
			}},
			{Spec: tools.Spec{Name: "noop", Description: "does nothing", Parameters: obj}, Run: func(context.Context, tools.Invocation) (tools.Result, error) {
				return tools.Result{Text: "ok"}, nil
			}},
		}, nil
	})
}

// logBuffer collects slog output for assertions.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type fixture struct {
	m    *tools.Manager
	rec  *toolstest.Recorder
	mcp  *stubLoader
	logs *logBuffer
}

// newFixture builds a Manager over the real native, plugin and skill loaders and a stub in the
// MCP position, handed over in scrambled order.
func newFixture(t testing.TB, opts tools.ManagerOptions, mcp *stubLoader) *fixture {
	t.Helper()
	nat, err := native.NewLoader(native.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plug, err := plugin.NewLoader([]string{"manager_test"}, plugin.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	sk, err := skill.NewLoader(skill.Options{Dirs: []string{"skill/testdata/skills"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if mcp == nil {
		mcp = newStub(audit.SourceMCP, "files")
	}
	f := &fixture{rec: toolstest.NewRecorder(), mcp: mcp, logs: &logBuffer{}}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(f.logs, nil))
	}
	f.m, err = tools.NewManager([]tools.Loader{sk, mcp, plug, nat}, f.rec, opts)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func names(specs []tools.Spec) string {
	var n []string
	for _, s := range specs {
		n = append(n, s.Name)
	}
	return strings.Join(n, ",")
}

func TestDispatchOrderAndCollisions(t *testing.T) {
	mcp := newStub(audit.SourceMCP, "files").
		add("echo", text("mcp echo")).
		add("read_file", text("mcp read_file")).
		add("activate_skill", text("mcp activate_skill"))
	f := newFixture(t, tools.ManagerOptions{}, mcp)
	turn := f.m.ForTurn(tools.TurnInfo{Admin: true}, nil)
	if got, want := names(turn.Specs()), "current_time,fetch_url,echo,admin_tool,big,chart,export,noop,read_file,activate_skill"; got != want {
		t.Fatalf("offered %s\nwant    %s", got, want)
	}
	tests := []struct {
		tool   string
		args   string
		source audit.Source
		server string
		want   string
	}{
		{"current_time", `{"timezone":"UTC"}`, audit.SourceNative, "", `"timezone":"UTC"`}, // native before plugin
		{"echo", `{"a":1}`, audit.SourcePlugin, "", `{"a":1}`},                             // plugin before MCP
		{"read_file", ``, audit.SourceMCP, "files", "mcp read_file"},
		{"activate_skill", `{"name":"weather"}`, audit.SourceMCP, "files", "mcp activate_skill"}, // MCP before skill
	}
	for _, tc := range tests {
		t.Run(tc.tool, func(t *testing.T) {
			f.rec.Reset()
			out := turn.Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{ID: "c1", Name: tc.tool, Arguments: tc.args}})
			if out.Status != audit.StatusOK || !strings.Contains(out.Content, tc.want) {
				t.Fatalf("got %s %q, want ok with %q", out.Status, out.Content, tc.want)
			}
			r := f.rec.Records()[0]
			if r.Source != tc.source || r.Server != tc.server {
				t.Fatalf("audited source %q server %q, want %q %q", r.Source, r.Server, tc.source, tc.server)
			}
		})
	}

	// One warning per collision, naming both tools, however many turns list them.
	f.m.ForTurn(tools.TurnInfo{}, nil)
	logs := f.logs.String()
	for _, w := range []string{
		`kept="current_time (native)" dropped="current_time (plugin)"`,
		`kept="echo (plugin)" dropped="echo (MCP server \"files\")"`,
		`kept="activate_skill (MCP server \"files\")" dropped="activate_skill (skill)"`,
	} {
		if n := strings.Count(logs, w); n != 1 {
			t.Errorf("warning %s logged %d times; logs:\n%s", w, n, logs)
		}
	}
	if n := strings.Count(logs, "level=WARN"); n != 3 {
		t.Errorf("%d warnings, want 3:\n%s", n, logs)
	}

	// Without the MCP tool of that name, the skill loader's activate_skill runs.
	mcp.remove("activate_skill")
	out := f.m.ForTurn(tools.TurnInfo{}, nil).Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{Name: "activate_skill", Arguments: `{"name":"weather"}`}})
	if out.Status != audit.StatusOK || !strings.Contains(out.Content, "Give the forecast in Celsius") {
		t.Fatalf("skill activate_skill: %s %q", out.Status, out.Content)
	}
}

func TestToolListChangesBetweenTurns(t *testing.T) {
	f := newFixture(t, tools.ManagerOptions{}, nil)
	before := f.m.ForTurn(tools.TurnInfo{}, nil)
	if strings.Contains(names(before.Specs()), "search") {
		t.Fatal("search offered before the server had it")
	}
	f.mcp.add("search", text("found"))
	after := f.m.ForTurn(tools.TurnInfo{}, nil)
	if !strings.Contains(names(after.Specs()), "search") {
		t.Fatalf("search not offered after it appeared: %s", names(after.Specs()))
	}
	// The earlier turn did not offer it.
	if out := before.Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{Name: "search"}}); out.Status != audit.StatusNotFound {
		t.Fatalf("old turn: %s %q", out.Status, out.Content)
	}
	// A tool that vanished after the turn started (its server went away) is not found.
	f.mcp.remove("search")
	out := after.Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{Name: "search"}})
	if out.Status != audit.StatusNotFound || out.Content != "err: Tool not found: search" {
		t.Fatalf("vanished tool: %s %q", out.Status, out.Content)
	}
}

func TestExecuteStatuses(t *testing.T) {
	block := make(chan struct{})
	mcp := newStub(audit.SourceMCP, "srv").
		add("fail", func(context.Context, tools.Invocation) (tools.Result, error) {
			return tools.Result{}, errors.New("disk full")
		}).
		add("slow", func(context.Context, tools.Invocation) (tools.Result, error) {
			return tools.Result{}, fmt.Errorf("MCP tool 'slow' on server 'srv' timed out after 1 seconds: %w", tools.ErrTimeout)
		}).
		add("header_timer", func(context.Context, tools.Invocation) (tools.Result, error) {
			// What net/http returns when Transport.ResponseHeaderTimeout fires first.
			return tools.Result{}, &url.Error{Op: "Get", URL: "http://a.example", Err: headerTimeout{}}
		}).
		add("own_deadline", func(ctx context.Context, _ tools.Invocation) (tools.Result, error) {
			return tools.Result{}, fmt.Errorf("skill run: %w", context.DeadlineExceeded)
		}).
		add("conn_deadline", func(ctx context.Context, _ tools.Invocation) (tools.Result, error) {
			return tools.Result{}, fmt.Errorf("read: %w", os.ErrDeadlineExceeded)
		}).
		add("hang", func(ctx context.Context, _ tools.Invocation) (tools.Result, error) {
			close(block)
			<-ctx.Done()
			return tools.Result{}, ctx.Err()
		}).
		add("crash", func(context.Context, tools.Invocation) (tools.Result, error) {
			var m map[string]int
			m["x"]++
			return tools.Result{}, nil
		})
	f := newFixture(t, tools.ManagerOptions{}, mcp)
	notFetch := func(name string) bool { return name != "fetch_url" }

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	tests := []struct {
		name    string
		admin   bool
		allowed func(string) bool
		ctx     func() context.Context
		call    tools.Call
		status  audit.Status
		content string // exact, or a prefix ending in "…"
		source  audit.Source
	}{
		{name: "ok, empty arguments are {}", call: tools.Call{ToolCall: chat.ToolCall{Name: "echo"}}, status: audit.StatusOK, content: "{}", source: audit.SourcePlugin},
		{name: "unknown tool", call: tools.Call{ToolCall: chat.ToolCall{Name: "rm_rf", Arguments: `{}`}}, status: audit.StatusNotFound, content: "err: Tool not found: rm_rf"},
		{name: "arguments not JSON", call: tools.Call{ToolCall: chat.ToolCall{Name: "echo", Arguments: `{"a":`}}, status: audit.StatusBadArgs,
			content: "err: arguments of echo are not a JSON object: unexpected end of JSON input", source: audit.SourcePlugin},
		{name: "arguments an array", call: tools.Call{ToolCall: chat.ToolCall{Name: "echo", Arguments: `[1]`}}, status: audit.StatusBadArgs,
			content: "err: arguments of echo are not a JSON object: json: cannot unmarshal array…", source: audit.SourcePlugin},
		{name: "arguments null", call: tools.Call{ToolCall: chat.ToolCall{Name: "echo", Arguments: `null`}}, status: audit.StatusBadArgs,
			content: "err: arguments of echo are not a JSON object: got null", source: audit.SourcePlugin},
		{name: "not offered", allowed: notFetch, call: tools.Call{ToolCall: chat.ToolCall{Name: "fetch_url", Arguments: `{"url":"http://example.com"}`}},
			status: audit.StatusDenied, content: "err: tool fetch_url is not available in this chat", source: audit.SourceNative},
		{name: "admin-only, not admin", call: tools.Call{ToolCall: chat.ToolCall{Name: "admin_tool"}}, status: audit.StatusDenied,
			content: "err: tool admin_tool is not available in this chat", source: audit.SourcePlugin},
		{name: "admin-only, admin", admin: true, call: tools.Call{ToolCall: chat.ToolCall{Name: "admin_tool"}}, status: audit.StatusOK, content: "admin=true", source: audit.SourcePlugin},
		{name: "loader error", call: tools.Call{ToolCall: chat.ToolCall{Name: "fail"}}, status: audit.StatusError, content: "err: disk full", source: audit.SourceMCP},
		{name: "timeout", call: tools.Call{ToolCall: chat.ToolCall{Name: "slow"}}, status: audit.StatusTimeout,
			content: "err: MCP tool 'slow' on server 'srv' timed out after 1 seconds: tool call timed out", source: audit.SourceMCP},
		{name: "a transport's timer is a timeout", call: tools.Call{ToolCall: chat.ToolCall{Name: "header_timer"}}, status: audit.StatusTimeout,
			content: "err: Get \"http://a.example\": net/http: timeout awaiting response headers (tool call timed out)", source: audit.SourceMCP},
		{name: "the tool's own deadline is a timeout", call: tools.Call{ToolCall: chat.ToolCall{Name: "own_deadline"}}, status: audit.StatusTimeout,
			content: "err: skill run: context deadline exceeded (tool call timed out)", source: audit.SourceMCP},
		{name: "a connection deadline is a timeout", call: tools.Call{ToolCall: chat.ToolCall{Name: "conn_deadline"}}, status: audit.StatusTimeout,
			content: "err: read: i/o timeout (tool call timed out)", source: audit.SourceMCP},
		{name: "panic", call: tools.Call{ToolCall: chat.ToolCall{Name: "crash"}}, status: audit.StatusError, content: "err: tool crash panicked: assignment to entry in nil map", source: audit.SourceMCP},
		{name: "cancelled before it ran", ctx: func() context.Context { return cancelled }, call: tools.Call{ToolCall: chat.ToolCall{Name: "echo"}},
			status: audit.StatusCancelled, content: "err: tool echo was not run: context canceled", source: audit.SourcePlugin},
		{name: "cancelled while running", ctx: func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			go func() { <-block; cancel() }()
			return ctx
		}, call: tools.Call{ToolCall: chat.ToolCall{Name: "hang"}}, status: audit.StatusCancelled, content: "err: tool hang was cancelled: context canceled", source: audit.SourceMCP},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.rec.Reset()
			info := tools.TurnInfo{TurnID: 7, ConversationID: 3, Platform: "discord", ChatID: "c9", UserID: "u5", Admin: tc.admin}
			ctx := context.Background()
			if tc.ctx != nil {
				ctx = tc.ctx()
			}
			call := tc.call
			call.Round, call.ID = i+1, fmt.Sprintf("call_%d", i)
			out := f.m.ForTurn(info, tc.allowed).Execute(ctx, call)
			if out.Status != tc.status {
				t.Fatalf("status %s, want %s (%q)", out.Status, tc.status, out.Content)
			}
			if p, ok := strings.CutSuffix(tc.content, "…"); ok && !strings.HasPrefix(out.Content, p) || !ok && out.Content != tc.content {
				t.Fatalf("content %q, want %q", out.Content, tc.content)
			}
			if (out.Err == nil) != (tc.status == audit.StatusOK) {
				t.Fatalf("Err %v with status %s", out.Err, out.Status)
			}
			recs := f.rec.Records()
			if len(recs) != 1 {
				t.Fatalf("%d audit records, want 1", len(recs))
			}
			r := recs[0]
			want := audit.Record{ID: r.ID, TurnID: 7, ConversationID: 3, Platform: "discord", ChatID: "c9", UserID: "u5",
				Round: i + 1, ToolCallID: call.ID, ToolName: call.Name, Source: tc.source, Server: r.Server, Status: tc.status}
			got := r
			got.Arguments, got.Result, got.Error, got.ArgumentsSize, got.ResultSize = "", "", "", 0, 0
			got.StartedAt, got.FinishedAt, got.Duration = time.Time{}, time.Time{}, 0
			if got != want {
				t.Fatalf("audit record\n%+v\nwant\n%+v", got, want)
			}
			if tc.status == audit.StatusOK {
				if r.Result != out.Content || r.Error != "" {
					t.Fatalf("audited result %q error %q", r.Result, r.Error)
				}
			} else if "err: "+r.Error != out.Content || r.Result != "" {
				t.Fatalf("audited error %q result %q, content %q", r.Error, r.Result, out.Content)
			}
		})
	}
}

// headerTimeout is the error net/http's transport reports when its response-header timer fires.
type headerTimeout struct{}

func (headerTimeout) Error() string   { return "net/http: timeout awaiting response headers" }
func (headerTimeout) Timeout() bool   { return true }
func (headerTimeout) Temporary() bool { return true }

func TestAuditOneRecordPerCall(t *testing.T) {
	f := newFixture(t, tools.ManagerOptions{}, nil)
	var seenDuringRun []audit.Record
	f.mcp.add("peek", func(context.Context, tools.Invocation) (tools.Result, error) {
		seenDuringRun = f.rec.Records()
		return tools.Result{Text: "peeked"}, nil
	})
	turn := f.m.ForTurn(tools.TurnInfo{TurnID: 1}, func(n string) bool { return n != "noop" })
	calls := []tools.Call{
		{ToolCall: chat.ToolCall{ID: "a", Name: "echo", Arguments: `{"x":1}`}, Round: 1},
		{ToolCall: chat.ToolCall{ID: "b", Name: "nope"}, Round: 1},
		{ToolCall: chat.ToolCall{ID: "c", Name: "echo", Arguments: `not json`}, Round: 2},
		{ToolCall: chat.ToolCall{ID: "d", Name: "noop"}, Round: 2},
		{ToolCall: chat.ToolCall{ID: "e", Name: "peek"}, Round: 3},
	}
	for _, c := range calls {
		turn.Execute(context.Background(), c)
	}
	// The record was durable, status running, before the tool ran.
	if n := len(seenDuringRun); n != 5 || seenDuringRun[4].Status != audit.StatusRunning || !seenDuringRun[4].FinishedAt.IsZero() {
		t.Fatalf("during the run the recorder held %+v", seenDuringRun)
	}
	ev := f.rec.Events()
	if len(ev) != 2*len(calls) {
		t.Fatalf("%d recorder calls, want %d", len(ev), 2*len(calls))
	}
	ids := map[int64]bool{}
	for i, c := range calls {
		s, e := ev[2*i], ev[2*i+1]
		if s.Op != toolstest.OpStart || e.Op != toolstest.OpFinish || s.Record.ID != e.Record.ID || s.Record.ID == 0 || ids[s.Record.ID] {
			t.Fatalf("call %s: events %s #%d, %s #%d", c.ID, s.Op, s.Record.ID, e.Op, e.Record.ID)
		}
		ids[s.Record.ID] = true
		if s.Record.Status != audit.StatusRunning || !s.Record.FinishedAt.IsZero() || s.Record.StartedAt.IsZero() || s.Record.ToolCallID != c.ID {
			t.Fatalf("call %s: start record %+v", c.ID, s.Record)
		}
		r := e.Record
		if r.Status == audit.StatusRunning || r.StartedAt != s.Record.StartedAt || r.FinishedAt.Sub(r.StartedAt) != r.Duration || r.Duration < 0 {
			t.Fatalf("call %s: finish record %+v", c.ID, r)
		}
		if r.StartedAt.Location() != time.UTC {
			t.Fatalf("call %s: started_at not UTC: %v", c.ID, r.StartedAt)
		}
	}
	got := []audit.Status{}
	for _, r := range f.rec.Records() {
		got = append(got, r.Status)
	}
	if fmt.Sprint(got) != "[ok not_found bad_args denied ok]" {
		t.Fatalf("statuses %v", got)
	}
}

func TestRedaction(t *testing.T) {
	f := newFixture(t, tools.ManagerOptions{}, nil)
	args := `{"query":"weather","max_tokens":5,"headers":{"X-Api-Key":"k-111","Authorization":"Bearer t-222","Accept":"text/html"},` +
		`"list":[{"access_token":"t-333","nested":{"PASSWORD":"p-444","user":"ann"}},"plain"],"Cookie":["c-555"],"client_secret":{"a":"s-666"}}`
	out := f.m.ForTurn(tools.TurnInfo{}, nil).Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{Name: "echo", Arguments: args}})
	if out.Status != audit.StatusOK || out.Content != args {
		t.Fatalf("the model must get the tool's real result: %s %q", out.Status, out.Content)
	}
	r := f.rec.Records()[0]
	wantArgs := `{"Cookie":"[redacted]","client_secret":"[redacted]","headers":{"Accept":"text/html","Authorization":"[redacted]","X-Api-Key":"[redacted]"},` +
		`"list":[{"access_token":"[redacted]","nested":{"PASSWORD":"[redacted]","user":"ann"}},"plain"],"max_tokens":5,"query":"weather"}`
	if r.Arguments != wantArgs {
		t.Fatalf("audited arguments\n%s\nwant\n%s", r.Arguments, wantArgs)
	}
	if r.Result != wantArgs {
		t.Fatalf("audited result\n%s\nwant\n%s", r.Result, wantArgs)
	}
	if r.ArgumentsSize != len(args) {
		t.Fatalf("arguments size %d, want %d", r.ArgumentsSize, len(args))
	}

	// Error text is redacted in the audit record.
	f.mcp.add("leaky", func(context.Context, tools.Invocation) (tools.Result, error) {
		return tools.Result{}, errors.New(`upstream answered 401: {"error":"denied","access_token":"t-999"}`)
	})
	f.rec.Reset()
	f.m.ForTurn(tools.TurnInfo{}, nil).Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{Name: "leaky"}})
	if r := f.rec.Records()[0]; r.Error != `upstream answered 401: {"error":"denied","access_token":"[redacted]"}` {
		t.Fatalf("audited error %q", r.Error)
	}

	// Arguments that are not valid JSON are redacted too.
	f.rec.Reset()
	f.m.ForTurn(tools.TurnInfo{}, nil).Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{Name: "echo", Arguments: `{"q":"x","api_key": "k-777", "auth":{"Token":"t-\"888"`}})
	r = f.rec.Records()[0]
	if r.Status != audit.StatusBadArgs || strings.Contains(r.Arguments, "777") || strings.Contains(r.Arguments, "888") || !strings.Contains(r.Arguments, `"q":"x"`) {
		t.Fatalf("malformed arguments audited as %s %q", r.Status, r.Arguments)
	}
}

func TestTruncation(t *testing.T) {
	f := newFixture(t, tools.ManagerOptions{ResultMaxChars: 100}, nil)
	turn := f.m.ForTurn(tools.TurnInfo{}, nil)

	out := turn.Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{Name: "big"}})
	if want := strings.Repeat("é", 100) + "… [truncated 29900 chars]"; out.Content != want {
		t.Fatalf("content to the model is %d chars: %.60q…", len([]rune(out.Content)), out.Content)
	}
	r := f.rec.Records()[0]
	if want := strings.Repeat("é", tools.AuditMaxChars) + "… [truncated 10000 chars]"; r.Result != want || r.ResultSize != 30000 {
		t.Fatalf("audited result %d chars, size %d", len([]rune(r.Result)), r.ResultSize)
	}

	f.rec.Reset()
	long := `{"text":"` + strings.Repeat("a", 25000) + `"}`
	turn.Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{Name: "noop", Arguments: long}})
	r = f.rec.Records()[0]
	if want := long[:tools.AuditMaxChars] + "… [truncated 5011 chars]"; r.Arguments != want || r.ArgumentsSize != len(long) {
		t.Fatalf("audited arguments %d chars (size %d): …%q", len(r.Arguments), r.ArgumentsSize, r.Arguments[len(r.Arguments)-40:])
	}

	// Error text going back to the model is capped too.
	f.mcp.add("loud", func(context.Context, tools.Invocation) (tools.Result, error) {
		return tools.Result{}, errors.New(strings.Repeat("x", 300))
	})
	out = f.m.ForTurn(tools.TurnInfo{}, nil).Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{Name: "loud"}})
	if want := "err: " + strings.Repeat("x", 95) + "… [truncated 205 chars]"; out.Status != audit.StatusError || out.Content != want {
		t.Fatalf("error content %s %q", out.Status, out.Content)
	}

	// The default cap is 20,000 characters.
	d := newFixture(t, tools.ManagerOptions{}, nil)
	out = d.m.ForTurn(tools.TurnInfo{}, nil).Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{Name: "big"}})
	if want := strings.Repeat("é", 20000) + "… [truncated 10000 chars]"; out.Content != want {
		t.Fatalf("default cap: %d chars", len([]rune(out.Content)))
	}
}

func TestFiles(t *testing.T) {
	f := newFixture(t, tools.ManagerOptions{ResultMaxChars: 5}, nil)
	turn := f.m.ForTurn(tools.TurnInfo{}, nil)
	tests := []struct {
		tool    string
		content string
		files   int
	}{
		{"chart", "Chart… [truncated 7 chars]\n[1 image attached to the reply: chart.png]", 1},
		{"export", "[2 files attached to the reply: data.csv, chart.png]", 2},
	}
	for _, tc := range tests {
		out := turn.Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{Name: tc.tool}})
		if out.Content != tc.content || len(out.Files) != tc.files {
			t.Fatalf("%s: content %q, %d files", tc.tool, out.Content, len(out.Files))
		}
	}
	if got := turn.Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{Name: "chart"}}).Files[0]; got.Name != "chart.png" || string(got.Data) != "\x89PNG" {
		t.Fatalf("file %+v", got)
	}
}

// TestFilesOverTheCapsAreLeftOutAndSaidSo: a tool cannot flood the reply with files; what is
// left out is named to the model, to the user and in the audit row.
func TestFilesOverTheCapsAreLeftOutAndSaidSo(t *testing.T) {
	f := newFixture(t, tools.ManagerOptions{MaxFileBytes: 10, MaxFilesPerTurn: 2}, nil)
	f.mcp.add("many", func(context.Context, tools.Invocation) (tools.Result, error) {
		return tools.Result{Text: "ok", Files: []chat.File{{Name: "a.txt", Data: []byte("a")}, {Name: "b.txt", Data: []byte("b")}, {Name: "c.txt", Data: []byte("c")}}}, nil
	})
	f.mcp.add("huge", func(context.Context, tools.Invocation) (tools.Result, error) {
		return tools.Result{Text: "ok", Files: []chat.File{{Name: "big.bin", Data: make([]byte, 11)}}}, nil
	})
	tests := []struct {
		tool     string
		kept     int
		leftOut  string
		contains string
	}{
		{"huge", 0, "1 file from huge left out: big.bin (11 bytes; at most 10 bytes a file).", "[1 file from huge left out"},
		{"many", 2, "1 file from many left out: c.txt (at most 2 files an answer).", "[2 files attached to the reply: a.txt, b.txt]"},
		{"many", 0, "3 files from many left out: a.txt (at most 2 files an answer), b.txt (at most 2 files an answer), c.txt (at most 2 files an answer).", "They do not reach the user."},
	}
	turn := f.m.ForTurn(tools.TurnInfo{}, nil)
	for i, tc := range tests {
		f.rec.Reset()
		out := turn.Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{ID: fmt.Sprint(i), Name: tc.tool}})
		if len(out.Files) != tc.kept || out.FilesLeftOut != tc.leftOut {
			t.Errorf("call %d (%s): %d files kept, left out %q; want %d and %q", i, tc.tool, len(out.Files), out.FilesLeftOut, tc.kept, tc.leftOut)
		}
		if !strings.Contains(out.Content, tc.contains) {
			t.Errorf("call %d (%s): the model is told %q, want it to contain %q", i, tc.tool, out.Content, tc.contains)
		}
		if r := f.rec.Records()[0]; !strings.Contains(r.Result, "left out") {
			t.Errorf("call %d (%s): audited result %q does not say what was left out", i, tc.tool, r.Result)
		}
	}
}

// failingRecorder fails every call, as a database that is down would.
type failingRecorder struct{}

func (failingRecorder) Start(context.Context, *audit.Record) error {
	return errors.New("database is locked")
}
func (failingRecorder) Finish(context.Context, *audit.Record) error {
	return errors.New("database is locked")
}

func TestRecorderFailureKeepsTheCall(t *testing.T) {
	var logs logBuffer
	plug, err := plugin.NewLoader([]string{"manager_test"}, plugin.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := tools.NewManager([]tools.Loader{plug}, failingRecorder{}, tools.ManagerOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	out := m.ForTurn(tools.TurnInfo{}, nil).Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{ID: "c1", Name: "echo", Arguments: `{"a":1}`}})
	if out.Status != audit.StatusOK || out.Content != `{"a":1}` {
		t.Fatalf("got %s %q", out.Status, out.Content)
	}
	for _, w := range []string{"audit record not started", "audit record not finished", "database is locked", "tool_call_id=c1"} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("logs lack %q:\n%s", w, logs.String())
		}
	}
}

func TestNewManagerErrors(t *testing.T) {
	rec := toolstest.NewRecorder()
	tests := []struct {
		name    string
		loaders []tools.Loader
		rec     tools.Recorder
		want    string
	}{
		{"no recorder", nil, nil, "a Recorder is required"},
		{"nil loader", []tools.Loader{nil}, rec, "loader 0 is nil"},
		{"unknown source", []tools.Loader{newStub("lua", "")}, rec, `unknown source "lua"`},
	}
	for _, tc := range tests {
		if _, err := tools.NewManager(tc.loaders, tc.rec, tools.ManagerOptions{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestConcurrentExecute(t *testing.T) {
	f := newFixture(t, tools.ManagerOptions{}, nil)
	turn := f.m.ForTurn(tools.TurnInfo{}, nil)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			turn.Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{ID: fmt.Sprint(i), Name: "echo"}})
		})
	}
	wg.Wait()
	if n := len(f.rec.Records()); n != 20 {
		t.Fatalf("%d records, want 20", n)
	}
}

// BenchmarkManagerCall measures the Manager's overhead per call: ForTurn (listing every loader)
// and Execute (parse, dispatch, redaction, two recorder calls) around a tool that does nothing.
func BenchmarkManagerCall(b *testing.B) {
	f := newFixture(b, tools.ManagerOptions{}, nil)
	call := tools.Call{ToolCall: chat.ToolCall{ID: "call_1", Name: "noop", Arguments: `{"q":"x"}`}, Round: 1}
	info := tools.TurnInfo{TurnID: 1, ConversationID: 1, Platform: "telegram", ChatID: "1", UserID: "1"}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if out := f.m.ForTurn(info, nil).Execute(ctx, call); out.Status != audit.StatusOK {
			b.Fatal(out.Content)
		}
		if i++; i%1024 == 0 {
			f.rec.Reset() // keep memory flat; amortised cost is negligible
		}
	}
}

// BenchmarkExecute is Execute alone, in a turn that is already listed.
func BenchmarkExecute(b *testing.B) {
	f := newFixture(b, tools.ManagerOptions{}, nil)
	call := tools.Call{ToolCall: chat.ToolCall{ID: "call_1", Name: "noop", Arguments: `{"q":"x"}`}, Round: 1}
	turn := f.m.ForTurn(tools.TurnInfo{TurnID: 1}, nil)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		turn.Execute(ctx, call)
		if i++; i%1024 == 0 {
			f.rec.Reset()
		}
	}
}

// Secrets written as plain text in a tool's error or result (a header, a URL, a key=value pair)
// are redacted in the audit record; the model still gets the tool's real output.
func TestRedactionOfPlainTextSecrets(t *testing.T) {
	f := newFixture(t, tools.ManagerOptions{}, nil)
	f.mcp.add("leaky_err", func(context.Context, tools.Invocation) (tools.Result, error) {
		return tools.Result{}, errors.New(`Get "https://api.test/v1?lang=en&api_key=K-111": 401 (sent Authorization: Bearer T-222, password=P-333)`)
	})
	f.m.ForTurn(tools.TurnInfo{}, nil).Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{Name: "leaky_err"}})
	want := `Get "https://api.test/v1?lang=en&api_key=[redacted]": 401 (sent Authorization: Bearer [redacted], password=[redacted])`
	if r := f.rec.Records()[0]; r.Error != want {
		t.Fatalf("audited error\n%q\nwant\n%q", r.Error, want)
	}

	f.rec.Reset()
	text := "fetched https://x.test/feed?token=S-444 ok; the token expired yesterday"
	out := f.m.ForTurn(tools.TurnInfo{}, nil).Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{Name: "echo", Arguments: `{"text":"` + text + `"}`}})
	if !strings.Contains(out.Content, "S-444") {
		t.Fatalf("the model must get the real result: %q", out.Content)
	}
	r := f.rec.Records()[0]
	if strings.Contains(r.Result, "S-444") || strings.Contains(r.Arguments, "S-444") || !strings.Contains(r.Result, "the token expired yesterday") {
		t.Fatalf("audited result %q, arguments %q", r.Result, r.Arguments)
	}
}
