package auditquery_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/tools"
	"relaybot/tools/plugin"
	"relaybot/tools/plugin/auditquery"
	"relaybot/tools/toolstest"
)

// memLog is an audit.Log over a slice of records, filtering the way the store does.
type memLog struct {
	mu      sync.Mutex
	recs    []audit.Record
	queries []audit.Filter
	err     error
}

func (m *memLog) matching(f audit.Filter) []audit.Record {
	var out []audit.Record
	for _, r := range m.recs {
		if f.Tool != "" && r.ToolName != f.Tool || f.ChatID != "" && r.ChatID != f.ChatID || f.Platform != "" && r.Platform != f.Platform ||
			r.StartedAt.Before(f.Since) || len(f.Statuses) > 0 && !slices.Contains(f.Statuses, r.Status) {
			continue
		}
		out = append(out, r)
	}
	return out
}

func (m *memLog) ToolCalls(ctx context.Context, f audit.Filter) ([]audit.Record, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queries = append(m.queries, f)
	if m.err != nil {
		return nil, "", m.err
	}
	out := m.matching(f)
	slices.SortFunc(out, func(a, b audit.Record) int {
		if f.Order == audit.Slowest {
			return int(b.Duration - a.Duration)
		}
		return b.StartedAt.Compare(a.StartedAt)
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, "", nil
}

func (m *memLog) ToolCall(ctx context.Context, id int64) (audit.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.recs {
		if r.ID == id {
			return r, nil
		}
	}
	return audit.Record{}, audit.ErrNotFound
}

func (m *memLog) ToolStats(ctx context.Context, f audit.Filter) ([]audit.Stat, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queries = append(m.queries, f)
	if m.err != nil {
		return nil, m.err
	}
	by := map[string]*audit.Stat{}
	var total = map[string]time.Duration{}
	var out []audit.Stat
	for _, r := range m.matching(f) {
		s := by[r.ToolName]
		if s == nil {
			s = &audit.Stat{Tool: r.ToolName, Source: r.Source}
			by[r.ToolName] = s
		}
		s.Count++
		if r.Status == audit.StatusRunning {
			continue
		}
		s.Finished++
		if r.Status != audit.StatusOK {
			s.Errors++
		}
		total[r.ToolName] += r.Duration
		s.Max = max(s.Max, r.Duration)
	}
	for name, s := range by {
		if s.Finished > 0 {
			s.Avg = total[name] / time.Duration(s.Finished)
		}
		out = append(out, *s)
	}
	return out, nil
}

func fixture() *memLog {
	now := time.Now()
	rec := func(id int64, ago time.Duration, name string, st audit.Status, d time.Duration, errText string) audit.Record {
		return audit.Record{ID: id, ToolName: name, Source: audit.SourceNative, Status: st, Duration: d,
			StartedAt: now.Add(-ago), Platform: "telegram", ChatID: "42", Error: errText, Arguments: `{"url":"http://x"}`}
	}
	return &memLog{recs: []audit.Record{
		rec(1, 3*time.Hour, "fetch_url", audit.StatusOK, 900*time.Millisecond, ""),
		rec(2, 2*time.Hour, "fetch_url", audit.StatusTimeout, 15*time.Second, "fetch_url: timed out after 15s"),
		rec(3, 1*time.Hour, "current_time", audit.StatusOK, time.Millisecond, ""),
		rec(4, 30*time.Minute, "current_time", audit.StatusBadArgs, 0, "arguments are not a JSON object"),
		rec(5, 48*time.Hour, "fetch_url", audit.StatusError, 2*time.Second, "old failure"),
	}}
}

func newManager(t *testing.T, log audit.Log) *tools.Manager {
	t.Helper()
	l, err := plugin.NewLoader([]string{auditquery.Name}, plugin.Deps{Audit: log})
	if err != nil {
		t.Fatal(err)
	}
	m, err := tools.NewManager([]tools.Loader{l}, toolstest.NewRecorder(), tools.ManagerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAuditQuery(t *testing.T) {
	admin := tools.TurnInfo{TurnID: 1, Platform: "telegram", ChatID: "42", UserID: "7", Admin: true, Private: true}
	tests := []struct {
		name   string
		args   string
		status audit.Status
		want   []string
		reject []string
	}{
		{"recent default 24h", `{}`, audit.StatusOK,
			[]string{"Recent tool calls in the last 1d (4)", "#4 ", "#1 ", "error: arguments are not a JSON object"}, []string{"#5 ", "old failure"}},
		{"failures", `{"view":"failures"}`, audit.StatusOK,
			[]string{"Failed tool calls", "#2 ", "timeout", "#4 "}, []string{"#1 ", "#3 "}},
		{"failures of one tool over a week", `{"view":"failures","tool":"fetch_url","since":"7d"}`, audit.StatusOK,
			[]string{"in the last 7d (2)", "#2 ", "#5 ", "old failure"}, []string{"#4 "}},
		{"slowest calls first", `{"view":"slowest_calls","limit":2}`, audit.StatusOK,
			[]string{"Slowest tool calls in the last 1d (2):\n- #2 ", "15s", "\n- #1 "}, []string{"#3 "}},
		{"slowest tools", `{"view":"slowest_tools"}`, audit.StatusOK,
			[]string{"Slowest tools in the last 1d (by average duration):\n- fetch_url [native]: 2 calls, 1 failed, avg 7.95s, max 15s\n- current_time"}, nil},
		{"by status", `{"status":"ok","since":"90m"}`, audit.StatusOK,
			[]string{"#3 "}, []string{"#1 ", "#4 "}},
		{"nothing matches", `{"tool":"nope"}`, audit.StatusOK, []string{"Recent tool calls in the last 1d: none."}, nil},
		{"unknown view", `{"view":"everything"}`, audit.StatusError, []string{`err: audit_query: unknown view "everything"`}, nil},
		{"bad since", `{"since":"yesterday"}`, audit.StatusError, []string{`"yesterday" is not a duration`}, nil},
		{"unknown status", `{"status":"meh"}`, audit.StatusError, []string{`unknown status "meh"`}, nil},
		{"unknown argument", `{"sql":"drop table"}`, audit.StatusError, []string{`unknown field "sql"`}, nil},
	}
	m := newManager(t, fixture())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := m.ForTurn(admin, nil).Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{ID: "c", Name: auditquery.Name, Arguments: tc.args}})
			if out.Status != tc.status {
				t.Fatalf("status %s, want %s; content %q", out.Status, tc.status, out.Content)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.Content, w) {
					t.Errorf("content lacks %q:\n%s", w, out.Content)
				}
			}
			for _, r := range tc.reject {
				if strings.Contains(out.Content, r) {
					t.Errorf("content has %q:\n%s", r, out.Content)
				}
			}
		})
	}
}

func TestAuditQueryAdminsOnly(t *testing.T) {
	log := fixture()
	m := newManager(t, log)
	user := tools.TurnInfo{TurnID: 1, Platform: "telegram", ChatID: "42", UserID: "8"}
	turn := m.ForTurn(user, nil)
	if len(turn.Specs()) != 0 {
		t.Fatalf("non-admin turn offers %v", turn.Specs())
	}
	out := turn.Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{Name: auditquery.Name, Arguments: `{}`}})
	if out.Status != audit.StatusDenied {
		t.Fatalf("status %s, want denied", out.Status)
	}
	admin := m.ForTurn(tools.TurnInfo{Admin: true}, nil)
	if specs := admin.Specs(); len(specs) != 1 || !specs[0].AdminOnly {
		t.Fatalf("admin turn offers %v", specs)
	}

	// Defence in depth: the tool itself refuses a non-admin even when called directly.
	l, err := plugin.NewLoader([]string{auditquery.Name}, plugin.Deps{Audit: log})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Call(context.Background(), tools.Invocation{Name: auditquery.Name, Arguments: []byte(`{}`), Turn: user})
	if err == nil || !strings.Contains(err.Error(), "only for bot admins") {
		t.Fatalf("direct non-admin call: err %v", err)
	}
	if len(log.queries) != 0 {
		t.Fatalf("the audit log was read for a non-admin: %v", log.queries)
	}
}

// An admin asking in a group gets that group's calls only: the whole group reads the answer, and
// another chat's tool names and arguments are not theirs to see.
func TestAuditQueryInAGroupShowsOnlyThatChat(t *testing.T) {
	log := fixture()
	log.recs = append(log.recs, audit.Record{ID: 9, ToolName: "send_mail", Status: audit.StatusOK,
		StartedAt: time.Now().Add(-time.Minute), Platform: "telegram", ChatID: "99", Arguments: `{"to":"ceo@example.com"}`})
	m := newManager(t, log)
	group := tools.TurnInfo{TurnID: 1, Platform: "telegram", ChatID: "42", UserID: "7", Admin: true}
	private := group
	private.ChatID, private.Private = "7", true
	tests := []struct {
		name   string
		turn   tools.TurnInfo
		args   string
		status audit.Status
		want   string
		reject string
	}{
		{"group sees its own calls", group, `{}`, audit.StatusOK, "#4 ", "send_mail"},
		{"group cannot name another chat", group, `{"chat_id":"99"}`, audit.StatusError, "only in a private chat", "send_mail"},
		{"group gets no all-chat statistics", group, `{"view":"slowest_tools"}`, audit.StatusError, "only in a private chat", "send_mail"},
		{"private chat with an admin sees every chat", private, `{}`, audit.StatusOK, "send_mail", ""},
		{"a chat named as the pages print it", private, `{"chat_id":"telegram:99"}`, audit.StatusOK, "send_mail", "#4 "},
		{"group names itself as the pages print it", group, `{"chat_id":"telegram:42"}`, audit.StatusOK, "#4 ", "send_mail"},
		{"group cannot name another platform's chat", group, `{"chat_id":"discord:42"}`, audit.StatusError, "only in a private chat", "#4 "},
		{"a chat that is not one says why", private, `{"chat_id":"slack:99"}`, audit.StatusError, `"slack" names no platform`, "send_mail"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := m.ForTurn(tc.turn, nil).Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{ID: "c", Name: auditquery.Name, Arguments: tc.args}})
			if out.Status != tc.status || !strings.Contains(out.Content, tc.want) {
				t.Fatalf("got %s %q, want %s containing %q", out.Status, out.Content, tc.status, tc.want)
			}
			if tc.reject != "" && strings.Contains(out.Content, tc.reject) {
				t.Fatalf("the answer shows another chat's call:\n%s", out.Content)
			}
		})
	}
}

func TestAuditQueryStoreError(t *testing.T) {
	log := fixture()
	log.err = errors.New("database is locked")
	m := newManager(t, log)
	out := m.ForTurn(tools.TurnInfo{Admin: true}, nil).Execute(context.Background(), tools.Call{ToolCall: chat.ToolCall{Name: auditquery.Name}})
	if out.Status != audit.StatusError || !strings.Contains(out.Content, "reading the audit log: database is locked") {
		t.Fatalf("got %s %q", out.Status, out.Content)
	}
}

func TestAuditQueryNeedsAuditLog(t *testing.T) {
	_, err := plugin.NewLoader([]string{auditquery.Name}, plugin.Deps{})
	if err == nil || !strings.Contains(err.Error(), "audit_query needs the audit log") {
		t.Fatalf("err %v", err)
	}
}
