package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/tools/toolstest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"relaybot/internal/testkit/logbuf"
	testmcp "relaybot/internal/testkit/mcp"
	"relaybot/internal/testkit/wait"
	"relaybot/tools"
	"relaybot/tools/mcp"
)

var stdioServer string // the built test server binary, "" when the build failed

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcptest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin, err := testmcp.BuildStdioServer(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	stdioServer = bin
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func startLoader(t *testing.T, cfgs ...mcp.ServerConfig) *mcp.Loader {
	t.Helper()
	return startLoaderOpts(t, []mcp.Option{mcp.WithBackoff(20*time.Millisecond, 200*time.Millisecond)}, cfgs...)
}

func startLoaderOpts(t *testing.T, opts []mcp.Option, cfgs ...mcp.ServerConfig) *mcp.Loader {
	t.Helper()
	l := mcp.NewLoader(cfgs, quietLogger(), opts...)
	l.Start(context.Background())
	t.Cleanup(l.Close)
	return l
}

func health(l *mcp.Loader, name string) tools.ServerHealth {
	for _, h := range l.Health() {
		if h.Name == name {
			return h
		}
	}
	return tools.ServerHealth{}
}

func waitUp(t *testing.T, l *mcp.Loader, name string) {
	t.Helper()
	wait.For(t, name+" up", func() bool { return health(l, name).State == tools.ServerUp })
}

func call(l *mcp.Loader, name string, args any) (tools.Result, error) {
	b, _ := json.Marshal(args)
	return l.Call(context.Background(), tools.Invocation{Name: name, Arguments: b})
}

func toolNames(l *mcp.Loader) []string {
	var names []string
	for _, s := range l.Tools(context.Background()) {
		names = append(names, s.Name)
	}
	return names
}

// transports serves a fresh Kit on each transport.
// serve serves k over the transport named tr.
func serve(t *testing.T, tr string, k *testmcp.Kit) mcp.ServerConfig {
	t.Helper()
	for _, c := range transports {
		if c.name == tr {
			return c.serve(t, k, 0)
		}
	}
	t.Fatalf("no transport %q", tr)
	return mcp.ServerConfig{}
}

// serveLegacy serves k as a server of protocol 2025-11-25 over tr: one that refuses
// server/discover, so the session is of the initialize handshake.
func serveLegacy(t *testing.T, tr string, k *testmcp.Kit) mcp.ServerConfig {
	t.Helper()
	k.Legacy()
	cfg := serve(t, tr, k)
	if tr == "stdio" {
		cfg.Args = append(cfg.Args, "-legacy")
	}
	return cfg
}

var transports = []struct {
	name  string
	serve func(t *testing.T, k *testmcp.Kit, timeout time.Duration) mcp.ServerConfig
}{
	{"inprocess", func(t *testing.T, k *testmcp.Kit, timeout time.Duration) mcp.ServerConfig {
		return mcp.InProcess("srv", k.Server, timeout)
	}},
	{"stdio", func(t *testing.T, k *testmcp.Kit, timeout time.Duration) mcp.ServerConfig {
		return mcp.ServerConfig{Name: "srv", Transport: "stdio", Command: stdioServer, ToolCallTimeout: timeout}
	}},
	{"http", func(t *testing.T, k *testmcp.Kit, timeout time.Duration) mcp.ServerConfig {
		return mcp.ServerConfig{Name: "srv", Transport: "http", Local: true, URL: testmcp.StartHTTP(t, k).URL, ToolCallTimeout: timeout}
	}},
	{"sse", func(t *testing.T, k *testmcp.Kit, timeout time.Duration) mcp.ServerConfig {
		return mcp.ServerConfig{Name: "srv", Transport: "sse", Local: true, URL: testmcp.StartSSE(t, k).URL, ToolCallTimeout: timeout}
	}},
}

func TestListAndCall(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			k := testmcp.New("kit")
			l := startLoader(t, tr.serve(t, k, 0))
			waitUp(t, l, "srv")

			var echo *tools.Spec
			for _, s := range l.Tools(context.Background()) {
				if s.Name == "echo" {
					echo = &s
				}
			}
			if echo == nil {
				t.Fatalf("echo not listed; tools: %v", toolNames(l))
			}
			if echo.Server != "srv" || echo.Description != "Echoes its text." || !bytes.Contains(echo.Parameters, []byte(`"text"`)) {
				t.Errorf("echo spec = %+v, parameters %s", *echo, echo.Parameters)
			}
			res, err := call(l, "echo", map[string]string{"text": "héllo"})
			if err != nil || res.Text != "héllo" {
				t.Fatalf("echo = %q, %v; want héllo", res.Text, err)
			}
			res, err = call(l, "image", nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != "a picture" || len(res.Files) != 1 || res.Files[0].MIME != "image/png" ||
				!bytes.Equal(res.Files[0].Data, testmcp.PNG) || res.Files[0].Name != "image-2.png" {
				t.Errorf("image result = %q, files %+v", res.Text, res.Files)
			}
			if got := health(l, "srv"); got.Tools != 14 || got.LastError != "" {
				t.Errorf("health = %+v", got)
			}
		})
	}
}

func TestResults(t *testing.T) {
	k := testmcp.New("kit")
	l := startLoader(t, mcp.InProcess("srv", k.Server, 0))
	waitUp(t, l, "srv")

	_, err := call(l, "fail", map[string]string{"message": "disk full"})
	if err == nil || err.Error() != "disk full" {
		t.Errorf("isError result: err = %v, want disk full", err)
	}
	_, err = call(l, "fail", nil)
	if err == nil || err.Error() != "Unknown error from MCP tool" {
		t.Errorf("isError result without text: err = %v", err)
	}
	res, err := call(l, "resource", map[string]int{"size": 100})
	if err != nil || !strings.HasSuffix(res.Text, strings.Repeat("a", 100)) || !strings.Contains(res.Text, "file:///doc.txt") {
		t.Errorf("small resource = %q, %v", res.Text, err)
	}
	res, err = call(l, "resource", map[string]int{"size": 100000})
	if err != nil {
		t.Fatal(err)
	}
	// The loader passes the resource on whole: tools.Manager caps what goes to the model, once.
	if strings.Count(res.Text, "a") < 100000 || strings.Contains(res.Text, "truncated") {
		t.Errorf("large resource cut by the loader: %d bytes, tail %q", len(res.Text), res.Text[len(res.Text)-40:])
	}
	_, err = call(l, "nope", nil)
	if !errors.Is(err, tools.ErrNotFound) {
		t.Errorf("unknown tool: err = %v, want ErrNotFound", err)
	}
	if _, err := l.Call(context.Background(), tools.Invocation{Name: "echo", Arguments: json.RawMessage(`[1]`)}); err == nil {
		t.Error("array arguments accepted")
	}
}

func TestToolCallTimeout(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			k := testmcp.New("kit")
			l := startLoader(t, tr.serve(t, k, time.Second))
			waitUp(t, l, "srv")

			_, err := call(l, "sleep", map[string]float64{"seconds": 30})
			if !errors.Is(err, tools.ErrTimeout) {
				t.Fatalf("err = %v, want ErrTimeout", err)
			}
			if want := "MCP tool 'sleep' on server 'srv' timed out after 1 seconds"; err.Error() != want {
				t.Errorf("err = %q, want %q", err, want)
			}
			res, err := call(l, "echo", map[string]string{"text": "still here"})
			if err != nil || res.Text != "still here" {
				t.Fatalf("call after timeout = %q, %v", res.Text, err)
			}
			// The server learnt that the call was abandoned (the kit in the stdio process counts its own).
			wait.For(t, "the server to see the cancellation", func() bool {
				res, err := call(l, "cancelled", nil)
				return err == nil && res.Text == "1"
			})
			if h := health(l, "srv"); h.State != tools.ServerUp {
				t.Errorf("after a timeout the server is %s", h.State)
			}
		})
	}
}

func TestZeroTimeoutMeansNoDeadline(t *testing.T) {
	k := testmcp.New("kit")
	l := startLoader(t, mcp.InProcess("srv", k.Server, 0))
	waitUp(t, l, "srv")
	res, err := call(l, "sleep", map[string]float64{"seconds": 1.2})
	if err != nil || res.Text != "slept" {
		t.Fatalf("sleep = %q, %v", res.Text, err)
	}
}

func TestSessionEndedReconnectsOnceAndRetriesOnce(t *testing.T) {
	k := testmcp.New("kit")
	k.Legacy() // sessions are of the initialize handshake; 2026-07-28 has none
	srv := testmcp.StartHTTP(t, k)
	l := startLoader(t, mcp.ServerConfig{Name: "srv", Transport: "http", Local: true, URL: srv.URL})
	waitUp(t, l, "srv")
	if _, err := call(l, "echo", map[string]string{"text": "a"}); err != nil {
		t.Fatal(err)
	}

	// Every session ends; five concurrent calls share one reconnect and each is retried once.
	srv.ExpireSessions()
	const n = 5
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			res, err := call(l, "echo", map[string]string{"text": strconv.Itoa(i)})
			if err == nil && res.Text != strconv.Itoa(i) {
				err = fmt.Errorf("got %q", res.Text)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("call %d after the session ended: %v", i, err)
		}
	}
	if got := srv.SessionsStarted(); got != 2 {
		t.Errorf("sessions started = %d, want 2 (one shared reconnect)", got)
	}
	if got := k.Calls("echo"); got != 1+n {
		t.Errorf("echo ran %d times, want %d", got, 1+n)
	}

	// The session ends under the call and again under its retry: one reconnect, one retry, then
	// the error.
	srv.ExpireOnNextCalls(2)
	_, err := call(l, "echo", map[string]string{"text": "b"})
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "session terminated") {
		t.Errorf("twice-ended call: err = %v, want session terminated", err)
	}
	if got := srv.SessionsStarted(); got != 3 {
		t.Errorf("sessions started = %d, want 3 (one more reconnect, not two)", got)
	}
	waitUp(t, l, "srv")
	if res, err := call(l, "echo", map[string]string{"text": "c"}); err != nil || res.Text != "c" {
		t.Errorf("call after the failed retry = %q, %v", res.Text, err)
	}
}

func TestStdioServerRestarted(t *testing.T) {
	l := startLoaderOpts(t, []mcp.Option{mcp.WithBackoff(time.Second, time.Second)},
		mcp.ServerConfig{Name: "srv", Transport: "stdio", Command: stdioServer, ToolCallTimeout: time.Minute})
	waitUp(t, l, "srv")
	res, err := call(l, "pid", nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(res.Text)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the server to be down", func() bool { return health(l, "srv").State == tools.ServerDown })

	_, err = call(l, "echo", map[string]string{"text": "x"})
	if !errors.Is(err, mcp.ErrUnavailable) {
		t.Errorf("call while down: err = %v, want ErrUnavailable", err)
	}
	h := health(l, "srv")
	if h.State != tools.ServerDown {
		t.Errorf("the call waited for the restart instead of failing at once (state %s)", h.State)
	}
	if !strings.Contains(h.LastError, "killed") {
		t.Errorf("LastError = %q, want the process's end", h.LastError)
	}
	if len(l.Tools(context.Background())) != 0 {
		t.Errorf("tools offered while down: %v", toolNames(l))
	}
	waitUp(t, l, "srv")
	if !slices.Contains(toolNames(l), "echo") {
		t.Errorf("tools after restart: %v", toolNames(l))
	}
	res, err = call(l, "pid", nil)
	if err != nil || res.Text == strconv.Itoa(pid) {
		t.Errorf("pid after restart = %q, %v (was %d)", res.Text, err, pid)
	}
}

// A turn started while a server is down (its process killed; no restart within the test) was
// not offered the server's tools; the model's call of one is answered that the server is down,
// and its audit row names the server, instead of "Tool not found".
func TestACallToAToolOfADownServerSaysItIsDown(t *testing.T) {
	l := startLoaderOpts(t, []mcp.Option{mcp.WithBackoff(time.Hour, time.Hour)},
		mcp.ServerConfig{Name: "srv", Transport: "stdio", Command: stdioServer, ToolCallTimeout: time.Minute})
	waitUp(t, l, "srv")
	res, err := call(l, "pid", nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(res.Text)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the server to be down", func() bool { return health(l, "srv").State == tools.ServerDown })
	rec := toolstest.NewRecorder()
	m, err := tools.NewManager([]tools.Loader{l}, rec, tools.ManagerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := m.ForTurn(tools.TurnInfo{}, nil).Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{ID: "c", Name: "echo", Arguments: `{"text":"x"}`}})
	if out.Status != audit.StatusUnavailable || !strings.Contains(out.Content, "MCP server 'srv' is down") {
		t.Errorf("a new turn's call while the server is down answered %q (%s), want that srv is down", out.Content, out.Status)
	}
	if r := rec.Records()[0]; r.Server != "srv" || r.Source != audit.SourceMCP || r.Status != audit.StatusUnavailable {
		t.Errorf("audit row %+v; want the call of server srv, unavailable", r)
	}
}

func TestRemoteFallback(t *testing.T) {
	for _, tc := range []struct {
		status   int
		fallback bool
	}{
		{400, true}, {404, true}, {405, true}, {401, false}, {500, false},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			k := testmcp.New("kit")
			srv := testmcp.StartSSEOnly(t, k, tc.status)
			l := startLoaderOpts(t, []mcp.Option{mcp.WithBackoff(time.Minute, time.Minute)},
				mcp.ServerConfig{Name: "srv", Transport: "http", Local: true, URL: srv.URL})
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := l.WaitStarted(ctx); err != nil {
				t.Fatal(err)
			}
			h := health(l, "srv")
			if !tc.fallback {
				if h.State != tools.ServerDown || !strings.Contains(h.LastError, strconv.Itoa(tc.status)) {
					t.Errorf("health = %+v, want down naming %d", h, tc.status)
				}
				if srv.Streams() != 0 {
					t.Errorf("fell back to SSE on %d", tc.status)
				}
				return
			}
			if h.State != tools.ServerUp || h.Transport != "http→sse" {
				t.Fatalf("health = %+v, want up over SSE", h)
			}
			if res, err := call(l, "echo", map[string]string{"text": "via sse"}); err != nil || res.Text != "via sse" {
				t.Errorf("echo = %q, %v", res.Text, err)
			}
		})
	}
}

func TestToolsListChanged(t *testing.T) {
	for _, tr := range transports {
		if tr.name == "stdio" {
			continue // the stdio server's tools are fixed
		}
		t.Run(tr.name, func(t *testing.T) {
			k := testmcp.New("kit")
			l := startLoader(t, tr.serve(t, k, 0))
			waitUp(t, l, "srv")
			k.AddEchoTool("shout")
			wait.For(t, "shout to be listed", func() bool { return slices.Contains(toolNames(l), "shout") })
			if res, err := call(l, "shout", map[string]string{"text": "HI"}); err != nil || res.Text != "HI" {
				t.Errorf("shout = %q, %v", res.Text, err)
			}
		})
	}
}

func TestBrokenServersDoNotStopOthers(t *testing.T) {
	k := testmcp.New("kit")
	var logs logbuf.Buffer
	l := mcp.NewLoader([]mcp.ServerConfig{
		{Name: "missing", Transport: "stdio", Command: "/nonexistent/mcp-server"},
		{Name: "secret", Transport: "http", Local: true, URL: "http://user:pa55@127.0.0.1:1/mcp?api_key=hunter2"},
		{Name: "bad", Transport: "carrier-pigeon"},
		mcp.InProcess("good", k.Server, 0),
	}, slog.New(slog.NewTextHandler(&logs, nil)), mcp.WithBackoff(20*time.Millisecond, 200*time.Millisecond))
	l.Start(context.Background())
	t.Cleanup(func() {
		l.Close()
		if strings.Contains(logs.String(), "hunter2") || strings.Contains(logs.String(), "pa55") {
			t.Errorf("logs leak the URL's secrets:\n%s", logs.String())
		}
		if !strings.Contains(logs.String(), "api_key=REDACTED") {
			t.Errorf("logs do not name the unreachable server's URL:\n%s", logs.String())
		}
	})
	waitUp(t, l, "good")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := l.WaitStarted(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"missing", "secret", "bad"} {
		h := health(l, name)
		if h.State == tools.ServerUp || h.LastError == "" {
			t.Errorf("%s: health = %+v, want down with an error", name, h)
		}
		if strings.Contains(h.LastError, "hunter2") || strings.Contains(h.LastError, "pa55") {
			t.Errorf("%s: LastError leaks the URL's secret: %q", name, h.LastError)
		}
	}
	if res, err := call(l, "echo", map[string]string{"text": "ok"}); err != nil || res.Text != "ok" {
		t.Errorf("echo on the good server = %q, %v", res.Text, err)
	}
}

func TestCollidingNamesFirstServerWins(t *testing.T) {
	a, b := testmcp.New("a"), testmcp.New("b")
	l := startLoader(t, mcp.InProcess("a", a.Server, 0), mcp.InProcess("b", b.Server, 0))
	waitUp(t, l, "a")
	waitUp(t, l, "b")
	specs := l.Tools(context.Background())
	if len(specs) != 14 {
		t.Errorf("%d tools listed, want 14 (no duplicates)", len(specs))
	}
	if _, err := call(l, "echo", map[string]string{"text": "x"}); err != nil {
		t.Fatal(err)
	}
	if a.Calls("echo") != 1 || b.Calls("echo") != 0 {
		t.Errorf("echo ran on a %d, b %d times; want the first server", a.Calls("echo"), b.Calls("echo"))
	}
}

// TestACallRunsOnlyOnTheServerWhoseToolWasJudged: two servers offer "echo"; the turn offered
// (and its policy judged) the stdio server's, which dies before the call. The call fails naming
// that server instead of running on the other one.
func TestACallRunsOnlyOnTheServerWhoseToolWasJudged(t *testing.T) {
	other := testmcp.New("other")
	l := startLoaderOpts(t, []mcp.Option{mcp.WithBackoff(time.Minute, time.Minute)},
		mcp.ServerConfig{Name: "judged", Transport: "stdio", Command: stdioServer, ToolCallTimeout: time.Minute},
		mcp.InProcess("other", other.Server, 0))
	waitUp(t, l, "judged")
	waitUp(t, l, "other")
	var judged string
	for _, s := range l.Tools(context.Background()) {
		if s.Name == "echo" {
			judged = s.Server
		}
	}
	if judged != "judged" {
		t.Fatalf("echo is offered by %q, want the first server", judged)
	}
	res, err := call(l, "pid", nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(res.Text)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the judged server to be down", func() bool { return health(l, "judged").State == tools.ServerDown })

	b, _ := json.Marshal(map[string]string{"text": "x"})
	_, err = l.Call(context.Background(), tools.Invocation{Name: "echo", Arguments: b, Server: judged})
	if err == nil || !strings.Contains(err.Error(), "judged") {
		t.Errorf("call = %v, want an error naming server judged", err)
	}
	if n := other.Calls("echo"); n != 0 {
		t.Errorf("echo ran %d times on the server nobody judged", n)
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	k := testmcp.New("kit")
	l := mcp.NewLoader([]mcp.ServerConfig{
		mcp.InProcess("inproc", k.Server, time.Second),
		{Name: "stdio", Transport: "stdio", Command: stdioServer, ToolCallTimeout: time.Second},
	}, quietLogger())
	l.Start(context.Background())
	waitUp(t, l, "inproc")
	waitUp(t, l, "stdio")
	if _, err := call(l, "echo", map[string]string{"text": "x"}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if h := health(l, "stdio"); h.State != tools.ServerDown {
		t.Errorf("after Close: %+v", h)
	}
	wait.For(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

func TestUnreachableRemoteGoesDown(t *testing.T) {
	k := testmcp.New("kit")
	srv := testmcp.StartHTTP(t, k)
	l := startLoaderOpts(t, []mcp.Option{mcp.WithBackoff(time.Minute, time.Minute)},
		mcp.ServerConfig{Name: "srv", Transport: "http", Local: true, URL: srv.URL})
	waitUp(t, l, "srv")
	srv.Close()
	_, err := call(l, "echo", map[string]string{"text": "x"})
	if !errors.Is(err, mcp.ErrUnavailable) {
		t.Errorf("call to a closed server: err = %v, want ErrUnavailable", err)
	}
	wait.For(t, "the server to be down", func() bool { return health(l, "srv").State == tools.ServerDown })
	if len(l.Tools(context.Background())) != 0 {
		t.Errorf("tools of an unreachable server offered: %v", toolNames(l))
	}
}

func TestConnectTimeout(t *testing.T) {
	hang := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-hang:
		}
	}))
	t.Cleanup(func() { close(hang); ts.Close() })
	l := startLoaderOpts(t, []mcp.Option{mcp.WithBackoff(time.Minute, time.Minute)},
		mcp.ServerConfig{Name: "srv", Transport: "http", Local: true, URL: ts.URL, ConnectTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := l.WaitStarted(ctx); err != nil {
		t.Fatal(err)
	}
	if h := health(l, "srv"); h.State != tools.ServerDown || !strings.Contains(h.LastError, "connect timeout") {
		t.Errorf("health = %+v, want down after the connect timeout", h)
	}
}

func TestStdioEnvironment(t *testing.T) {
	t.Setenv("RELAYBOT_TEST_TOKEN", "bot-secret")
	l := startLoader(t, mcp.ServerConfig{Name: "srv", Transport: "stdio", Command: stdioServer,
		Env: map[string]string{"MCP_API_KEY": "for-the-server"}})
	waitUp(t, l, "srv")
	for name, want := range map[string]string{
		"RELAYBOT_TEST_TOKEN": "", // the bot's environment stays out
		"MCP_API_KEY":         "for-the-server",
		"PATH":                os.Getenv("PATH"),
	} {
		res, err := call(l, "env", map[string]string{"name": name})
		if err != nil || res.Text != want {
			t.Errorf("server's %s = %q, %v; want %q", name, res.Text, err, want)
		}
	}
}

// With a tool_prefix, two servers' same-named tools are both offered; the server is called with
// its own name, and the audit row keeps both names.
func TestToolPrefixOffersBothServersTools(t *testing.T) {
	a, b := testmcp.New("a"), testmcp.New("b")
	cb := mcp.InProcess("b", b.Server, 0)
	cb.ToolPrefix = "{server}__"
	l := startLoader(t, mcp.InProcess("a", a.Server, 0), cb)
	waitUp(t, l, "a")
	waitUp(t, l, "b")
	names := toolNames(l)
	if !slices.Contains(names, "echo") || !slices.Contains(names, "b__echo") || len(names) != 28 {
		t.Fatalf("tools = %v, want a's 14 and b's 14 as b__*", names)
	}
	rec := toolstest.NewRecorder()
	m, err := tools.NewManager([]tools.Loader{l}, rec, tools.ManagerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := m.ForTurn(tools.TurnInfo{}, nil).Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{ID: "c", Name: "b__echo", Arguments: `{"text":"hi"}`}})
	if out.Status != audit.StatusOK || out.Content != "hi" || b.Calls("echo") != 1 || a.Calls("echo") != 0 {
		t.Fatalf("b__echo: %s %q; a ran echo %d times, b %d; want b once", out.Status, out.Content, a.Calls("echo"), b.Calls("echo"))
	}
	if r := rec.Records()[0]; r.ToolName != "b__echo" || r.ServerTool != "echo" || r.Server != "b" {
		t.Fatalf("audit row names %q (server %q, server's name %q), want b__echo, b, echo", r.ToolName, r.Server, r.ServerTool)
	}
}

// memory is a ToolMemory in memory, standing for the store every replica shares.
type memory struct {
	mu    sync.Mutex
	names map[string][]string
}

func (m *memory) RememberedTools(_ context.Context, server string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.names[server], nil
}

func (m *memory) RememberTools(_ context.Context, server string, names []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.names == nil {
		m.names = map[string][]string{}
	}
	m.names[server] = names
	return nil
}

// A server's tool names are remembered when it connects; a later loader (another replica, a
// restart) whose server cannot connect tells a call to one of them why it is unavailable and
// names the server, though it never listed them itself; before that, with nothing remembered,
// the name is unknown and the server is named among those whose tools are not known.
func TestAServersRememberedToolsAreToldUnavailableBeforeItConnects(t *testing.T) {
	mem := &memory{}
	l := startLoaderOpts(t, []mcp.Option{mcp.WithToolMemory(mem)},
		mcp.ServerConfig{Name: "srv", Transport: "stdio", Command: stdioServer, ToolCallTimeout: time.Minute})
	waitUp(t, l, "srv")
	wait.For(t, "the tool names remembered", func() bool {
		names, _ := mem.RememberedTools(context.Background(), "srv")
		return slices.Contains(names, "echo")
	})
	down := mcp.ServerConfig{Name: "srv", Transport: "stdio", Command: "/nonexistent/mcp-server"}
	fresh := startLoaderOpts(t, []mcp.Option{mcp.WithBackoff(time.Hour, time.Hour)}, down)
	wait.For(t, "the server without memory down", func() bool { return health(fresh, "srv").State == tools.ServerDown })
	if server, why := fresh.Unavailable("echo"); why != nil || server != "" {
		t.Errorf("with nothing remembered echo was told unavailable at %q (%v); want it unknown", server, why)
	}
	if got := fresh.UnknownServers(); !slices.Equal(got, []string{"srv (down)"}) {
		t.Errorf("servers with unknown tools %q; want srv, down", got)
	}
	recalled := startLoaderOpts(t, []mcp.Option{mcp.WithBackoff(time.Hour, time.Hour), mcp.WithToolMemory(mem)}, down)
	wait.For(t, "the server with memory down", func() bool { return health(recalled, "srv").State == tools.ServerDown })
	if server, why := recalled.Unavailable("echo"); server != "srv" || !errors.Is(why, tools.ErrUnavailable) {
		t.Errorf("a remembered tool was told unavailable at %q (%v); want srv, unavailable", server, why)
	}
	if got := recalled.UnknownServers(); len(got) != 0 {
		t.Errorf("servers with unknown tools %q; want none (srv's are remembered)", got)
	}
}
