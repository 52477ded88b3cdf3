package auditquery_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/store"
	"relaybot/store/storetest"
	"relaybot/tools"
	"relaybot/tools/plugin/auditquery"
)

// TestSlowestToolsAndCallsCoverTheWholeWindow asks audit_query, reading a real store, about a log
// larger than the 200,000 rows its reader once paged through. Slowest tools: every call counts, a
// tool's groups per MCP server fold into one line, running calls and calls before the window do
// not count. Slowest calls: the slowest call of the window comes first even when 200,000 newer
// calls were faster (the reader once looked at the newest 1000 only).
func TestSlowestToolsAndCallsCoverTheWholeWindow(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bot.db")
	st := storetest.OpenWith(t, store.Options{DSN: path})
	since := time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Second)
	calls := []audit.Record{
		{ToolName: "search", Source: audit.SourceMCP, Server: "s1", Status: audit.StatusOK, Duration: time.Second},
		{ToolName: "search", Source: audit.SourceMCP, Server: "s2", Status: audit.StatusError, Duration: 3 * time.Second},
		{ToolName: "search", Source: audit.SourceMCP, Server: "s2", Status: audit.StatusRunning},
		{ToolName: "search", Source: audit.SourceMCP, Server: "s1", Status: audit.StatusOK, Duration: time.Hour,
			StartedAt: since.Add(-23 * time.Hour)}, // before the 24h window
	}
	for i, c := range calls {
		c.ChatID, c.Platform = "c", "telegram"
		if c.StartedAt.IsZero() {
			c.StartedAt = since.Add(time.Duration(i) * time.Second)
		}
		status := c.Status
		c.Status = ""
		if err := st.ToolCalls.StartToolCall(ctx, &c); err != nil {
			t.Fatal(err)
		}
		if status != audit.StatusRunning {
			c.Status = status
			if err := st.ToolCalls.FinishToolCall(ctx, &c); err != nil {
				t.Fatal(err)
			}
		}
	}
	// 200,010 finished calls of fetch_url: durations 0..9 ms, one in ten an error.
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const n = 200_010
	at := since.Add(time.Hour).Format("2006-01-02 15:04:05+00:00")
	res, err := db.ExecContext(ctx, `WITH RECURSIVE k(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM k WHERE x < ?)
INSERT INTO tool_calls (turn_id, conversation_id, platform, chat_id, user_id, round, tool_call_id,
  tool_name, source, server, status, arguments, result, started_at, finished_at, duration_ms)
SELECT 1, 1, 'telegram', 'c', 'u', 1, 'call_' || x, 'fetch_url', 'native', '',
  CASE WHEN x % 10 = 0 THEN 'error' ELSE 'ok' END, '{}', 'r', ?, ?, x % 10
FROM k`, n-1, at, at)
	if err != nil {
		t.Fatal(err)
	}
	if rows, _ := res.RowsAffected(); rows != n {
		t.Fatalf("seeded %d rows, want %d", rows, n)
	}

	turn := newManager(t, st.ToolCalls).ForTurn(tools.TurnInfo{Admin: true, Private: true}, nil)
	out := turn.Execute(ctx, tools.Call{ToolCall: chat.ToolCall{ID: "c", Name: auditquery.Name, Arguments: `{"view":"slowest_tools"}`}})
	want := fmt.Sprintf("Slowest tools in the last 1d (by average duration):\n"+
		"- search [mcp]: 2 calls, 1 failed, avg 2s, max 3s\n"+
		"- fetch_url [native]: %d calls, %d failed, avg 5ms, max 9ms", n, n/10)
	if out.Status != audit.StatusOK || !strings.Contains(out.Content, want) {
		t.Errorf("audit_query slowest_tools = %s %q\nwant %q", out.Status, out.Content, want)
	}
	out = turn.Execute(ctx, tools.Call{ToolCall: chat.ToolCall{ID: "c2", Name: auditquery.Name, Arguments: `{"view":"slowest_calls","limit":2}`}})
	first, second := strings.Index(out.Content, " search [mcp:s2] error 3s,"), strings.Index(out.Content, " search [mcp:s1] ok 1s,")
	if out.Status != audit.StatusOK || first < 0 || second < first {
		t.Errorf("audit_query slowest_calls = %s %q\nwant the 3s and then the 1s search call", out.Status, out.Content)
	}
}
