package store

import (
	"context"
	"fmt"
	"relaybot/audit"
	"relaybot/chat"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAuditRows measures sustained audit rows per second on SQLite in WAL mode: each op is
// one tool call, written at start (durable before return) and completed at the end.
func BenchmarkAuditRows(b *testing.B) {
	for _, callers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			ctx := context.Background()
			s := newStore(b, DriverSQLite)
			var n atomic.Int64
			b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					rec := &audit.Record{TurnID: i, Platform: "telegram", ChatID: "c", UserID: "u",
						ToolCallID: fmt.Sprint("call_", i), ToolName: "web_search", Source: "native",
						Arguments: `{"query":"benchmark"}`, ArgumentsSize: 21}
					if err := s.ToolCalls.StartToolCall(ctx, rec); err != nil {
						b.Fatal(err)
					}
					rec.Status, rec.Result, rec.ResultSize = audit.StatusOK, "result text", 11
					if err := s.ToolCalls.FinishToolCall(ctx, rec); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkHistory10Rounds loads the history of a conversation of 10 rounds, each with two tool
// calls and their results (50 messages).
func BenchmarkHistory10Rounds(b *testing.B) {
	ctx := context.Background()
	s := newStore(b, DriverSQLite)
	c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 30 { // more rounds than loaded
		id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserMessage: chat.Message{Content: fmt.Sprint("question ", i)}})
		if err != nil {
			b.Fatal(err)
		}
		a, z := fmt.Sprint("a", i), fmt.Sprint("z", i)
		err = s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: TurnOK, Messages: []chat.Message{
			{Role: RoleAssistant, ToolCalls: []chat.ToolCall{call(a), call(z)}},
			{Role: RoleTool, ToolCallID: a, Content: "result a"},
			{Role: RoleTool, ToolCallID: z, Content: "result z"},
			{Role: RoleAssistant, Content: "an answer of a few words"},
		}})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		h, err := s.Messages.History(ctx, c.ID, 10)
		if err != nil || len(h) != 50 {
			b.Fatalf("History = %d messages, %v", len(h), err)
		}
	}
}

// BenchmarkToolCallsMillion queries an audit log of 1,000,000 rows on SQLite with a tool and
// status filter (first page and a later page through the cursor).
func BenchmarkToolCallsMillion(b *testing.B) {
	ctx := context.Background()
	s := newStore(b, DriverSQLite)
	start := time.Now()
	// Building the indexes after the rows is much faster than keeping them up to date row by row.
	var indexes []string
	if err := s.w.Raw(`SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tool_calls' AND sql IS NOT NULL`).
		Scan(&indexes).Error; err != nil || len(indexes) == 0 {
		b.Fatalf("indexes of tool_calls: %v %v", indexes, err)
	}
	var names []string
	if err := s.w.Raw(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tool_calls' AND sql IS NOT NULL`).
		Scan(&names).Error; err != nil {
		b.Fatal(err)
	}
	for _, n := range names {
		if err := s.w.Exec("DROP INDEX " + n).Error; err != nil {
			b.Fatal(err)
		}
	}
	// 20 tools, 80% ok, one call every second.
	res := s.w.Exec(`WITH RECURSIVE n(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM n WHERE x < 999999)
INSERT INTO tool_calls (turn_id, conversation_id, platform, chat_id, user_id, round, tool_call_id,
  tool_name, source, server, status, arguments, result, started_at, finished_at, duration_ms)
SELECT x / 3, x / 30, 'telegram', 'chat' || (x % 500), 'user' || (x % 2000), 1, 'call_' || x,
  'tool' || (x % 20), 'native', '', CASE (x / 20) % 10 WHEN 0 THEN 'error' WHEN 1 THEN 'timeout' ELSE 'ok' END,
  '{"q":"' || x || '"}', 'r',
  strftime('%Y-%m-%d %H:%M:%S', 1767225600 + x, 'unixepoch') || '+00:00',
  strftime('%Y-%m-%d %H:%M:%S', 1767225601 + x, 'unixepoch') || '+00:00', x % 5000
FROM n`)
	if res.Error != nil || res.RowsAffected != 1_000_000 {
		b.Fatalf("seed: %d rows, %v", res.RowsAffected, res.Error)
	}
	for _, ddl := range indexes {
		if err := s.w.Exec(ddl).Error; err != nil {
			b.Fatal(err)
		}
	}
	if err := s.w.Exec("ANALYZE").Error; err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded 1,000,000 rows in %v", time.Since(start).Round(time.Millisecond))
	f := audit.Filter{Tool: "tool7", Statuses: []audit.Status{audit.StatusError}, Limit: 50}
	b.Logf("plan:\n%s", queryPlan(b, s, f))
	items, next, err := s.ToolCalls.ToolCalls(ctx, f)
	if err != nil || len(items) != 50 || next == "" {
		b.Fatalf("ToolCalls = %d rows, next %q, %v", len(items), next, err)
	}
	b.Run("tool+status/first-page", func(b *testing.B) {
		for b.Loop() {
			if items, _, err := s.ToolCalls.ToolCalls(ctx, f); err != nil || len(items) != 50 {
				b.Fatal(len(items), err)
			}
		}
	})
	b.Run("tool+status/next-page", func(b *testing.B) {
		g := f
		g.Cursor = next
		for b.Loop() {
			if items, _, err := s.ToolCalls.ToolCalls(ctx, g); err != nil || len(items) != 50 {
				b.Fatal(len(items), err)
			}
		}
	})
	b.Run("tool+status+since/stats", func(b *testing.B) {
		g := audit.Filter{Tool: "tool7", Statuses: []audit.Status{audit.StatusError}, Since: time.Unix(1767225600+900_000, 0)}
		for b.Loop() {
			if st, err := s.ToolCalls.ToolStats(ctx, g); err != nil || len(st) != 1 {
				b.Fatal(st, err)
			}
		}
	})
}

// BenchmarkTurnWrites measures what a turn writes on SQLite with synchronous=FULL: the turn
// started with the user's message, its model call started in the ledger, then the turn
// finished with an assistant answer and the call's end. The turn's start rides in its call's
// reservation (start=carried, as the pipeline writes it: NewTurnID, then LLMCallStart.Turn) or
// is written alone before it (start=alone, StartTurn). With 64 turns at once, as in a busy
// bot, commits are shared by the turns waiting together; one at a time, as at 100 chats, each
// turn pays its own. It reports the commits and the writer's statements per turn (savepoints
// included; BEGIN and COMMIT are not statements here).
func BenchmarkTurnWrites(b *testing.B) {
	for _, turns := range []int{64, 1} {
		for _, carried := range []bool{true, false} {
			name := fmt.Sprintf("turns=%d/start=alone", turns)
			if carried {
				name = fmt.Sprintf("turns=%d/start=carried", turns)
			}
			b.Run(name, func(b *testing.B) { benchTurnWrites(b, turns, carried) })
		}
	}
}

func benchTurnWrites(b *testing.B, turns int, carried bool) {
	ctx := context.Background()
	s := newStore(b, DriverSQLite)
	convs := make([]int64, 64)
	for i := range convs {
		c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: fmt.Sprint("bench", i)})
		if err != nil {
			b.Fatal(err)
		}
		convs[i] = c.ID
	}
	var n atomic.Int64
	commits, started := s.turns.commits.Load(), goroutinesCreated()
	stmts, hits := writerRuns(b, s)
	b.ReportAllocs()
	b.SetParallelism(max(1, turns/runtime.GOMAXPROCS(0)))
	if turns == 1 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			ts := TurnStart{ConversationID: convs[i%64], UserMessage: chat.Message{Content: "a question"}}
			cs := LLMCallStart{Platform: "telegram", ChatID: "c", UserID: "u",
				Call: chat.ModelCall{Model: "m", TokensIn: 10, TokensOut: 1000, StartedAt: time.Now()}}
			var err error
			if carried {
				ts.ID, err = s.Turns.NewTurnID(ctx)
				cs.Turn = &ts
			} else {
				ts.ID, err = s.Turns.StartTurn(ctx, ts)
			}
			if err != nil {
				b.Fatal(err)
			}
			id := ts.ID
			cs.TurnID = id
			call, err := s.ModelCalls.StartLLMCall(ctx, cs)
			if err != nil {
				b.Fatal(err)
			}
			err = s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: TurnOK, Model: "m",
				Messages: []chat.Message{{Role: RoleAssistant, Content: "an answer of a few words"}},
				Settle:   []LLMCallSettle{{ID: call, Call: chat.ModelCall{Model: "m", Status: "ok", TokensIn: 10, TokensOut: 5}}}})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "turns/s")
	b.ReportMetric(float64(s.turns.commits.Load()-commits)/float64(b.N), "commits/turn")
	runs, cached := writerRuns(b, s)
	b.ReportMetric(float64(runs-stmts)/float64(b.N), "stmts/turn")
	// Statements SQLite compiled anew (not run from the connection's cache).
	b.ReportMetric(float64((runs-stmts)-(cached-hits))/float64(b.N), "prepared/turn")
	// The benchmark's own goroutines are started before the timer; what is left is the store's
	// (go-sqlite3 starts one per statement run under a context that can end).
	b.ReportMetric(float64(goroutinesCreated()-started)/float64(b.N), "goroutines/turn")
}

// goroutinesCreated is the count of goroutines the process has started.
func goroutinesCreated() uint64 {
	m := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(m)
	return m[0].Value.Uint64()
}

// writerRuns is the count of statements the writer connection ran, and of those run from its
// statement cache.
func writerRuns(b *testing.B, s *Database) (runs, hits int) {
	conn, err := s.wsql.Conn(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Raw(func(dc any) error {
		c := dc.(*stmtCacheConn)
		c.mu.Lock()
		defer c.mu.Unlock()
		runs, hits = c.runs, c.hits
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return runs, hits
}
