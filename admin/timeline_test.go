package admin

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/store"
	"relaybot/store/storetest"
)

// seedTimeline stores a finished turn of Telegram chat 42: a model call that asks for echo,
// echo waiting 300 ms for its approval, a second model call that answers, the answer's send,
// a 429 and the final edit. It returns the turn's id.
func seedTimeline(t *testing.T, st *store.Database) int64 {
	t.Helper()
	ctx := context.Background()
	conv, err := st.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "42"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := st.Turns.StartTurn(ctx, store.TurnStart{ConversationID: conv.ID, UserID: "u1",
		UserMessage: chat.Message{Role: store.RoleUser, Content: "echo hi"}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UTC()
	rec := audit.Record{TurnID: id, ConversationID: conv.ID, Platform: "telegram", ChatID: "42", UserID: "u1",
		Round: 1, ToolCallID: "call_1", ToolName: "echo", Source: audit.SourceMCP, Server: "kit",
		Arguments: `{"text":"hi"}`, StartedAt: t0.Add(210 * time.Millisecond), ApprovalRequired: true, TraceID: "0af7651916cd43dd8448eb211c80319c"}
	if err := st.ToolCalls.StartToolCall(ctx, &rec); err != nil {
		t.Fatal(err)
	}
	rec.Status, rec.Result, rec.Decision, rec.Approver = audit.StatusOK, "hi", "approved", "u1"
	rec.DecidedAt = t0.Add(510 * time.Millisecond)
	rec.FinishedAt = t0.Add(560 * time.Millisecond)
	rec.Duration = rec.FinishedAt.Sub(rec.StartedAt)
	if err := st.ToolCalls.FinishToolCall(ctx, &rec); err != nil {
		t.Fatal(err)
	}
	err = st.Turns.FinishTurn(ctx, store.TurnEnd{TurnID: id, Status: store.TurnOK, Model: "main", Rounds: 2, TokensIn: 30, TokensOut: 9,
		TraceID:  "0af7651916cd43dd8448eb211c80319c",
		Messages: []chat.Message{{Role: store.RoleAssistant, Content: "hi"}},
		LLMCalls: []chat.ModelCall{
			{Round: 1, Model: "main", Status: "ok", StartedAt: t0.Add(10 * time.Millisecond), TimeToFirstToken: 90 * time.Millisecond, Duration: 190 * time.Millisecond, TokensIn: 10, TokensOut: 4},
			{Round: 2, Model: "main", Status: "ok", StartedAt: t0.Add(570 * time.Millisecond), TimeToFirstToken: 60 * time.Millisecond, Duration: 150 * time.Millisecond, TokensIn: 20, CachedIn: 12, TokensOut: 5},
		},
		Deliveries: []store.Delivery{
			{Kind: "send", At: t0.Add(700 * time.Millisecond), TookMS: 20},
			{Kind: "rate_limited", At: t0.Add(730 * time.Millisecond), WaitMS: 1000, Final: true},
			{Kind: "edit", At: t0.Add(1760 * time.Millisecond), TookMS: 25, Final: true},
		}})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// The turn page draws the turn from the store: its model calls, the tool call with its approval
// wait, the deliveries and the 429 wait, in the order they began, in the browser.
func TestBrowserTurnTimelineShowsTheBarsInOrder(t *testing.T) {
	ctx := newBrowser(t)
	st := storetest.Open(t, storetest.SQLite)
	id := seedTimeline(t, st)
	_, ts := newTestServer(t, st, "")
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(tctx,
		chromedp.Navigate(fmt.Sprintf("%s/admin/turns/%d", ts.URL, id)),
		chromedp.WaitVisible(chromedp.CSS(`svg.timeline`)),
	); err != nil {
		t.Fatal(err)
	}
	labels, err := chromedp.Run(tctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('svg.timeline g.bar text.label')].map(e => e.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	xs, err := chromedp.Run(tctx, chromedp.Evaluate[[]float64](`[...document.querySelectorAll('svg.timeline g.bar rect.span')].map(e => e.getBBox().x)`))
	if err != nil {
		t.Fatal(err)
	}
	waiting, err := chromedp.Run(tctx, chromedp.Evaluate[int](`document.querySelectorAll('svg.timeline g.tool rect.waiting, svg.timeline g.model rect.waiting').length`))
	if err != nil {
		t.Fatal(err)
	}
	shoot(t, tctx, "turn-timeline")
	want := []string{"model main · round 1", "tool echo · round 1", "model main · round 2", "send", "429 wait", "edit (final)"}
	if strings.Join(labels, " | ") != strings.Join(want, " | ") {
		t.Fatalf("timeline bars %q, want %q", labels, want)
	}
	for i := 1; i < len(xs); i++ {
		if xs[i] < xs[i-1] {
			t.Fatalf("bar %q starts left of the one before it (x %v)", labels[i], xs)
		}
	}
	if waiting != 3 {
		t.Fatalf("%d waiting parts drawn, want 3 (two first-token waits, one approval)", waiting)
	}
}

// Every audit row links to its turn's timeline, /usage's chats to their turns, and those to the
// timeline; with otel.trace_url the rows and the turn link to the trace.
func TestTimelineIsReachableFromAuditRowsAndUsage(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	id := seedTimeline(t, st)
	_, ts := newTestServer(t, st, "", func(o *Options) { o.TraceURL = "https://tempo.example/trace/{trace_id}" })
	get := func(path string) string { return getPage(t, ts, path) }
	timeline := fmt.Sprintf(`href="/admin/turns/%d"`, id)
	trace := `href="https://tempo.example/trace/0af7651916cd43dd8448eb211c80319c"`
	if page := get("/admin/calls"); !strings.Contains(page, timeline) || !strings.Contains(page, trace) {
		t.Errorf("the audit log's rows do not link to the timeline (%s) and the trace", timeline)
	}
	if page := get("/admin/usage?since=24h"); !strings.Contains(page, `href="/admin/turns?chat=telegram%3a42"`) {
		t.Errorf("/usage's chat does not link to its turns:\n%s", page)
	}
	if page := get("/admin/turns?chat=telegram:42"); !strings.Contains(page, timeline) {
		t.Errorf("the chat's turns do not link to the timeline")
	}
	page := get(fmt.Sprintf("/admin/turns/%d", id))
	for _, want := range []string{trace, "approval approved", "retry after 1.0 s", "<svg class=\"timeline\"", "20 tokens in, 5 out · 12 in from the cache"} {
		if !strings.Contains(page, want) {
			t.Errorf("the turn page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script") {
		t.Errorf("the turn page needs a script")
	}
}

// A turn the model did not answer is marked so on its page and in its chat's turns, with the
// provider's cause: the admin sees why a message was left out of the conversation.
func TestATurnTheModelDidNotAnswerIsMarkedWithItsCause(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	ctx := context.Background()
	conv, err := st.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "42"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := st.Turns.StartTurn(ctx, store.TurnStart{ConversationID: conv.ID, UserID: "u1",
		UserMessage: chat.Message{Role: store.RoleUser, Content: "forbidden words"}})
	if err != nil {
		t.Fatal(err)
	}
	const cause = "status code: 400, message: Your request was rejected as a result of our safety system."
	if err := st.Turns.FinishTurn(ctx, store.TurnEnd{TurnID: id, Status: store.TurnError, Error: cause, Failure: chat.FailureRefused}); err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, st, "")
	page := getPage(t, ts, fmt.Sprintf("/admin/turns/%d", id))
	for _, want := range []string{"not answered: refused", "safety system"} {
		if !strings.Contains(page, want) {
			t.Errorf("the turn page lacks %q", want)
		}
	}
	if list := getPage(t, ts, "/admin/turns?chat=telegram:42"); !strings.Contains(list, "not answered: refused") {
		t.Errorf("the chat's turns do not mark the turn not answered")
	}
	var turns struct{ Items []turnJSON }
	if code := getJSONAny(t, ts, "/api/v1/turns?chat=telegram:42", &turns); code != 200 || len(turns.Items) != 1 ||
		turns.Items[0].Failure != chat.FailureRefused || turns.Items[0].Error != cause {
		t.Errorf("GET /api/v1/turns = %d %+v, want the turn with failure refused and its cause", code, turns.Items)
	}
}
