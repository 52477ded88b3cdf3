package admin

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/store"
	"relaybot/store/storetest"
)

// seedOverviewTurns writes answered turns at the given times (a model call each, a tool call,
// a reply whose first text came after 400 ms and final after 1.2 s) and one failed turn at failed.
func seedOverviewTurns(t *testing.T, st *store.Database, at []time.Time, failed time.Time) {
	t.Helper()
	ctx := context.Background()
	conv, err := st.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "100"})
	if err != nil {
		t.Fatal(err)
	}
	write := func(start time.Time, status chat.Status, tool audit.Status) {
		id, err := st.Turns.StartTurn(ctx, store.TurnStart{ConversationID: conv.ID, UserID: "u1", StartedAt: start,
			UserMessage: chat.Message{Role: store.RoleUser, Content: "hello"}})
		if err != nil {
			t.Fatal(err)
		}
		end := store.TurnEnd{TurnID: id, Status: status, Model: "mini",
			LLMCalls: []chat.ModelCall{{Model: "mini", Status: status, TokensIn: 1000, CachedIn: 400, TokensOut: 50, StartedAt: start}}}
		if status == chat.StatusOK {
			end.Deliveries = []store.Delivery{{Kind: "rate_limited", At: start.Add(100 * time.Millisecond), WaitMS: 300},
				{Kind: "send", At: start.Add(400 * time.Millisecond)}, {Kind: "edit", At: start.Add(1200 * time.Millisecond), Final: true}}
		} else {
			end.Failure = chat.FailureUnavailable
		}
		if err := st.Turns.FinishTurn(ctx, end); err != nil {
			t.Fatal(err)
		}
		rec := audit.Record{TurnID: id, ConversationID: conv.ID, Platform: "telegram", ChatID: "100", ToolName: "fetch_url", StartedAt: start}
		if err := st.ToolCalls.StartToolCall(ctx, &rec); err != nil {
			t.Fatal(err)
		}
		rec.Status, rec.Error = tool, "upstream said no"
		if err := st.ToolCalls.FinishToolCall(ctx, &rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range at {
		write(a, chat.StatusOK, audit.StatusOK)
	}
	write(failed, chat.StatusError, audit.StatusTimeout)
}

// The landing page is the overview: each chart draws the day's hours from the store, and each
// bar opens the turns or calls of its hour.
func TestOverviewChartsTheDayAndLinksEachBarToItsRows(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	now := time.Date(2026, 12, 7, 15, 30, 0, 0, time.UTC)
	seedOverviewTurns(t, st, []time.Time{now.Add(-2 * time.Hour), now.Add(-2*time.Hour + time.Minute)}, now.Add(-10*time.Minute))
	_, ts := newTestServer(t, st, testToken, func(o *Options) {
		o.Now = func() time.Time { return now }
		o.Prices = map[string]chat.Price{"mini": {In: 1, CachedIn: 0.1, Out: 2}}
	})
	c, _ := loggedIn(t, ts)
	code, body := get(t, c, ts.URL+"/admin/")
	if code != http.StatusOK || !strings.Contains(body, "<h1>Overview</h1>") {
		t.Fatalf("/admin/ = %d, want the overview:\n%s", code, body)
	}
	for _, id := range []string{"turns", "model-calls", "tokens", "cost", "errors", "first-text", "final", "tool-calls", "waits"} {
		if !strings.Contains(body, `id="chart-`+id+`-wide"`) || !strings.Contains(body, `id="chart-`+id+`-narrow"`) {
			t.Errorf("the overview draws no %s chart", id)
		}
	}
	// 13:00–14:00 had two answered turns; the bar of its turns opens exactly that hour's turns.
	bar := regexp.MustCompile(`<a href="([^"]+)"><rect class="bar ok"[^>]*data-value="2"><title>Dec 7 13:00–14:00 UTC · answered or stopped: 2</title>`).FindStringSubmatch(body)
	if bar == nil {
		t.Fatalf("no bar of the two answered turns of 13:00:\n%s", body)
	}
	link := strings.ReplaceAll(bar[1], "&amp;", "&")
	if want := "/admin/turns?since=2026-12-07T13%3A00%3A00Z&until=2026-12-07T14%3A00%3A00Z"; link != want {
		t.Errorf("the bar links to %s, want %s", link, want)
	}
	if code, page := get(t, c, ts.URL+link); code != http.StatusOK || strings.Count(page, `class="rowlink"`) != 2 {
		t.Errorf("the bar's page = %d with %d turns, want the 2 turns of 13:00", code, strings.Count(page, `class="rowlink"`))
	}
	// The failed tool call of 15:00 opens the calls that failed that hour.
	if !strings.Contains(body, `href="/admin/calls?since=2026-12-07T15%3A00%3A00Z&amp;status=failed&amp;until=2026-12-07T16%3A00%3A00Z"`) {
		t.Errorf("the errors chart does not link 15:00's failed tool calls")
	}
	for _, want := range []string{"p50 400 ms", "p50 1.2 s", "3000 in (1200 from the cache), 150 out", "unavailable 1", "600 ms waited in all"} {
		if !strings.Contains(body, want) {
			t.Errorf("the overview does not say %q", want)
		}
	}
	if code, body := get(t, c, ts.URL+"/admin/?range=month"); code != http.StatusOK || !strings.Contains(body, "Last 30 days") || !strings.Contains(body, "Dec 7 UTC · answered or stopped: 2") {
		t.Errorf("the month's overview = %d, want today's two answered turns in one bar", code)
	}
	if code, _ := get(t, c, ts.URL+"/admin/?range=year"); code != http.StatusBadRequest {
		t.Errorf("range=year = %d, want 400", code)
	}
}

// The API answers the same series, behind the token.
func TestOverviewAPIAnswersTheSeries(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	now := time.Date(2026, 12, 7, 15, 30, 0, 0, time.UTC)
	seedOverviewTurns(t, st, []time.Time{now.Add(-26 * time.Hour), now.Add(-time.Hour)}, now.Add(-time.Minute))
	_, ts := newTestServer(t, st, testToken, func(o *Options) { o.Now = func() time.Time { return now } })
	var ov overview
	if code := getJSON(t, ts, "/api/v1/overview", "", &ov); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", code)
	}
	if code := getJSON(t, ts, "/api/v1/overview?range=day", testToken, &ov); code != http.StatusOK {
		t.Fatalf("GET /api/v1/overview = %d", code)
	}
	if len(ov.Buckets) != 24 || !ov.Until.Equal(time.Date(2026, 12, 7, 16, 0, 0, 0, time.UTC)) || ov.Total.Turns != 2 {
		t.Fatalf("day = %d buckets until %s with %d turns, want 24 until 16:00 and the 2 turns of the last day", len(ov.Buckets), ov.Until, ov.Total.Turns)
	}
	last, before := ov.Buckets[23], ov.Buckets[22]
	if last.Turns != 1 || last.TurnErrors != 1 || last.ToolErrors != 1 || before.Turns != 1 || before.FirstText.P50 != 400 || before.Waits429 != 1 {
		t.Errorf("the last two hours = %+v and %+v, want a failed turn and an answered one (first text 400 ms, one 429)", last, before)
	}
	if code := getJSON(t, ts, "/api/v1/overview?range=month", testToken, &ov); code != http.StatusOK || len(ov.Buckets) != 30 || ov.Total.Turns != 3 || ov.Buckets[29].Turns != 2 {
		t.Errorf("month = %d, %d buckets, %d turns (today %d), want 30 days with 3 turns, 2 today", code, len(ov.Buckets), ov.Total.Turns, ov.Buckets[29].Turns)
	}
	if code := getJSON(t, ts, "/api/v1/overview?since=1h", testToken, nil); code != http.StatusBadRequest {
		t.Errorf("an unknown parameter = %d, want 400", code)
	}
}
