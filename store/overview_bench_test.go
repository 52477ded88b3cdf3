package store

import (
	"context"
	"syscall"
	"testing"
	"time"

	"relaybot/chat"
)

// BenchmarkOverviewMonth measures the admin overview over a busy month on SQLite: 100,000
// turns (one every 26 s), each with a model call, a tool call and reply times, read as the page
// reads them (thirty days by day with their total, and the last day by hour), from the rows
// and then from the hourly roll-up; and a roll-up pass.
func BenchmarkOverviewMonth(b *testing.B) {
	ctx := context.Background()
	s := newStore(b, DriverSQLite)
	const n, every, t0 = 100_000, 26, 1767225600 // 2026-01-01
	stamp := func(expr string) string {
		return `strftime('%Y-%m-%d %H:%M:%S', ` + expr + `, 'unixepoch') || '+00:00'`
	}
	for _, q := range []string{
		`INSERT INTO conversations (id, platform, chat_id, created_at) VALUES (1, 'telegram', '42', '2026-01-01 00:00:00+00:00')`,
		`WITH RECURSIVE n(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM n WHERE x < 99999)
INSERT INTO turns (id, conversation_id, user_id, model, status, failure, started_at, finished_at,
  first_text_at, final_at, waits_429, waited_429_ms)
SELECT x + 1, 1, 'u' || (x % 300), 'mini', CASE WHEN x % 50 = 0 THEN 'error' ELSE 'ok' END,
  CASE WHEN x % 50 = 0 THEN 'unavailable' ELSE '' END,
  ` + stamp("1767225600 + x * 26") + `, ` + stamp("1767225600 + x * 26 + 5") + `,
  ` + stamp("1767225600 + x * 26 + 1 + x % 3") + `, ` + stamp("1767225600 + x * 26 + 4 + x % 5") + `,
  CASE WHEN x % 40 = 0 THEN 1 ELSE 0 END, CASE WHEN x % 40 = 0 THEN 2000 ELSE 0 END FROM n`,
		`INSERT INTO llm_calls (turn_id, seq, model, status, tokens_in, cached_in, tokens_out, started_at)
SELECT id, 0, 'mini', status, 2000, 1500, 150, started_at FROM turns`,
		`INSERT INTO tool_calls (turn_id, conversation_id, platform, chat_id, tool_name, status, started_at)
SELECT id, 1, 'telegram', '42', 'fetch_url', CASE WHEN id % 20 = 0 THEN 'error' ELSE 'ok' END, started_at FROM turns`,
		`ANALYZE`,
	} {
		if err := s.w.Exec(q).Error; err != nil {
			b.Fatal(err)
		}
	}
	until := time.Unix(t0+n*every, 0).UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	month := OverviewFilter{Since: until.AddDate(0, 0, -30), Until: until, Step: 24 * time.Hour,
		Prices: map[string]chat.Price{"mini": {In: 1, CachedIn: 0.1, Out: 4}}}
	day := OverviewFilter{Since: until.Add(-24 * time.Hour), Until: until, Step: time.Hour}
	got, err := s.Usage.Overview(ctx, month)
	if err != nil || got.Total.Turns < 90_000 || got.Total.FirstText.N != got.Total.Turns {
		b.Fatalf("the month's total = %+v, %v", got.Total, err)
	}
	views := []struct {
		name string
		f    OverviewFilter
	}{{"month-by-day", month}, {"day-by-hour", day}}
	for _, bm := range views {
		b.Run(bm.name+"/rows", func(b *testing.B) { benchOverview(b, s, bm.f) })
	}
	// The roll-up: a first one over the month (passes of at most rollMaxHours each), as the
	// first start after the upgrade makes it; then the views again, the whole hours from it;
	// and a pass as RunRollUp makes them from then on (the last hours rolled again), an hour
	// after the last turn.
	now := time.Unix(t0+n*every, 0).Add(time.Hour)
	rollAll := func(b *testing.B) {
		for {
			done, err := s.Usage.RollUp(ctx, now)
			if err != nil {
				b.Fatal(err)
			}
			if done {
				return
			}
		}
	}
	b.Run("first-roll-up", func(b *testing.B) {
		before := cpuTime(b)
		for b.Loop() {
			if err := s.w.Exec(`UPDATE overview_rollup SET rolled_until = 0, rolled_at = 0`).Error; err != nil {
				b.Fatal(err)
			}
			rollAll(b)
		}
		b.ReportMetric(float64((cpuTime(b)-before).Milliseconds())/float64(b.N), "cpu-ms/op")
	})
	rollAll(b)
	rolled, err := s.Usage.Overview(ctx, month)
	if err != nil || rolled.Total.Turns != got.Total.Turns || rolled.Total.TokensIn != got.Total.TokensIn || rolled.Total.Cost != got.Total.Cost {
		b.Fatalf("the month from the roll-up = %+v, %v; from the rows %+v", rolled.Total, err, got.Total)
	}
	for _, bm := range views {
		b.Run(bm.name+"/rolled", func(b *testing.B) { benchOverview(b, s, bm.f) })
	}
	b.Run("roll-up-pass", func(b *testing.B) {
		before := cpuTime(b)
		for b.Loop() {
			if _, err := s.Usage.RollUp(ctx, now); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((cpuTime(b)-before).Milliseconds())/float64(b.N), "cpu-ms/op")
	})
}

// benchOverview measures one view of the overview.
func benchOverview(b *testing.B, s *Database, f OverviewFilter) {
	ctx := context.Background()
	before := cpuTime(b)
	for b.Loop() {
		if _, err := s.Usage.Overview(ctx, f); err != nil {
			b.Fatal(err)
		}
	}
	// The process's CPU time (SQLite runs in it), which a loaded machine does not inflate as it
	// does the wall clock.
	b.ReportMetric(float64((cpuTime(b)-before).Milliseconds())/float64(b.N), "cpu-ms/op")
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
