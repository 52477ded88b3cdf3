package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/store"
	"relaybot/store/storetest"
	"relaybot/tools"
)

const testToken = "test-admin-token-0123456789"

// seeded is what seedStore wrote.
type seeded struct {
	calls  []audit.Record // in insertion order (oldest first)
	turnID int64
	base   time.Time
}

// storeOf is the admin server's part of db, as cmd/bot hands it over.
func storeOf(db *store.Database) Store {
	return Store{ToolCalls: db.ToolCalls, Turns: db.Turns, Messages: db.Messages, Timelines: db.Timelines,
		Usage: db.Usage, Consents: db.Consents, Health: db, Transcripts: db.Transcripts}
}

// seedStore writes one turn with messages and a set of tool calls through the store's write API.
func seedStore(t *testing.T, st *store.Database) seeded {
	t.Helper()
	ctx := context.Background()
	conv, err := st.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "100"})
	if err != nil {
		t.Fatalf("conversation: %v", err)
	}
	turnID, err := st.Turns.StartTurn(ctx, store.TurnStart{ConversationID: conv.ID, UserID: "u1", UserName: "alice",
		UserMessage: chat.Message{Role: store.RoleUser, Content: "what is the weather in Paris?"}})
	if err != nil {
		t.Fatalf("start turn: %v", err)
	}
	base := time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Second)
	specs := []struct {
		tool       string
		source     audit.Source
		server     string
		status     audit.Status
		chat, user string
		errText    string
		durMS      int
	}{
		{"weather", "mcp", "wx", audit.StatusOK, "100", "u1", "", 120},
		{"weather", "mcp", "wx", audit.StatusError, "100", "u1", "upstream 502", 900},
		{"fetch_url", "native", "", audit.StatusOK, "100", "u1", "", 300},
		{"fetch_url", "native", "", audit.StatusTimeout, "200", "u2", "deadline exceeded", 5000},
		{"current_time", "native", "", audit.StatusOK, "200", "u2", "", 2},
		{"search", "mcp", "web", audit.StatusError, "300", "u3", "rate limited", 40},
		{"no_such_tool", "", "", audit.StatusNotFound, "300", "u3", "tool not found", 0},
	}
	var out seeded
	out.turnID, out.base = turnID, base
	for i, sp := range specs {
		started := base.Add(time.Duration(i) * time.Minute)
		rec := audit.Record{TurnID: turnID, ConversationID: conv.ID, Platform: "telegram", ChatID: sp.chat,
			UserID: sp.user, Round: 1, ToolCallID: fmt.Sprintf("call_%d", i), ToolName: sp.tool, Source: sp.source,
			Server: sp.server, Arguments: fmt.Sprintf(`{"city":"Paris","n":%d}`, i), StartedAt: started}
		if err := st.ToolCalls.StartToolCall(ctx, &rec); err != nil {
			t.Fatalf("start call %d: %v", i, err)
		}
		rec.Status, rec.Error = sp.status, sp.errText
		if sp.status == audit.StatusOK {
			rec.Result = fmt.Sprintf(`{"ok":true,"i":%d}`, i)
		}
		rec.Duration = time.Duration(sp.durMS) * time.Millisecond
		rec.FinishedAt = started.Add(rec.Duration)
		if i == 1 { // the tool talked while it ran
			rec.Progress = "reading station 3"
			rec.Elicitation = `[{"message":"Which station?","mode":"form","action":"accept","answer":"{\"station\":3}","by":"alice","at":"2026-01-01T00:00:00Z"}]`
		}
		if err := st.ToolCalls.FinishToolCall(ctx, &rec); err != nil {
			t.Fatalf("finish call %d: %v", i, err)
		}
		out.calls = append(out.calls, rec)
	}
	err = st.Turns.FinishTurn(ctx, store.TurnEnd{TurnID: turnID, Status: store.TurnOK, Model: "test-model", Rounds: 2,
		Messages: []chat.Message{
			{Role: store.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "call_0", Name: "weather", Arguments: `{"city":"Paris","n":0}`}}},
			{Role: store.RoleTool, Name: "weather", ToolCallID: "call_0", Content: `{"ok":true,"i":0}`},
			{Role: store.RoleAssistant, Content: "It is sunny in Paris."},
		}})
	if err != nil {
		t.Fatalf("finish turn: %v", err)
	}
	return out
}

func newTestServer(t *testing.T, st *store.Database, token string, mutate ...func(*Options)) (*Server, *httptest.Server) {
	t.Helper()
	opts := Options{Listen: "127.0.0.1:0", Token: token, Store: storeOf(st), Logger: slog.New(slog.NewTextHandler(tWriter{t}, nil))}
	for _, m := range mutate {
		m(&opts)
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return srv, ts
}

func getJSON(t *testing.T, ts *httptest.Server, path, token string, into any) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if into != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, into); err != nil {
			t.Fatalf("GET %s: decode %q: %v", path, body, err)
		}
	}
	return resp.StatusCode
}

type page struct {
	Items []audit.Record `json:"items"`
	Next  string         `json:"next"`
}

func names(items []audit.Record) []string {
	var out []string
	for _, it := range items {
		out = append(out, fmt.Sprintf("%s/%s", it.ToolName, it.Status))
	}
	return out
}

func TestAPIToolCallsFilters(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seed := seedStore(t, st)
	_, ts := newTestServer(t, st, testToken)

	tests := []struct {
		name  string
		query url.Values
		want  []string // newest first
	}{
		{"all newest first", nil, []string{"no_such_tool/not_found", "search/error", "current_time/ok", "fetch_url/timeout", "fetch_url/ok", "weather/error", "weather/ok"}},
		{"status", url.Values{"status": {"error"}}, []string{"search/error", "weather/error"}},
		{"tool", url.Values{"tool": {"fetch_url"}}, []string{"fetch_url/timeout", "fetch_url/ok"}},
		{"source", url.Values{"source": {"mcp"}}, []string{"search/error", "weather/error", "weather/ok"}},
		{"server", url.Values{"server": {"wx"}}, []string{"weather/error", "weather/ok"}},
		{"chat", url.Values{"chat": {"200"}}, []string{"current_time/ok", "fetch_url/timeout"}},
		{"user", url.Values{"user": {"u3"}}, []string{"no_such_tool/not_found", "search/error"}},
		{"platform", url.Values{"platform": {"discord"}}, nil},
		{"turn", url.Values{"turn": {fmt.Sprint(seed.turnID)}, "tool": {"weather"}}, []string{"weather/error", "weather/ok"}},
		{"since", url.Values{"since": {seed.base.Add(4 * time.Minute).Format(time.RFC3339)}}, []string{"no_such_tool/not_found", "search/error", "current_time/ok"}},
		{"until", url.Values{"until": {seed.base.Add(2 * time.Minute).Format(time.RFC3339)}}, []string{"weather/error", "weather/ok"}},
		{"since as duration", url.Values{"since": {"1h"}}, nil},
		{"combined", url.Values{"source": {"native"}, "status": {"ok"}}, []string{"current_time/ok", "fetch_url/ok"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p page
			if code := getJSON(t, ts, "/api/v1/tool-calls?"+tc.query.Encode(), testToken, &p); code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
			if got := names(p.Items); !slices.Equal(got, tc.want) {
				t.Errorf("items = %v, want %v", got, tc.want)
			}
			if p.Items == nil {
				t.Errorf("items is null, want a list")
			}
		})
	}
}

func TestAPIToolCallsJSONFields(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seedStore(t, st)
	_, ts := newTestServer(t, st, testToken)
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/api/v1/tool-calls?tool=weather&status=error", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw struct {
		Items []map[string]any `json:"items"`
		Next  *string          `json:"next"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	if raw.Next == nil || len(raw.Items) != 1 {
		t.Fatalf("want one item and a next field, got %+v", raw)
	}
	for _, field := range []string{"id", "turn_id", "conversation_id", "platform", "chat_id", "user_id", "round",
		"tool_call_id", "tool_name", "source", "server", "status", "arguments", "result", "error", "started_at",
		"finished_at", "duration_ms"} {
		if _, ok := raw.Items[0][field]; !ok {
			t.Errorf("audit row lacks field %q", field)
		}
	}
	if got := raw.Items[0]["error"]; got != "upstream 502" {
		t.Errorf("error = %v", got)
	}
	if got := raw.Items[0]["duration_ms"]; got != 900.0 {
		t.Errorf("duration_ms = %v, want 900", got)
	}
	started, _ := raw.Items[0]["started_at"].(string)
	if ts, err := time.Parse(time.RFC3339, started); err != nil || ts.Location() != time.UTC {
		t.Errorf("started_at %q is not RFC 3339 UTC", started)
	}
}

func TestAPIPagination(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seedStore(t, st)
	_, ts := newTestServer(t, st, testToken)
	var all []string
	cursor := ""
	pages := 0
	for {
		q := url.Values{"limit": {"3"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var p page
		if code := getJSON(t, ts, "/api/v1/tool-calls?"+q.Encode(), testToken, &p); code != http.StatusOK {
			t.Fatalf("page %d: status %d", pages, code)
		}
		pages++
		if len(p.Items) > 3 {
			t.Fatalf("page %d has %d items, limit 3", pages, len(p.Items))
		}
		all = append(all, names(p.Items)...)
		if p.Next == "" {
			break
		}
		cursor = p.Next
		if pages > 10 {
			t.Fatal("pagination does not end")
		}
	}
	if pages != 3 {
		t.Errorf("7 rows in pages of 3 took %d pages, want 3", pages)
	}
	want := []string{"no_such_tool/not_found", "search/error", "current_time/ok", "fetch_url/timeout", "fetch_url/ok", "weather/error", "weather/ok"}
	if !slices.Equal(all, want) {
		t.Errorf("paged through %v, want %v", all, want)
	}
}

func TestAPIBadInput(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seedStore(t, st)
	_, ts := newTestServer(t, st, testToken)
	for _, path := range []string{
		"/api/v1/tool-calls?status=exploded",
		"/api/v1/tool-calls?source=elsewhere",
		"/api/v1/tool-calls?since=yesterday",
		"/api/v1/tool-calls?limit=0",
		"/api/v1/tool-calls?limit=100000",
		"/api/v1/tool-calls?turn=abc",
		"/api/v1/tool-calls?cursor=not-a-cursor",
		"/api/v1/tool-calls?colour=blue",
		"/api/v1/tool-calls/abc",
	} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]string
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || body["error"] == "" {
			t.Errorf("%s: status %d body %v, want 400 with an error message", path, resp.StatusCode, body)
		}
	}
}

func TestAPIToolCallByID(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seed := seedStore(t, st)
	_, ts := newTestServer(t, st, testToken)
	want := seed.calls[3]
	var row audit.Record
	if code := getJSON(t, ts, fmt.Sprintf("/api/v1/tool-calls/%d", want.ID), testToken, &row); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if row.ID != want.ID || row.ToolName != "fetch_url" || row.Status != "timeout" || row.Arguments != want.Arguments {
		t.Errorf("got %+v, want call %d fetch_url/timeout with %s", row, want.ID, want.Arguments)
	}
	if code := getJSON(t, ts, "/api/v1/tool-calls/999999", testToken, nil); code != http.StatusNotFound {
		t.Errorf("missing id: status %d, want 404", code)
	}
}

// toolStat is one item of GET /api/v1/tool-stats as a client reads it.
type toolStat struct {
	Tool      string  `json:"tool"`
	Source    string  `json:"source"`
	Server    string  `json:"server"`
	Count     int     `json:"count"`
	Errors    int     `json:"errors"`
	ErrorRate float64 `json:"error_rate"`
	P50MS     int64   `json:"p50_ms"`
	P95MS     int64   `json:"p95_ms"`
}

func TestAPIToolStats(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seedStore(t, st)
	_, ts := newTestServer(t, st, testToken)
	var got struct {
		Items []toolStat `json:"items"`
	}
	if code := getJSON(t, ts, "/api/v1/tool-stats", testToken, &got); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	byTool := map[string]toolStat{}
	for _, s := range got.Items {
		byTool[s.Tool] = s
	}
	w := byTool["weather"]
	if w.Count != 2 || w.Errors != 1 || w.ErrorRate != 0.5 || w.P50MS != 120 || w.P95MS != 900 {
		t.Errorf("weather stats = %+v, want 2 calls, 1 error, rate 0.5, p50 120, p95 900", w)
	}
	var filtered struct {
		Items []toolStat `json:"items"`
	}
	getJSON(t, ts, "/api/v1/tool-stats?source=native", testToken, &filtered)
	for _, s := range filtered.Items {
		if s.Source != "native" {
			t.Errorf("source=native returned %+v", s)
		}
	}
}

func TestAPIMCPServers(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	since := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	_, ts := newTestServer(t, st, testToken, func(o *Options) {
		o.MCPHealth = func() []tools.ServerHealth {
			return []tools.ServerHealth{
				{Name: "wx", Transport: "stdio", State: "down", LastError: "process exited: status 1", Since: since},
				{Name: "docs", Transport: "http", ProtocolVersion: "2026-07-28", State: "up", Tools: 4, Since: since},
			}
		}
	})
	var raw map[string][]map[string]any
	if code := getJSON(t, ts, "/api/v1/mcp-servers", testToken, &raw); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if v := raw["items"][0]["protocol_version"]; v != "2026-07-28" {
		t.Errorf("docs' protocol_version = %v, want the negotiated 2026-07-28", v)
	}
	var got struct {
		Items []ServerHealth `json:"items"`
	}
	if code := getJSON(t, ts, "/api/v1/mcp-servers", testToken, &got); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if len(got.Items) != 2 || got.Items[0].Name != "docs" || !got.Items[0].Up() || got.Items[1].Up() || got.Items[1].LastError == "" {
		t.Errorf("servers = %+v, want docs up then wx down with its error", got.Items)
	}
}

func TestAPIRequiresToken(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seedStore(t, st)
	// Each try comes from its own client (through a trusted proxy on loopback), so the wrong
	// tokens are refused for being wrong, not throttled for being many.
	proxies, err := NewProxies([]string{"127.0.0.1"}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, st, testToken, func(o *Options) { o.Proxies = proxies })
	n := 0
	for _, path := range []string{"/api/v1/tool-calls", "/api/v1/tool-calls/1", "/api/v1/tool-stats", "/api/v1/mcp-servers", "/metrics"} {
		for _, auth := range []string{"", "Bearer wrong-token-wrong-token", "Basic " + testToken, "Bearer " + testToken + "x", "Bearer"} {
			req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			n++
			req.Header.Set("X-Forwarded-For", fmt.Sprintf("192.0.2.%d", n))
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s with %q: status %d, want 401", path, auth, resp.StatusCode)
			}
			if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s: WWW-Authenticate = %q", path, resp.Header.Get("WWW-Authenticate"))
			}
			if strings.Contains(string(body), "weather") {
				t.Errorf("%s: 401 body leaks audit data: %s", path, body)
			}
		}
	}
	if code := getJSON(t, ts, "/api/v1/tool-calls", testToken, nil); code != http.StatusOK {
		t.Errorf("right token: status %d", code)
	}
	// Pages send browsers without a session to the login form instead.
	client := ts.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Get(ts.URL + "/admin/?status=error")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/admin/login?next=") {
		t.Errorf("page without login: %d to %q, want 303 to the login page", resp.StatusCode, resp.Header.Get("Location"))
	}
	// /healthz is open, for load balancers.
	resp, err = client.Get(ts.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %d", resp.StatusCode)
	}
}

func TestNewRefusesOpenNonLoopback(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	tests := []struct {
		listen, token string
		ok            bool
	}{
		{"127.0.0.1:8080", "", true},
		{"localhost:8080", "", true},
		{"[::1]:8080", "", true},
		{"0.0.0.0:8080", "", false},
		{":8080", "", false},
		{"192.168.1.10:8080", "", false},
		{"[::]:8080", "", false},
		{"example.com:8080", "", false},
		{"0.0.0.0:8080", testToken, true},
		{"0.0.0.0:8080", "x9q2k", false},
		{"no-port", testToken, false},
	}
	for _, tc := range tests {
		_, err := New(Options{Listen: tc.listen, Token: tc.token, Store: storeOf(st)})
		if (err == nil) != tc.ok {
			t.Errorf("New(listen %q, token %q): err = %v, want ok=%v", tc.listen, tc.token, err, tc.ok)
		}
		if err != nil && tc.token != "" && strings.Contains(err.Error(), tc.token) {
			t.Errorf("error leaks the token: %v", err)
		}
	}
}

func TestNoTokenLoopbackIsOpenButOnlyForLocalHosts(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seedStore(t, st)
	_, ts := newTestServer(t, st, "")
	if code := getJSON(t, ts, "/api/v1/tool-calls", "", nil); code != http.StatusOK {
		t.Errorf("no token on loopback: API status %d, want 200", code)
	}
	// A page served from another name (DNS rebinding to 127.0.0.1) is refused.
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/api/v1/tool-calls", nil)
	req.Host = "evil.example:80"
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("foreign Host: status %d, want 421", resp.StatusCode)
	}
}

func TestRunShutsDownOnCancel(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	srv, err := New(Options{Listen: "127.0.0.1:0", Token: testToken, Store: storeOf(st)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve after cancel: %v", err)
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		t.Error("server still answers after shutdown")
	}
}

// tWriter sends log lines to the test's log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func TestShutdownEndsOpenEventStreams(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	streaming := make(chan struct{})
	stream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		close(streaming)
		<-r.Context().Done() // like the web chat's event stream
	})
	srv, err := New(Options{Listen: "127.0.0.1:0", Store: storeOf(st), WebChat: stream})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/chat/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-streaming
	cancel()
	// Shutdown gives up with an error after 5 s when a request does not end.
	if err := <-done; err != nil {
		t.Fatalf("Serve with an open event stream: %v", err)
	}
}

// TestNewRefusesAStoreMissingAQueryType: every part of the database the pages read is required,
// and the error names the one missing, so no page finds out at its first request.
func TestNewRefusesAStoreMissingAQueryType(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	for _, tc := range []struct {
		field string
		drop  func(*Store)
	}{
		{"ToolCalls", func(s *Store) { s.ToolCalls = nil }},
		{"Turns", func(s *Store) { s.Turns = nil }},
		{"Messages", func(s *Store) { s.Messages = nil }},
		{"Timelines", func(s *Store) { s.Timelines = nil }},
		{"Usage", func(s *Store) { s.Usage = nil }},
		{"Consents", func(s *Store) { s.Consents = nil }},
		{"Health", func(s *Store) { s.Health = nil }},
		{"Transcripts", func(s *Store) { s.Transcripts = nil }},
	} {
		s := storeOf(st)
		tc.drop(&s)
		_, err := New(Options{Listen: "127.0.0.1:0", Store: s})
		if err == nil || !strings.Contains(err.Error(), "Store."+tc.field) {
			t.Errorf("without %s: err = %v, want it named", tc.field, err)
		}
	}
	if _, err := New(Options{Listen: "127.0.0.1:0", Store: storeOf(st)}); err != nil {
		t.Errorf("the whole store refused: %v", err)
	}
}
