package store

import (
	"context"
	"testing"
	"time"

	"relaybot/audit"
	"relaybot/chat"
)

// overviewTurn is one turn to seed: when it started, how it ended, its reply's first text and
// final message after the start (0: none), its 429 waits, and one model call's tokens.
type overviewTurn struct {
	at              time.Time
	status          chat.Status
	failure         chat.Failure
	first, final    time.Duration
	waits           []time.Duration
	in, cached, out int
	tool            audit.Status // "" for no tool call
}

func seedOverview(t *testing.T, s *Database, turns []overviewTurn) {
	t.Helper()
	ctx := context.Background()
	c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "42"})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range turns {
		id, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserID: "ann", StartedAt: u.at,
			UserMessage: chat.Message{Role: "user", Content: "q"}})
		if err != nil {
			t.Fatal(err)
		}
		var ds []Delivery
		for _, w := range u.waits {
			ds = append(ds, Delivery{Kind: "rate_limited", At: u.at.Add(time.Millisecond), WaitMS: w.Milliseconds()})
		}
		if u.first > 0 {
			ds = append(ds, Delivery{Kind: "send", At: u.at.Add(u.first)})
		}
		if u.final > 0 {
			ds = append(ds, Delivery{Kind: "edit", At: u.at.Add(u.final), Final: true})
		}
		calls := []chat.ModelCall{{Model: "mini", Status: "ok", TokensIn: u.in, CachedIn: u.cached, TokensOut: u.out, StartedAt: u.at}}
		if u.status == chat.StatusError {
			calls[0].Status = chat.StatusError
		}
		if err := s.Turns.FinishTurn(ctx, TurnEnd{TurnID: id, Status: u.status, Failure: u.failure,
			LLMCalls: calls, Deliveries: ds}); err != nil {
			t.Fatal(err)
		}
		if u.tool != "" {
			rec := audit.Record{TurnID: id, Platform: "telegram", ChatID: "42", ToolName: "fetch_url", StartedAt: u.at}
			if err := s.ToolCalls.StartToolCall(ctx, &rec); err != nil {
				t.Fatal(err)
			}
			rec.Status = u.tool
			if err := s.ToolCalls.FinishToolCall(ctx, &rec); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The overview puts each turn, model call and tool call in the hour it started, prices the
// tokens with the cached ones apart, and ranks the replies' times per hour.
func TestOverviewSumsEachHourFromTheRows(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		s := newStore(t, driver)
		base := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
		turns := overviewHours(base)
		seedOverview(t, s, turns)
		prices := map[string]chat.Price{"mini": {In: 1, CachedIn: 0.1, Out: 4}}
		ov, err := s.Usage.Overview(context.Background(), OverviewFilter{Since: base, Until: base.Add(3 * time.Hour), Step: time.Hour, Prices: prices})
		if err != nil {
			t.Fatal(err)
		}
		checkOverviewHours(t, ov, base)
	})
}

// overviewHours are the turns TestOverviewSumsEachHourFromTheRows seeds: 20 in the hour from
// base, two two hours later, one before base.
func overviewHours(base time.Time) []overviewTurn {
	var turns []overviewTurn
	for i := range 20 { // hour 0: 20 turns, first text at 100..2000 ms, final at twice that
		turns = append(turns, overviewTurn{at: base.Add(time.Duration(i) * time.Minute), status: chat.StatusOK,
			first: time.Duration(i+1) * 100 * time.Millisecond, final: time.Duration(i+1) * 200 * time.Millisecond,
			in: 1000, cached: 600, out: 100, tool: audit.StatusOK})
	}
	turns = append(turns,
		overviewTurn{at: base.Add(2*time.Hour + time.Minute), status: chat.StatusError, failure: chat.FailureUnavailable, in: 10, tool: audit.StatusTimeout},
		overviewTurn{at: base.Add(2*time.Hour + 2*time.Minute), status: chat.StatusOK, first: time.Second, final: 3 * time.Second,
			waits: []time.Duration{2 * time.Second, 500 * time.Millisecond}, in: 10, out: 10, tool: audit.StatusError},
		overviewTurn{at: base.Add(-time.Minute), status: chat.StatusOK, in: 5}, // before the window
	)
	return turns
}

// checkOverviewHours checks the overview of TestOverviewSumsEachHourFromTheRows's turns, hour
// by hour from base.
func checkOverviewHours(t *testing.T, ov Overview, base time.Time) {
	t.Helper()
	got, all := ov.Buckets, ov.Total
	if all.Turns != 22 || all.TurnErrors != 1 || all.ToolErrors != 2 || all.CachedIn != 12_000 || all.Waits429 != 2 ||
		all.FirstText != (Percentiles{N: 21, P50: 1000, P95: 1900}) || all.Final != (Percentiles{N: 21, P50: 2200, P95: 3800}) {
		t.Errorf("the three hours' total = %+v, want 22 turns, 1 failed, 2 tool errors, 12000 cached, 2 waits, first text 1000/1900 and final 2200/3800 of 21", all)
	}
	if len(got) != 3 || !got[1].Start.Equal(base.Add(time.Hour)) || !got[2].End.Equal(base.Add(3*time.Hour)) {
		t.Fatalf("buckets = %+v, want three hours from %s", got, base)
	}
	h0, h1, h2 := got[0], got[1], got[2]
	if h0.Turns != 20 || h0.ModelCalls != 20 || h0.TokensIn != 20_000 || h0.CachedIn != 12_000 || h0.TokensOut != 2000 {
		t.Errorf("hour 0 = %d turns, %d calls, %d in (%d cached), %d out; want 20, 20, 20000 (12000), 2000",
			h0.Turns, h0.ModelCalls, h0.TokensIn, h0.CachedIn, h0.TokensOut)
	}
	wantCost := (8000*1 + 12000*0.1 + 2000*4) / 1e6
	if d := h0.Cost - wantCost; d > 1e-9 || d < -1e-9 {
		t.Errorf("hour 0 cost = %v, want %v (cached tokens at their own price)", h0.Cost, wantCost)
	}
	if h0.FirstText != (Percentiles{N: 20, P50: 1000, P95: 1900}) || h0.Final != (Percentiles{N: 20, P50: 2000, P95: 3800}) {
		t.Errorf("hour 0 first text %+v, final %+v; want p50 1000/p95 1900 and 2000/3800 of 20", h0.FirstText, h0.Final)
	}
	if h0.ToolCalls[audit.StatusOK] != 20 || h0.ToolErrors != 0 || h0.TurnErrors != 0 {
		t.Errorf("hour 0 tools %v (%d errors), %d turn errors; want 20 ok and no errors", h0.ToolCalls, h0.ToolErrors, h0.TurnErrors)
	}
	if h1.Turns != 0 || h1.ModelCalls != 0 || len(h1.ToolCalls) != 0 || h1.FirstText.N != 0 {
		t.Errorf("hour 1 = %+v, want empty", h1)
	}
	if h2.Turns != 2 || h2.TurnErrors != 1 || h2.Failures[chat.FailureUnavailable] != 1 || h2.ModelErrors != 1 {
		t.Errorf("hour 2 = %d turns, %d errors %v, %d model errors; want 2, 1 unavailable, 1", h2.Turns, h2.TurnErrors, h2.Failures, h2.ModelErrors)
	}
	if h2.ToolErrors != 2 || h2.ToolCalls[audit.StatusTimeout] != 1 || h2.ToolCalls[audit.StatusError] != 1 {
		t.Errorf("hour 2 tool calls %v (%d errors), want a timeout and an error", h2.ToolCalls, h2.ToolErrors)
	}
	if h2.Waits429 != 2 || h2.Waited429MS != 2500 || h2.FirstText != (Percentiles{N: 1, P50: 1000, P95: 1000}) {
		t.Errorf("hour 2 waited %d 429s for %d ms, first text %+v; want 2 for 2500 ms and 1000 ms", h2.Waits429, h2.Waited429MS, h2.FirstText)
	}
}

func TestOverviewRefusesAWindowItCannotCut(t *testing.T) {
	s := newStore(t, DriverSQLite)
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	for _, f := range []OverviewFilter{
		{Since: now, Until: now, Step: time.Hour},
		{Since: now, Until: now.Add(time.Hour)},
		{Since: now.AddDate(-1, 0, 0), Until: now, Step: time.Hour},
	} {
		if _, err := s.Usage.Overview(context.Background(), f); err == nil {
			t.Errorf("Overview(%v to %v by %v) = nil error, want a refusal", f.Since, f.Until, f.Step)
		}
	}
}

// TestTheOverviewReadsTheRollUpAndItsLateRows: once the hours are rolled up, the overview of
// those hours comes from the roll-up (it stands after the rows are gone) with the same sums,
// prices and percentiles as from the rows; a pass run again writes the same; a turn added to
// an hour after it was rolled is counted by the next pass (the last hours are rolled again);
// the hours after the rolled edge still come from the rows.
func TestTheOverviewReadsTheRollUpAndItsLateRows(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		base := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
		seedOverview(t, s, overviewHours(base))
		prices := map[string]chat.Price{"mini": {In: 1, CachedIn: 0.1, Out: 4}}
		window := OverviewFilter{Since: base, Until: base.Add(3 * time.Hour), Step: time.Hour, Prices: prices}
		for range 2 {
			if done, err := s.Usage.RollUp(ctx, base.Add(3*time.Hour+time.Minute)); err != nil || !done {
				t.Fatalf("RollUp = %v, %v; want rolled up to now", done, err)
			}
		}
		if n := count(t, s, "overview_hours", ""); n != 3 { // the hour before base, hour 0 and hour 2
			t.Errorf("the roll-up keeps %d hours, want 3 (empty hours left out)", n)
		}
		late := overviewTurn{at: base.Add(2*time.Hour + 30*time.Minute), status: chat.StatusOK, first: 500 * time.Millisecond, in: 7}
		seedOverview(t, s, []overviewTurn{late})
		ov, err := s.Usage.Overview(ctx, window)
		if err != nil {
			t.Fatal(err)
		}
		if ov.Buckets[2].Turns != 2 {
			t.Errorf("before the next pass hour 2 reads %d turns from the roll-up, want the 2 rolled", ov.Buckets[2].Turns)
		}
		if _, err := s.Usage.RollUp(ctx, base.Add(3*time.Hour+6*time.Minute)); err != nil {
			t.Fatal(err)
		}
		ov, err = s.Usage.Overview(ctx, window)
		if err != nil {
			t.Fatal(err)
		}
		if ov.Buckets[2].Turns != 3 || ov.Buckets[2].TokensIn != 27 {
			t.Errorf("after the next pass hour 2 = %d turns, %d tokens in; want the late turn counted (3, 27)", ov.Buckets[2].Turns, ov.Buckets[2].TokensIn)
		}
		if err := s.w.Exec(`DELETE FROM turns WHERE id = (SELECT MAX(id) FROM turns)`).Error; err != nil {
			t.Fatal(err)
		}
		if _, err := s.Usage.RollUp(ctx, base.Add(3*time.Hour+12*time.Minute)); err != nil {
			t.Fatal(err)
		}
		// The rows gone, the hours stand: read from the roll-up.
		for _, table := range []string{"tool_calls", "llm_calls", "turns"} {
			if err := s.w.Exec(`DELETE FROM ` + table).Error; err != nil {
				t.Fatal(err)
			}
		}
		ov, err = s.Usage.Overview(ctx, window)
		if err != nil {
			t.Fatal(err)
		}
		checkOverviewHours(t, ov, base)
		// A window reaching past the rolled edge reads the rest from the rows.
		seedOverview(t, s, []overviewTurn{{at: base.Add(3*time.Hour + 20*time.Minute), status: chat.StatusOK, in: 3}})
		ov, err = s.Usage.Overview(ctx, OverviewFilter{Since: base, Until: base.Add(4 * time.Hour), Step: time.Hour, Prices: prices})
		if err != nil {
			t.Fatal(err)
		}
		if ov.Total.Turns != 23 || ov.Buckets[3].Turns != 1 {
			t.Errorf("past the rolled edge: %d turns in all, %d in hour 3; want 23 and 1", ov.Total.Turns, ov.Buckets[3].Turns)
		}
		// Retention forgets the hours wholly before its cutoff, as it does their rows.
		if _, err := s.Retention.Sweep(ctx, base.Add(time.Hour+time.Minute)); err != nil {
			t.Fatal(err)
		}
		if n := count(t, s, "overview_hours", ""); n != 1 {
			t.Errorf("after retention the roll-up keeps %d hours, want hour 2 alone", n)
		}
	})
}

// TestReplicasRollingUpAtOnceWriteTheHoursOnce: two replicas on one PostgreSQL database roll
// the same hours at the same time, again and again; the roll-up ends as one pass would have
// written it (no hour twice, none torn), and reads as the rows do.
func TestReplicasRollingUpAtOnceWriteTheHoursOnce(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		if driver != DriverPostgres {
			t.Skip("replicas share PostgreSQL")
		}
		ctx := context.Background()
		opts := testOptions(t, driver)
		a, b := openTest(t, opts), openTest(t, opts)
		base := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
		seedOverview(t, a, overviewHours(base))
		errs := make(chan error, 16)
		for i := range 16 {
			s := a
			if i%2 == 1 {
				s = b
			}
			go func() {
				_, err := s.Usage.RollUp(ctx, base.Add(3*time.Hour+time.Duration(i)*time.Second))
				errs <- err
			}()
		}
		for range 16 {
			if err := <-errs; err != nil {
				t.Errorf("a pass failed: %v", err)
			}
		}
		if n := count(t, a, "overview_hours", ""); n != 3 {
			t.Errorf("the roll-up keeps %d hours, want 3", n)
		}
		prices := map[string]chat.Price{"mini": {In: 1, CachedIn: 0.1, Out: 4}}
		ov, err := b.Usage.Overview(ctx, OverviewFilter{Since: base, Until: base.Add(3 * time.Hour), Step: time.Hour, Prices: prices})
		if err != nil {
			t.Fatal(err)
		}
		checkOverviewHours(t, ov, base)
	})
}
