package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"relaybot/audit"
	"relaybot/chat"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"
)

var seedBase = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// seedLog writes n finished calls: tool tN%3, status ok except every 4th (error) and every 10th
// (timeout), chat c(N%2), duration (N%10+1)*100ms, two calls per second so that start times tie.
func seedLog(t testing.TB, s *Database, n int) []audit.Record {
	t.Helper()
	ctx := context.Background()
	var out []audit.Record
	for i := range n {
		status := audit.StatusOK
		switch {
		case i%10 == 0:
			status = audit.StatusTimeout
		case i%4 == 0:
			status = audit.StatusError
		}
		source, server := audit.SourceNative, ""
		if i%3 == 2 {
			source, server = audit.SourceMCP, "web"
		}
		rec := audit.Record{TurnID: int64(i/5 + 1), Platform: "telegram", ChatID: fmt.Sprint("c", i%2),
			UserID: fmt.Sprint("u", i%5), Round: 1, ToolCallID: fmt.Sprint("call_", i),
			ToolName: fmt.Sprint("t", i%3), Source: source, Server: server,
			Arguments: fmt.Sprintf(`{"i":%d}`, i), StartedAt: seedBase.Add(time.Duration(i/2) * time.Second)}
		if err := s.ToolCalls.StartToolCall(ctx, &rec); err != nil {
			t.Fatal(err)
		}
		rec.Status = status
		rec.Duration = time.Duration(i%10+1) * 100 * time.Millisecond
		rec.FinishedAt = rec.StartedAt.Add(rec.Duration)
		if err := s.ToolCalls.FinishToolCall(ctx, &rec); err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
	return out
}

// TestSlowestCallsComeFirstFromTheWholeLog asks for the slowest calls of a filter: the answer is
// ordered by duration over every matching row, not only over the newest page, and has no cursor.
func TestSlowestCallsComeFirstFromTheWholeLog(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		recs := seedLog(t, s, 120)
		items, next, err := s.ToolCalls.ToolCalls(ctx, audit.Filter{Tool: "t1", Order: audit.Slowest, Limit: 5})
		if err != nil || next != "" {
			t.Fatalf("ToolCalls = %d items, next %q, err %v; want one page", len(items), next, err)
		}
		var want []audit.Record
		for _, r := range recs {
			if r.ToolName == "t1" {
				want = append(want, r)
			}
		}
		slices.SortStableFunc(want, func(a, b audit.Record) int {
			if c := cmp.Compare(b.Duration, a.Duration); c != 0 {
				return c
			}
			if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
				return c
			}
			return cmp.Compare(b.ID, a.ID)
		})
		for i, it := range items {
			if it.ID != want[i].ID || it.Duration != want[i].Duration {
				t.Errorf("slowest #%d = call %d (%s), want call %d (%s)", i+1, it.ID, it.Duration, want[i].ID, want[i].Duration)
			}
		}
		if _, _, err := s.ToolCalls.ToolCalls(ctx, audit.Filter{Order: audit.Slowest, Cursor: next + "x"}); !errors.Is(err, audit.ErrBadCursor) {
			t.Errorf("slowest with a cursor: err %v, want ErrBadCursor", err)
		}
	})
}

func TestToolCallsFiltersAndPages(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		recs := seedLog(t, s, 120)
		running := &audit.Record{ToolName: "t0", Source: "native", ChatID: "c0", Platform: "telegram",
			StartedAt: seedBase.Add(time.Hour)}
		if err := s.ToolCalls.StartToolCall(ctx, running); err != nil {
			t.Fatal(err)
		}

		want := func(pred func(r audit.Record) bool) []int64 {
			var ids []int64
			for i := len(recs) - 1; i >= 0; i-- {
				if pred(recs[i]) {
					ids = append(ids, recs[i].ID)
				}
			}
			return ids
		}
		tests := []struct {
			name string
			f    audit.Filter
			want []int64
		}{
			{"tool+status", audit.Filter{Tool: "t1", Statuses: []audit.Status{audit.StatusError}}, want(func(r audit.Record) bool { return r.ToolName == "t1" && r.Status == audit.StatusError })},
			{"chat", audit.Filter{Platform: "telegram", ChatID: "c1", Until: seedBase.Add(time.Hour)}, want(func(r audit.Record) bool { return r.ChatID == "c1" })},
			{"source+server", audit.Filter{Source: "mcp", Server: "web"}, want(func(r audit.Record) bool { return r.Server == "web" })},
			{"user+turn", audit.Filter{UserID: "u3", TurnID: 4}, want(func(r audit.Record) bool { return r.UserID == "u3" && r.TurnID == 4 })},
			{"since/until", audit.Filter{Since: seedBase.Add(10 * time.Second), Until: seedBase.Add(20 * time.Second)},
				want(func(r audit.Record) bool {
					return !r.StartedAt.Before(seedBase.Add(10*time.Second)) && r.StartedAt.Before(seedBase.Add(20*time.Second))
				})},
			{"running", audit.Filter{Statuses: []audit.Status{audit.StatusRunning}}, []int64{running.ID}},
			{"any of two statuses", audit.Filter{Tool: "t0", Statuses: []audit.Status{audit.StatusError, audit.StatusTimeout}},
				want(func(r audit.Record) bool {
					return r.ToolName == "t0" && (r.Status == audit.StatusError || r.Status == audit.StatusTimeout)
				})},
			{"nothing", audit.Filter{Tool: "nope"}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				for _, limit := range []int{3, 7, 1000} {
					f := tt.f
					f.Limit = limit
					var got []int64
					for pages := 0; ; pages++ {
						items, next, err := s.ToolCalls.ToolCalls(ctx, f)
						if err != nil {
							t.Fatal(err)
						}
						if len(items) > limit {
							t.Fatalf("page of %d items, limit %d", len(items), limit)
						}
						for _, it := range items {
							got = append(got, it.ID)
						}
						if next == "" {
							break
						}
						if pages > 200 {
							t.Fatal("pagination does not end")
						}
						f.Cursor = next
					}
					if fmt.Sprint(got) != fmt.Sprint(tt.want) {
						t.Errorf("limit %d: got %v\nwant %v", limit, got, tt.want)
					}
				}
			})
		}

		row, err := s.ToolCalls.ToolCall(ctx, recs[7].ID)
		if err != nil {
			t.Fatal(err)
		}
		if row.ToolCallID != "call_7" || row.Duration != 800*time.Millisecond || row.FinishedAt.IsZero() ||
			!row.StartedAt.Equal(recs[7].StartedAt) || row.StartedAt.Location() != time.UTC || row.Arguments != `{"i":7}` {
			t.Errorf("ToolCall = %+v", row)
		}
		if _, err := s.ToolCalls.ToolCall(ctx, 999999); !errors.Is(err, ErrNotFound) {
			t.Errorf("ToolCall of a missing id = %v, want ErrNotFound", err)
		}
		if _, _, err := s.ToolCalls.ToolCalls(ctx, audit.Filter{Cursor: "garbage!"}); !errors.Is(err, audit.ErrBadCursor) {
			t.Errorf("bad cursor = %v, want audit.ErrBadCursor", err)
		}
		items, _, _ := s.ToolCalls.ToolCalls(ctx, audit.Filter{Limit: 5000})
		if len(items) != 121 {
			t.Errorf("limit above audit.MaxLimit returned %d rows, want all 121", len(items))
		}
	})
}

func TestToolStats(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		recs := seedLog(t, s, 120)
		if err := s.ToolCalls.StartToolCall(ctx, &audit.Record{ToolName: "t0", Source: "native", StartedAt: seedBase}); err != nil {
			t.Fatal(err)
		}
		stats, err := s.ToolCalls.ToolStats(ctx, audit.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(stats) != 3 {
			t.Fatalf("stats = %+v, want 3 tools", stats)
		}
		for _, st := range stats {
			var durs []time.Duration
			errs, n := 0, 0
			for _, r := range recs {
				if r.ToolName == st.Tool {
					n++
					durs = append(durs, r.Duration)
					if r.Status != audit.StatusOK {
						errs++
					}
				}
			}
			finished := n
			if st.Tool == "t0" {
				n++ // the running call
			}
			if st.Count != n || st.Errors != errs {
				t.Errorf("%s: count %d errors %d, want %d and %d", st.Tool, st.Count, st.Errors, n, errs)
			}
			if want := float64(errs) / float64(finished); st.ErrorRate != want {
				t.Errorf("%s: error rate %v, want %v", st.Tool, st.ErrorRate, want)
			}
			var total, longest time.Duration
			for _, d := range durs {
				total += d
				longest = max(longest, d)
			}
			avg := (total / time.Duration(len(durs))).Round(time.Microsecond)
			if st.Finished != finished || st.Avg != avg || st.Max != longest {
				t.Errorf("%s: finished %d avg %v max %v, want %d, %v and %v", st.Tool, st.Finished, st.Avg, st.Max, finished, avg, longest)
			}
			p50, p95 := nearestRank(durs, 50), nearestRank(durs, 95)
			if st.P50 != p50 || st.P95 != p95 {
				t.Errorf("%s: p50 %v p95 %v, want %v %v", st.Tool, st.P50, st.P95, p50, p95)
			}
		}
		only, err := s.ToolCalls.ToolStats(ctx, audit.Filter{Tool: "t2", Statuses: []audit.Status{audit.StatusOK}})
		if err != nil || len(only) != 1 || only[0].Errors != 0 || only[0].Source != "mcp" || only[0].Server != "web" {
			t.Errorf("filtered stats = %+v (%v)", only, err)
		}
	})
}

func nearestRank(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[(len(s)*p+99)/100-1]
}

// TestToolCallsPlanUsesIndex checks on SQLite that a tool+status query is an index search, not
// a scan of the log.
func TestToolCallsPlanUsesIndex(t *testing.T) {
	s := newStore(t, DriverSQLite)
	seedLog(t, s, 50)
	plan := queryPlan(t, s, audit.Filter{Tool: "t1", Statuses: []audit.Status{audit.StatusOK}, Since: seedBase, Limit: 50})
	if !strings.Contains(plan, "USING INDEX idx_tool_calls_tool_status") || strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("plan does not use idx_tool_calls_tool_status for both filter and order:\n%s", plan)
	}
	items, next, _ := s.ToolCalls.ToolCalls(context.Background(), audit.Filter{Tool: "t1", Statuses: []audit.Status{audit.StatusOK}, Limit: 2})
	plan = queryPlan(t, s, audit.Filter{Tool: "t1", Statuses: []audit.Status{audit.StatusOK}, Limit: 2, Cursor: next})
	if len(items) != 2 || !strings.Contains(plan, "USING INDEX idx_tool_calls_tool_status") {
		t.Errorf("next page plan does not use the index:\n%s", plan)
	}
}

// queryPlan returns SQLite's EXPLAIN QUERY PLAN of the ToolCalls query for f.
func queryPlan(t testing.TB, s *Database, f audit.Filter) string {
	t.Helper()
	q, _, err := s.toolCallsQuery(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	var rows []toolCallModel
	stmt := q.Session(&gorm.Session{DryRun: true}).Find(&rows).Statement
	res, err := s.rsql.Query("EXPLAIN QUERY PLAN "+stmt.SQL.String(), stmt.Vars...)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	var b strings.Builder
	for res.Next() {
		var id, parent, notused int
		var detail string
		if err := res.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		b.WriteString(detail + "\n")
	}
	return b.String()
}

func TestSweep(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		seedLog(t, s, 30) // started in March 2026
		old, _ := s.Conversations.Conversation(ctx, chat.Key{Platform: "web", ChatID: "x"})
		turn, _ := s.Turns.StartTurn(ctx, TurnStart{ConversationID: old.ID, UserMessage: chat.Message{Content: "old"}})
		if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: turn, Status: TurnOK, Messages: []chat.Message{{Role: RoleAssistant, Content: "a"}}, LLMCalls: []chat.ModelCall{{Model: "m", Status: "ok"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Conversations.ResetConversation(ctx, chat.Key{Platform: "web", ChatID: "x"}); err != nil {
			t.Fatal(err)
		}
		running := &audit.Record{ToolName: "long", StartedAt: seedBase.Add(-time.Hour)}
		if err := s.ToolCalls.StartToolCall(ctx, running); err != nil {
			t.Fatal(err)
		}
		// A cutoff between the log and now deletes the log but keeps the turn.
		n, err := s.Retention.Sweep(ctx, seedBase.Add(time.Hour))
		if err != nil || n != 30 {
			t.Fatalf("Sweep = %d, %v; want 30 audit rows", n, err)
		}
		if c := count(t, s, "tool_calls", ""); c != 1 {
			t.Errorf("tool_calls left = %d, want the running one", c)
		}
		// A cutoff in the future deletes the turn with its messages and LLM calls, and the
		// emptied old conversation; the active one stays.
		n, err = s.Retention.Sweep(ctx, time.Now().Add(time.Hour))
		if err != nil || n != 2 {
			t.Fatalf("second Sweep = %d, %v; want the turn and the old conversation", n, err)
		}
		for table, want := range map[string]int{"turns": 0, "messages": 0, "llm_calls": 0, "conversations": 1, "tool_calls": 1} {
			if c := count(t, s, table, ""); c != want {
				t.Errorf("%s: %d rows left, want %d", table, c, want)
			}
		}
		// RunRetention keeping 0 keeps everything and returns.
		s.Retention.RunRetention(ctx, 0)
	})
}

func TestToolStatJSON(t *testing.T) {
	b, err := json.Marshal(audit.Stat{Tool: "t", Source: "mcp", Server: "s", Count: 4, Errors: 1, ErrorRate: 0.25,
		P50: 1500 * time.Millisecond, P95: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"tool":"t","source":"mcp","server":"s","count":4,"errors":1,"error_rate":0.25,"p50_ms":1500,"p95_ms":3000}`
	if string(b) != want {
		t.Errorf("got %s\nwant %s", b, want)
	}
}

// TestChatFilterPlanUsesIndex checks that filtering by chat id alone (bot audit --chat) is an
// index search.
func TestChatFilterPlanUsesIndex(t *testing.T) {
	s := newStore(t, DriverSQLite)
	seedLog(t, s, 20)
	plan := queryPlan(t, s, audit.Filter{ChatID: "c1", Limit: 50})
	if !strings.Contains(plan, "USING INDEX idx_tool_calls_chat (chat_id=?)") || strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("chat filter plan:\n%s", plan)
	}
}

// A text search keeps the calls whose tool name, arguments or result contain the text, case
// aside, and reads % and _ as themselves, not as patterns.
func TestToolCallsSearchTheirNamesArgumentsAndResults(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		s := newStore(t, driver)
		seedLog(t, s, 20)
		ctx := context.Background()
		for _, tc := range []struct {
			text string
			want int
		}{
			{"T1", 7},     // tool t1 (i%3 == 1), whatever the case
			{`"i":7}`, 1}, // the arguments of call 7 only
			{`"I":1`, 11}, // 1 and 10–19
			{"%", 0},      // no call holds a percent sign
			{"_", 0},      // nor an underscore
			{"nowhere", 0},
		} {
			n, err := s.ToolCalls.CountToolCalls(ctx, audit.Filter{Text: tc.text})
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.want {
				t.Errorf("search %q finds %d calls, want %d", tc.text, n, tc.want)
			}
		}
	})
}
