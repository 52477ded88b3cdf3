package main

import (
	"context"
	"database/sql"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"relaybot/store"
	"relaybot/tools/plugin"
)

// TestAuditStatsCountEveryCallSinceTheStart asks the audit_query plugin's reader for the stats of a
// log larger than the 200,000 rows the reader used to page through: every call counts, a tool's
// groups per MCP server fold into one line, running calls and calls before the window do not count.
func TestAuditStatsCountEveryCallSinceTheStart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bot.db")
	st, err := store.Open(ctx, store.Options{DSN: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	since := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	calls := []store.ToolCallRecord{
		{ToolName: "search", Source: "mcp", Server: "s1", Status: store.StatusOK, Duration: time.Second},
		{ToolName: "search", Source: "mcp", Server: "s2", Status: store.StatusError, Duration: 3 * time.Second},
		{ToolName: "search", Source: "mcp", Server: "s2", Status: store.StatusRunning},
		{ToolName: "search", Source: "mcp", Server: "s1", Status: store.StatusOK, Duration: time.Hour,
			StartedAt: since.Add(-time.Minute)}, // before the window
	}
	for i, c := range calls {
		c.ChatID, c.Platform = "c", "telegram"
		if c.StartedAt.IsZero() {
			c.StartedAt = since.Add(time.Duration(i) * time.Second)
		}
		status := c.Status
		c.Status = ""
		if err := st.StartToolCall(ctx, &c); err != nil {
			t.Fatal(err)
		}
		if status != store.StatusRunning {
			c.Status = status
			if err := st.FinishToolCall(ctx, &c); err != nil {
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
	res, err := db.ExecContext(ctx, `WITH RECURSIVE k(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM k WHERE x < ?)
INSERT INTO tool_calls (turn_id, conversation_id, platform, chat_id, user_id, round, tool_call_id,
  tool_name, source, server, status, arguments, result, started_at, finished_at, duration_ms)
SELECT 1, 1, 'telegram', 'c', 'u', 1, 'call_' || x, 'fetch_url', 'native', '',
  CASE WHEN x % 10 = 0 THEN 'error' ELSE 'ok' END, '{}', 'r',
  '2026-05-02 00:00:00+00:00', '2026-05-02 00:00:01+00:00', x % 10
FROM k`, n-1)
	if err != nil {
		t.Fatal(err)
	}
	if rows, _ := res.RowsAffected(); rows != n {
		t.Fatalf("seeded %d rows, want %d", rows, n)
	}

	got, err := auditReader{st: st}.Stats(ctx, since)
	if err != nil {
		t.Fatal(err)
	}
	want := []plugin.AuditStat{
		{Tool: "search", Source: "mcp", Calls: 2, Failures: 1, AvgDuration: 2 * time.Second, MaxDuration: 3 * time.Second},
		{Tool: "fetch_url", Source: "native", Calls: n, Failures: n / 10, AvgDuration: 4500 * time.Microsecond, MaxDuration: 9 * time.Millisecond},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("audit_query stats =\n%+v\nwant\n%+v", got, want)
	}
}
