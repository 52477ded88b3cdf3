package admin

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/store/storetest"
	"strconv"
	"strings"
	"testing"
	"time"

	"relaybot/store"
)

// GET /api/v1/usage totals the model calls per user, chat and model with their cost, and gives a
// table as CSV; the tool-call API filters on approval fields.
func TestAPIUsageAndApprovalFilters(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	ctx := context.Background()
	now := time.Now().UTC()
	for _, u := range []struct {
		chat, user      string
		in, cached, out int
	}{{"1", "ann", 1_000_000, 600_000, 200_000}, {"1", "bob", 100_000, 0, 0}, {"2", "ann", 0, 0, 100_000}} {
		conv, err := st.Conversations.Conversation(ctx, chat.Key{Platform: "discord", ChatID: u.chat})
		if err != nil {
			t.Fatal(err)
		}
		id, err := st.Turns.StartTurn(ctx, store.TurnStart{ConversationID: conv.ID, UserID: u.user, UserMessage: chat.Message{Role: store.RoleUser, Content: "q"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Turns.FinishTurn(ctx, store.TurnEnd{TurnID: id, Status: store.TurnOK, LLMCalls: []chat.ModelCall{
			{Model: "mini", Status: "ok", TokensIn: u.in, CachedIn: u.cached, TokensOut: u.out, StartedAt: now}}}); err != nil {
			t.Fatal(err)
		}
	}
	asked := audit.Record{ToolName: "send_mail", ApprovalRequired: true, StartedAt: now}
	if err := st.ToolCalls.StartToolCall(ctx, &asked); err != nil {
		t.Fatal(err)
	}
	asked.Status, asked.Decision, asked.Approver, asked.DecidedAt = audit.StatusDenied, "denied", "bob", now
	if err := st.ToolCalls.FinishToolCall(ctx, &asked); err != nil {
		t.Fatal(err)
	}
	plain := audit.Record{ToolName: "current_time", StartedAt: now, Status: audit.StatusOK}
	if err := st.ToolCalls.StartToolCall(ctx, &plain); err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, st, "usage-token-0123456789", func(o *Options) { o.Prices = map[string]chat.Price{"mini": {In: 0.15, CachedIn: 0.075, Out: 0.60}} })

	var rep usageReport
	if code := getJSON(t, ts, "/api/v1/usage?since=24h", "usage-token-0123456789", &rep); code != http.StatusOK {
		t.Fatalf("usage: %d", code)
	}
	if rep.Total.TokensIn != 1_100_000 || rep.Total.TokensOut != 300_000 || math.Abs(rep.Total.Cost-(0.5*0.15+0.6*0.075+0.3*0.60)) > 1e-9 {
		t.Fatalf("total = %+v, want 1.1M in (0.6M of them cached, at half the price), 0.3M out, cost 0.3", rep.Total)
	}
	var raw struct {
		Total map[string]any `json:"total"`
	}
	if getJSON(t, ts, "/api/v1/usage?since=24h", "usage-token-0123456789", &raw); raw.Total["cached_tokens"] != float64(600_000) ||
		math.Abs(raw.Total["cache_saved"].(float64)-0.6*0.075) > 1e-9 {
		t.Fatalf("total = %v, want cached_tokens 600000 and cache_saved 0.045", raw.Total)
	}
	if u := rep.Tables["user"]; len(u) != 2 || u[0].Key != "discord:ann" || len(rep.Tables["chat"]) != 2 || len(rep.Tables["model"]) != 1 {
		t.Fatalf("tables = %+v", rep.Tables)
	}
	req, _ := http.NewRequest("GET", ts.URL+"/api/v1/usage?since=24h&by=chat&format=csv", nil)
	req.Header.Set("Authorization", "Bearer usage-token-0123456789")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(body), "chat,calls,tokens_in,tokens_out,cost,estimated_calls,cached_tokens,cache_write_tokens,cache_saved\ndiscord:1,2,1100000,200000,0.240000,0,600000,0,0.045000\n") {
		t.Fatalf("CSV = %q", body)
	}
	if code := getJSON(t, ts, "/api/v1/usage?by=everything", "usage-token-0123456789", nil); code != http.StatusBadRequest {
		t.Fatalf("bad by: %d, want 400", code)
	}

	for _, q := range []string{"decision=denied", "approval=required"} {
		var p page
		if code := getJSON(t, ts, "/api/v1/tool-calls?"+q, "usage-token-0123456789", &p); code != http.StatusOK || len(p.Items) != 1 ||
			p.Items[0].ToolName != "send_mail" || p.Items[0].Approver != "bob" {
			t.Fatalf("tool-calls?%s = %d %+v, want the denied send_mail only", q, code, p.Items)
		}
	}
	if code := getJSON(t, ts, "/api/v1/tool-calls?decision=maybe", "usage-token-0123456789", nil); code != http.StatusBadRequest {
		t.Fatalf("bad decision: %d, want 400", code)
	}
}

// The usage page shows a table per user, chat and model, with the cost.
func TestUsagePageShowsTables(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seedStore(t, st)
	_, ts := newTestServer(t, st, "", func(o *Options) { o.Prices = map[string]chat.Price{"test-model": {In: 1, Out: 1}} })
	resp, err := ts.Client().Get(ts.URL + "/admin/usage?since=7d")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"Per user", "Per chat", "Per model", "CSV by user", `href="/admin/usage"`} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Fatalf("usage page (%d) lacks %q:\n%.2000s", resp.StatusCode, want, body)
		}
	}
}

// The usage page shows the prompt tokens served from the providers' caches and what that saved.
func TestUsagePageShowsCachedTokensAndWhatTheySaved(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	ctx := context.Background()
	conv, err := st.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "5"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := st.Turns.StartTurn(ctx, store.TurnStart{ConversationID: conv.ID, UserID: "7", UserMessage: chat.Message{Role: store.RoleUser, Content: "q"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Turns.FinishTurn(ctx, store.TurnEnd{TurnID: id, Status: store.TurnOK, LLMCalls: []chat.ModelCall{
		{Model: "mini", Status: "ok", TokensIn: 1_000_000, CachedIn: 600_000, TokensOut: 0, StartedAt: time.Now()}}}); err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, st, "", func(o *Options) { o.Prices = map[string]chat.Price{"mini": {In: 0.15, CachedIn: 0.075}} })
	page := getPage(t, ts, "/admin/usage?since=24h")
	for _, want := range []string{"600000 from the providers' caches", "Saved by cache", "saved by the cache", "0.0450"} {
		if !strings.Contains(page, want) {
			t.Errorf("the usage page lacks %q", want)
		}
	}
}

// A model call whose tokens the bot estimated (a stopped answer) is marked on the usage page:
// the totals carry "≈" and a note says why.
func TestUsagePageMarksEstimatedCalls(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	ctx := context.Background()
	conv, err := st.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "5"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := st.Turns.StartTurn(ctx, store.TurnStart{ConversationID: conv.ID, UserID: "ann", UserMessage: chat.Message{Role: store.RoleUser, Content: "q"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Turns.FinishTurn(ctx, store.TurnEnd{TurnID: id, Status: store.TurnCancelled, LLMCalls: []chat.ModelCall{
		{Model: "mini", Status: "cancelled", TokensIn: 412, TokensOut: 9, Estimated: true, StartedAt: time.Now()}}}); err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, st, "")
	resp, err := ts.Client().Get(ts.URL + "/admin/usage?since=7d")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"≈412 tokens in", "≈9 out", `id="estimated-note"`, "1 of these calls are estimated"} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Fatalf("usage page (%d) lacks %q:\n%.3000s", resp.StatusCode, want, body)
		}
	}
}

// The calls page filters on the approval fields and the call page shows the decision.
func TestPagesShowApprovals(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	ctx := context.Background()
	now := time.Now().UTC()
	asked := audit.Record{ToolName: "files__write", Server: "files", ServerTool: "write", Source: "mcp", ApprovalRequired: true, StartedAt: now}
	if err := st.ToolCalls.StartToolCall(ctx, &asked); err != nil {
		t.Fatal(err)
	}
	asked.Status, asked.Decision, asked.Approver, asked.DecidedAt = audit.StatusDenied, "denied", "bob", now
	if err := st.ToolCalls.FinishToolCall(ctx, &asked); err != nil {
		t.Fatal(err)
	}
	plain := audit.Record{ToolName: "current_time", StartedAt: now, Status: audit.StatusOK}
	if err := st.ToolCalls.StartToolCall(ctx, &plain); err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, st, "")
	get := func(path string) string { return getPage(t, ts, path) }
	list := get("/admin/?decision=denied")
	if !strings.Contains(list, "files__write") || strings.Contains(list, "current_time") || !strings.Contains(list, `value="denied" selected`) {
		t.Fatalf("calls page filtered by decision shows the wrong rows or loses the filter:\n%.3000s", list)
	}
	call := get("/admin/calls/" + strconv.FormatInt(asked.ID, 10))
	if !strings.Contains(call, "denied by bob") || !strings.Contains(call, "(its name: write)") {
		t.Fatalf("call page lacks the approval or the server's tool name:\n%.3000s", call)
	}
}

// getPage fetches a page of ts and fails the test unless it answers 200.
func getPage(t *testing.T, ts *httptest.Server, path string) string {
	t.Helper()
	resp, err := ts.Client().Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}
