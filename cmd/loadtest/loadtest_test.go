package main

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"relaybot/internal/testkit/llm"
	tgkit "relaybot/internal/testkit/telegram"
)

// TestMain lets the test binary play the baseline child, as the loadtest binary does.
func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "baseline" {
		if err := baselineMain(context.Background(), os.Args[1:], os.Stdout); err != nil {
			os.Stderr.WriteString("baseline: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// builtBot skips the test in -short mode (it builds and runs the bot) and returns a context of
// two minutes and a bot built from the module.
func builtBot(t *testing.T) (context.Context, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the bot")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	bin, err := buildBot(ctx, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ctx, bin
}

// TestTinyLoad runs the whole tool end to end against a freshly built bot: three chats, two turns
// each, half of the turns calling a tool, and checks what a user of the report relies on: every
// answer arrived whole, no 429, every turn and audit row in the database, the baseline measured.
func TestTinyLoad(t *testing.T) {
	ctx, bin := builtBot(t)
	for _, tc := range []tinyCase{
		{"native tool", 0, "current_time", false, 0, "", 1},
		{"mcp tool", 20 * time.Millisecond, "sleep", true, 0, "", 1},
		{"paid budget of 1000 on postgres", 0, "current_time", false, 1000, "postgres", 1},
		{"two replicas on postgres", 0, "current_time", false, 1000, "postgres", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.db == "postgres" && os.Getenv("BOT_TEST_POSTGRES_DSN") == "" {
				t.Skip("PostgreSQL not tested: set BOT_TEST_POSTGRES_DSN")
			}
			prof := ""
			if tc.profile {
				prof = filepath.Join(t.TempDir(), "prof")
			}
			// A chat's next message may land on another replica, which does not know the
			// chat's budget the first one spent (per-chat budgets are per replica): a user's
			// pause lets Telegram's per-chat bucket refill.
			think := time.Duration(0)
			if tc.replicas > 1 {
				think = 3 * time.Second
			}
			rep, err := Run(ctx, Options{
				Chats: 3, Turns: 2, Ramp: 100 * time.Millisecond, Think: think,
				Rate: 400, Tokens: 20, ToolShare: 0.5, ToolLatency: tc.latency,
				Bot: bin, Baseline: true, ProfileDir: prof, WorkDir: t.TempDir(),
				TurnTimeout:     30 * time.Second,
				GlobalPerSecond: tc.global, DB: tc.db, PostgresDSN: os.Getenv("BOT_TEST_POSTGRES_DSN"),
				Replicas: tc.replicas,
			})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			checkTinyLoad(t, tc, rep)
		})
	}
}

// tinyCase is a run of TestTinyLoad.
type tinyCase struct {
	name    string
	latency time.Duration
	tool    string
	profile bool // a CPU profile slice lasts 5 s: only once
	global  int
	db      string
	// replicas > 1 run behind the round-robin webhook proxy.
	replicas int
}

// checkTinyLoad checks what a user of TestTinyLoad's report relies on.
func checkTinyLoad(t *testing.T, tc tinyCase, rep *Report) {
	t.Helper()
	if rep.TurnsSent != 6 || rep.TurnsDone != 6 || rep.TurnsTimedOut != 0 {
		t.Errorf("turns sent/done/timed out = %d/%d/%d, want 6/6/0", rep.TurnsSent, rep.TurnsDone, rep.TurnsTimedOut)
	}
	if rep.HTTP429 != 0 || rep.FailedCalls != 0 || rep.LateCalls != 0 {
		t.Errorf("429s %d, failed calls %d, calls after the final text %d; want none", rep.HTTP429, rep.FailedCalls, rep.LateCalls)
	}
	db := rep.DB
	if db.TurnsExpected != 6 || db.Turns != 6 || db.TurnsOK != 6 {
		t.Errorf("db turns expected/in db/ok = %d/%d/%d, want 6/6/6 (%v)", db.TurnsExpected, db.Turns, db.TurnsOK, db.TurnStatuses)
	}
	if db.AuditExpected != 3 || db.AuditRows != 3 || db.AuditOK != 3 {
		t.Errorf("audit rows expected/in db/ok = %d/%d/%d, want 3/3/3", db.AuditExpected, db.AuditRows, db.AuditOK)
	}
	if want := cmp.Or(tc.db, "sqlite"); rep.Database != want || rep.GlobalPerSecond != cmp.Or(tc.global, 30) {
		t.Errorf("ran on %s at %d/s, want %s at %d/s", rep.Database, rep.GlobalPerSecond, want, cmp.Or(tc.global, 30))
	}
	if rep.AnswersWhole != 6 || rep.AnswersMissing != 0 || rep.AnswersDuplicated != 0 || rep.Answer.N != 6 {
		t.Errorf("answers whole/missing/duplicated = %d/%d/%d (latency samples %d), want 6/0/0 (6)", rep.AnswersWhole, rep.AnswersMissing, rep.AnswersDuplicated, rep.Answer.N)
	}
	wantMode := "polling"
	if tc.replicas > 1 {
		wantMode = "webhook"
	}
	if rep.Replicas != tc.replicas || rep.Telegram != wantMode || len(rep.ReplicaCPUSeconds) != tc.replicas {
		t.Errorf("ran %d replicas (%d cpu figures) with Telegram %s, want %d with %s", rep.Replicas, len(rep.ReplicaCPUSeconds), rep.Telegram, tc.replicas, wantMode)
	}
	if rep.Tool != tc.tool {
		t.Errorf("tool = %q, want %q", rep.Tool, tc.tool)
	}
	// 6 answers of 20 tokens, 3 tool calls of one chunk each.
	if rep.Streams != 9 || rep.StreamedTokens != 123 {
		t.Errorf("model streams/tokens = %d/%d, want 9/123", rep.Streams, rep.StreamedTokens)
	}
	if rep.FirstText.N != 6 || rep.Final.N != 6 {
		t.Errorf("latency samples first/final = %d/%d, want 6/6", rep.FirstText.N, rep.Final.N)
	}
	if rep.Baseline == nil || rep.Baseline.Tokens != int64(rep.Baseline.Streams*20) || rep.CPURatio <= 0 {
		t.Errorf("baseline = %+v, ratio %v; want every token read and a ratio", rep.Baseline, rep.CPURatio)
	}
	if rep.IdleAnonMB <= 0 || rep.IdleAnonMB >= rep.IdleRSSMB {
		t.Errorf("idle memory %.1f MB anonymous of %.1f MB RSS; want the bot's own part, above 0 and below RSS", rep.IdleAnonMB, rep.IdleRSSMB)
	}
	if rep.GoroutinesIdle <= 0 || rep.GoroutinesAfter <= 0 {
		t.Errorf("goroutines idle/after = %d/%d, want both read from the bot", rep.GoroutinesIdle, rep.GoroutinesAfter)
	}
	if tc.profile && len(rep.Profiles) < 3 {
		t.Errorf("profiles = %q, want the cpu, heap and goroutine files", rep.Profiles)
	}
	var text strings.Builder
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "turns 6/6 expected (6 ok), audit rows 3/3 expected (3 ok)") {
		t.Errorf("text report lacks the database line:\n%s", text.String())
	}
}

func TestLatency(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := latency(ds)
	want := Latency{N: 100, P50: 50, P95: 95, P99: 99, Max: 100}
	if got != want {
		t.Errorf("latency = %+v, want %+v", got, want)
	}
	if got := latency(nil); got != (Latency{}) {
		t.Errorf("latency(nil) = %+v, want zero", got)
	}
}

func TestBudgetFree(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	many := make([]int, 30)
	for i := range many {
		many[i] = 9100 + i*10
	}
	for _, tc := range []struct {
		name    string
		chat    []time.Time
		global  []time.Time
		pending int
		budget  int
		want    bool
	}{
		{"quiet", nil, nil, 0, 30, true},
		{"a final queued ahead", nil, nil, 1, 30, false},
		{"two in the chat's window", at(7500, 9000), at(7500, 9000), 0, 30, true},
		{"three in the chat's window", at(7100, 8000, 9000), at(7100, 8000, 9000), 0, 30, false},
		{"three, one just outside", at(7000, 8000, 9000), at(7000, 8000, 9000), 0, 30, true},
		{"global second full", nil, at(many...), 0, 30, false},
		{"thirty in the second leave a paid budget of 1000 free", nil, at(many...), 0, 1000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := budgetFree(tc.chat, tc.global, t0.Add(10*time.Second), tc.pending, tc.budget); got != tc.want {
				t.Errorf("budgetFree = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPendingFinals(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	// Turn 0: last token at 0, final at 10. Turn 1: 2 → 3 (turn 0 queued ahead). Turn 2: 11 → 12.
	got := pendingFinals([]time.Time{s(0), s(2), s(11)}, []time.Time{s(10), s(3), s(12)})
	if want := []int{0, 1, 0}; !slices.Equal(got, want) {
		t.Errorf("pendingFinals = %v, want %v", got, want)
	}
}

func TestTurnOf(t *testing.T) {
	req := llm.Request{Messages: []llm.Message{
		{Role: "system", Content: "sys"},
		{Role: "user", Content: userText(1, 0)},
		{Role: "assistant", Content: "old"},
		{Role: "user", Content: userText(12, 3)},
		{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "c", Name: "current_time"}}},
		{Role: "tool", ToolCallID: "c", Content: "now"},
	}}
	if chat, turn, ok := turnOf(req); !ok || chat != 12 || turn != 3 {
		t.Errorf("turnOf = %d, %d, %v; want 12, 3, true", chat, turn, ok)
	}
	base := llm.Request{Messages: []llm.Message{{Role: "user", Content: "baseline 7"}}}
	if _, _, ok := turnOf(base); ok {
		t.Error("turnOf found a turn in a baseline request")
	}
}

func TestRequestsWithoutToolsGetTextAndNoToolCallIsCounted(t *testing.T) {
	rec := newRecorder(1, "tok ", func(int) string { return surfacePrivate })
	always := llm.Generator(llm.Generate{Tokens: 2, ToolShare: 1})
	plain := llm.Generator(llm.Generate{Tokens: 2})
	h := rec.handler(always, plain)
	msgs := []llm.Message{{Role: "user", Content: userText(1, 0)}}
	for _, tc := range []struct {
		name      string
		tools     []string
		wantCalls bool
	}{
		{"a turn's request offering tools", []string{"current_time"}, true},
		{"a summary request offering none", nil, false},
	} {
		before := rec.toolReplies.Load()
		rep := h(llm.Request{Messages: msgs, Tools: tc.tools})
		calls := len(rep.Chunks) > 0 && len(rep.Chunks[0].ToolCalls) > 0
		if calls != tc.wantCalls || (rec.toolReplies.Load() > before) != tc.wantCalls {
			t.Errorf("%s: tool calls %v, counted %d; want %v", tc.name, calls, rec.toolReplies.Load()-before, tc.wantCalls)
		}
	}
}

func TestKeepAliveGoroutines(t *testing.T) {
	dump := "goroutine profile: total 9\n" +
		"3 @ 0x1 0x2\n#\t0x1\tnet/http.(*persistConn).readLoop+0x171\n\n" +
		"3 @ 0x1 0x3\n#\t0x1\tnet/http.(*persistConn).writeLoop+0xe5\n\n" +
		"3 @ 0x1 0x4\n#\t0x1\trelaybot/store.(*auditWriter).run+0x124\n"
	if got := keepAliveGoroutines([]byte(dump)); got != 6 {
		t.Errorf("keepAliveGoroutines = %d, want 6", got)
	}
}

func TestMetricGoroutines(t *testing.T) {
	tests := []struct {
		name, exposition string
		want             int
		ok               bool
	}{
		{"present", "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 42\ngo_gc_cycles_total 3\n", 42, true},
		{"not the first", "relaybot_turns_total{outcome=\"ok\"} 2\ngo_goroutines 7\n", 7, true},
		{"a longer name only", "go_goroutines_total 5\n", 0, false},
		{"with a replica's instance label", "go_goroutines{instance=\"vm-1-ab\"} 9\n", 9, true},
		{"absent", "relaybot_turns_total{outcome=\"ok\"} 2\n", 0, false},
		{"garbled", "go_goroutines many\n", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := metricGoroutines([]byte(tc.exposition))
			if (err == nil) != tc.ok || n != tc.want {
				t.Errorf("metricGoroutines = %d, %v; want %d (ok %v)", n, err, tc.want, tc.ok)
			}
		})
	}
}

func TestReplicaCounts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"1", []int{1}, true},
		{"3", []int{1, 3}, true}, // compared with one replica
		{"1,2,3", []int{1, 2, 3}, true},
		{"2,1", []int{1, 2}, true},
		{"2,2", nil, false},
		{"0", nil, false},
		{"two", nil, false},
	} {
		got, err := replicaCounts(tc.in)
		if (err == nil) != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("replicaCounts(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestMoreThanOneReplicaNeedsPostgres(t *testing.T) {
	o := Options{Chats: 1, Turns: 1, Replicas: 2}
	if err := o.defaults(); err == nil || !strings.Contains(err.Error(), "postgres") {
		t.Errorf("two replicas on SQLite: %v, want an error naming postgres", err)
	}
}

// The recorder takes a draft as text the user sees, never as the final text: the first visible
// text is the first draft with text (not the "Thinking…" placeholder), the first text and the
// final are the message sent.
func TestRecorderCountsDraftsAsVisibleNotFinal(t *testing.T) {
	rec := newRecorder(2, "tok tok", func(i int) string { return []string{surfacePrivate, surfaceGroup}[i] })
	if rec.chats[1].id != -(baseChatID+1) || rec.chatOf(baseChatID+1) != nil || rec.chatOf(-(baseChatID+1)) != rec.chats[1] {
		t.Fatalf("group chat id %d; chatOf does not tell a group from the private chat of its index", rec.chats[1].id)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	c := rec.chats[0]
	done := c.begin(0, t0)
	for _, call := range []tgkit.Call{
		{Method: "sendMessageDraft", Time: at(100), Params: map[string]string{"text": ""}},
		{Method: "sendMessageDraft", Time: at(400), Params: map[string]string{"text": "tok"}},
		{Method: "sendMessageDraft", Time: at(1400), Params: map[string]string{"text": "tok tok"}},
		{Method: "sendMessage", Time: at(2100), Params: map[string]string{"text": "tok tok"}},
	} {
		call.Code, call.ChatID = 200, c.id
		rec.onCall(call)
	}
	select {
	case <-done:
	default:
		t.Fatal("the message with the whole answer did not end the turn")
	}
	res := c.end(false)
	if res.visible != at(400) || res.first != at(2100) || res.final != at(2100) {
		t.Errorf("visible %v, first %v, final %v; want 400 ms, 2.1 s, 2.1 s", res.visible.Sub(t0), res.first.Sub(t0), res.final.Sub(t0))
	}
	if res.drafts != 3 || res.sends != 1 || res.edits != 0 {
		t.Errorf("drafts/sends/edits = %d/%d/%d, want 3/1/0", res.drafts, res.sends, res.edits)
	}
	var rep Report
	rep.fill(rec, []turnResult{res}, time.Second, 0, 0, 0, 1)
	if rep.FirstVisible.P50 != 400 || rep.FirstText.P50 != 2100 || rep.DraftsPerReply != 3 {
		t.Errorf("report: first visible %v ms, first text %v ms, %v drafts per reply; want 400, 2100, 3", rep.FirstVisible.P50, rep.FirstText.P50, rep.DraftsPerReply)
	}
	if len(rep.Surfaces) != 2 || rep.Surfaces[0].Surface != surfacePrivate || rep.Surfaces[0].Turns != 1 || rep.Surfaces[1].Turns != 0 {
		t.Errorf("surfaces %+v, want private with the turn and group with none", rep.Surfaces)
	}
}

// A run whose previews are drafts shows the first visible text well before the final one, in
// private chats; in groups the previews are a message and its edits, and the first visible text
// is the first message. Both surfaces are reported apart, with their previews per reply.
func TestFirstVisibleTextPerSurface(t *testing.T) {
	ctx, bin := builtBot(t)
	// 40 tokens at 16/s: every answer streams for 2.5 s. A user's pause of 2 s lets the chat's
	// budget (1 request a second) refill before the next message, as it does for a reader.
	rep, err := Run(ctx, Options{
		Chats: 4, ChatType: "mix", Turns: 2, Ramp: 100 * time.Millisecond, Think: 2 * time.Second,
		Rate: 16, Tokens: 40, Bot: bin, WorkDir: t.TempDir(), TurnTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.ChatType != "mix" || len(rep.Surfaces) != 2 {
		t.Fatalf("chat type %q, surfaces %+v; want mix with private and group", rep.ChatType, rep.Surfaces)
	}
	private, group := rep.Surfaces[0], rep.Surfaces[1]
	if private.Surface != surfacePrivate || group.Surface != surfaceGroup || private.Turns != 4 || group.Turns != 4 {
		t.Fatalf("surfaces %+v, want 4 answers in the private chats and 4 in the groups", rep.Surfaces)
	}
	if private.DraftsPerReply < 1 || private.FirstVisible.N != 4 {
		t.Errorf("private chat: %.1f drafts per reply, %d first-visible samples; want drafts in every answer", private.DraftsPerReply, private.FirstVisible.N)
	}
	if private.FirstVisible.Max+1000 > private.Answer.P50 {
		t.Errorf("private chat: first visible text at most %.0f ms, whole answer p50 %.0f ms; want the drafts a second or more before the final",
			private.FirstVisible.Max, private.Answer.P50)
	}
	if group.DraftsPerReply != 0 || group.FirstVisible != group.FirstText || group.EditsPerReply+group.SendsPerReply < 1 {
		t.Errorf("group: %+v; want no drafts, the first visible text the first send or edit", group)
	}
	if rep.FirstVisible.N != 8 || rep.Answer.N != 8 || rep.HTTP429 != 0 || rep.AnswersWhole != 8 {
		t.Errorf("first visible n=%d, answers n=%d, 429s %d, whole %d; want 8, 8, 0, 8", rep.FirstVisible.N, rep.Answer.N, rep.HTTP429, rep.AnswersWhole)
	}
	var text strings.Builder
	rep.WriteText(&text)
	for _, want := range []string{"first visible:", "private chats:", "group chats:"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
}

// dropFromPageCache leaves none of a file's pages cached (a file just written is dirty: it is
// written back first), so a bot started after it reads its binary from disk as a fresh deploy
// does, and its idle figure does not depend on what wrote the binary.
func TestDropFromPageCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil || st.Type == unix.TMPFS_MAGIC {
		t.Skipf("the temporary folder is on tmpfs (or unknown: %v), whose pages are the file itself", err)
	}
	resident := func() int {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m, err := unix.Mmap(int(f.Fd()), 0, 1<<20, unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(m)
		vec := make([]byte, (1<<20)/os.Getpagesize())
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatal(errno)
		}
		n := 0
		for _, v := range vec {
			n += int(v & 1)
		}
		return n
	}
	if n := resident(); n == 0 {
		t.Fatal("a file just written has no page cached: the check below could not fail")
	}
	if err := dropFromPageCache(path); err != nil {
		t.Fatal(err)
	}
	if n := resident(); n != 0 {
		t.Errorf("%d pages still cached after dropFromPageCache, want 0", n)
	}
}
