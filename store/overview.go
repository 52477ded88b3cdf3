package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"relaybot/audit"
	"relaybot/chat"
)

// OverviewFilter asks for the admin overview of [Since, Until) cut into buckets of Step each,
// the first starting at Since.
type OverviewFilter struct {
	Since, Until time.Time
	Step         time.Duration
	// Prices price each bucket's model calls by configured model name (a model without a price
	// costs nothing).
	Prices map[string]chat.Price
}

// maxOverviewBuckets bounds one overview: a month of days or two days of hours fit easily.
const maxOverviewBuckets = 400

// Percentiles are the nearest-rank p50 and p95 of N durations, in milliseconds.
type Percentiles struct {
	N   int64 `json:"n"`
	P50 int64 `json:"p50_ms"`
	P95 int64 `json:"p95_ms"`
}

// OverviewBucket is what the bot did in one bucket of time: turns and model calls count by their
// start, tool calls by theirs.
type OverviewBucket struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Turns counts the turns started; TurnErrors those that ended in error, and Failures those
	// by why the model did not answer them (chat.Failure; "" for an error of another kind).
	Turns      int64                  `json:"turns"`
	TurnErrors int64                  `json:"turn_errors"`
	Failures   map[chat.Failure]int64 `json:"failures,omitempty"`
	// ModelCalls counts the model calls (speech ones included), ModelErrors those that failed.
	ModelCalls  int64 `json:"model_calls"`
	ModelErrors int64 `json:"model_errors"`
	// TokensIn includes CachedIn (served from a prompt cache) and CacheWriteIn (written to one).
	TokensIn     int64 `json:"tokens_in"`
	TokensOut    int64 `json:"tokens_out"`
	CachedIn     int64 `json:"cached_in"`
	CacheWriteIn int64 `json:"cache_write_in"`
	// Cost is what the model calls cost at OverviewFilter.Prices.
	Cost float64 `json:"cost"`
	// ToolCalls counts the tool calls by status; ToolErrors those that failed (audit.Status.Failed).
	ToolCalls  map[audit.Status]int64 `json:"tool_calls,omitempty"`
	ToolErrors int64                  `json:"tool_errors"`
	// FirstText is the time from a turn's start to its first visible text, Final to its final
	// message delivered, over the bucket's turns that showed them.
	FirstText Percentiles `json:"first_text"`
	Final     Percentiles `json:"final"`
	// Waits429 counts the 429s the turns' replies waited out, Waited429MS how long in all.
	Waits429    int64 `json:"waits_429"`
	Waited429MS int64 `json:"waited_429_ms"`
}

// Overview is the overview of a window: its buckets, and their total, whose percentiles are
// ranked over the whole window (not an average of the buckets').
type Overview struct {
	Buckets []OverviewBucket
	Total   OverviewBucket
}

// Overview sums turns, model calls, tool calls and the replies' timings per bucket, computed by
// the database from the rows themselves, so every replica shows the same.
func (s *UsageQuery) Overview(ctx context.Context, f OverviewFilter) (Overview, error) {
	if f.Step <= 0 || !f.Since.Before(f.Until) {
		return Overview{}, errors.New("store: overview: want Since before Until and a positive Step")
	}
	n := int((f.Until.Sub(f.Since) + f.Step - 1) / f.Step)
	if n > maxOverviewBuckets {
		return Overview{}, fmt.Errorf("store: overview: %d buckets, at most %d", n, maxOverviewBuckets)
	}
	out := make([]OverviewBucket, n)
	for i := range out {
		out[i].Start = f.Since.Add(time.Duration(i) * f.Step).UTC()
		out[i].End = out[i].Start.Add(f.Step)
		if out[i].End.After(f.Until) {
			out[i].End = f.Until.UTC()
		}
	}
	total := OverviewBucket{Start: f.Since.UTC(), End: f.Until.UTC()}
	for _, part := range []func(context.Context, OverviewFilter, []OverviewBucket) error{
		s.overviewTurns, s.overviewModelCalls, s.overviewToolCalls} {
		if err := part(ctx, f, out); err != nil {
			return Overview{}, fmt.Errorf("store: overview: %w", err)
		}
	}
	if err := s.overviewLatency(ctx, f, out, &total); err != nil {
		return Overview{}, fmt.Errorf("store: overview: %w", err)
	}
	for _, b := range out {
		total.add(b)
	}
	return Overview{Buckets: out, Total: total}, nil
}

// add counts b's turns, calls, tokens, cost, errors and waits into t (not its percentiles).
func (t *OverviewBucket) add(b OverviewBucket) {
	t.Turns += b.Turns
	t.TurnErrors += b.TurnErrors
	for k, v := range b.Failures {
		if t.Failures == nil {
			t.Failures = map[chat.Failure]int64{}
		}
		t.Failures[k] += v
	}
	t.ModelCalls += b.ModelCalls
	t.ModelErrors += b.ModelErrors
	t.TokensIn += b.TokensIn
	t.TokensOut += b.TokensOut
	t.CachedIn += b.CachedIn
	t.CacheWriteIn += b.CacheWriteIn
	t.Cost += b.Cost
	for k, v := range b.ToolCalls {
		if t.ToolCalls == nil {
			t.ToolCalls = map[audit.Status]int64{}
		}
		t.ToolCalls[k] += v
	}
	t.ToolErrors += b.ToolErrors
	t.Waits429 += b.Waits429
	t.Waited429MS += b.Waited429MS
}

// bucketOf is the SQL of the bucket index of a row by its column col: whole seconds since
// f.Since, divided by the step (the values are ours, formatted, not the caller's text).
func (s *conn) bucketOf(col string, f OverviewFilter) string {
	epoch := "unixepoch(" + col + ")"
	if s.driver == DriverPostgres {
		epoch = "CAST(FLOOR(EXTRACT(EPOCH FROM " + col + ")) AS BIGINT)"
	}
	return fmt.Sprintf("((%s - %d) / %d)", epoch, f.Since.Unix(), int64(f.Step/time.Second))
}

// seconds is the SQL of a time column as seconds since 1970, with their fraction: each time is
// parsed once (on SQLite, from its text, the bulk of an overview's cost).
func (s *conn) seconds(col string) string {
	if s.driver == DriverPostgres {
		return "CAST(EXTRACT(EPOCH FROM " + col + ") AS DOUBLE PRECISION)"
	}
	return "unixepoch(" + col + ", 'subsec')"
}

// at returns the bucket of index i, nil outside the window.
func at(out []OverviewBucket, i int64) *OverviewBucket {
	if i < 0 || i >= int64(len(out)) {
		return nil
	}
	return &out[i]
}

func (s *UsageQuery) overviewTurns(ctx context.Context, f OverviewFilter, out []OverviewBucket) error {
	var rows []struct {
		B                  int64
		Status             chat.Status
		Failure            chat.Failure
		N, Waits, WaitedMs int64
	}
	q := `SELECT ` + s.bucketOf("started_at", f) + ` AS b, status, failure, COUNT(*) AS n,
		COALESCE(SUM(waits_429), 0) AS waits, COALESCE(SUM(waited_429_ms), 0) AS waited_ms
		FROM turns WHERE started_at >= ? AND started_at < ? GROUP BY 1, status, failure`
	if err := s.r.WithContext(ctx).Raw(q, dbTime(f.Since), dbTime(f.Until)).Scan(&rows).Error; err != nil {
		return fmt.Errorf("turns: %w", err)
	}
	for _, r := range rows {
		b := at(out, r.B)
		if b == nil {
			continue
		}
		b.Turns += r.N
		b.Waits429 += r.Waits
		b.Waited429MS += r.WaitedMs
		if r.Status == chat.StatusError {
			b.TurnErrors += r.N
			if b.Failures == nil {
				b.Failures = map[chat.Failure]int64{}
			}
			b.Failures[r.Failure] += r.N
		}
	}
	return nil
}

func (s *UsageQuery) overviewModelCalls(ctx context.Context, f OverviewFilter, out []OverviewBucket) error {
	var rows []struct {
		B                                  int64
		Model                              string
		N, Errors                          int64
		TokensIn, TokensOut, Cached, Wrote int64
		AudioMs                            int64
		Images                             int64
	}
	q := `SELECT ` + s.bucketOf("started_at", f) + ` AS b, model, COUNT(*) AS n,
		SUM(CASE WHEN status = ? THEN 1 ELSE 0 END) AS errors,
		COALESCE(SUM(tokens_in), 0) AS tokens_in, COALESCE(SUM(tokens_out), 0) AS tokens_out,
		COALESCE(SUM(cached_in), 0) AS cached, COALESCE(SUM(cache_write_in), 0) AS wrote,
		COALESCE(SUM(audio_ms), 0) AS audio_ms, COALESCE(SUM(images), 0) AS images
		FROM llm_calls WHERE started_at >= ? AND started_at < ? GROUP BY 1, model`
	if err := s.r.WithContext(ctx).Raw(q, chat.StatusError, dbTime(f.Since), dbTime(f.Until)).Scan(&rows).Error; err != nil {
		return fmt.Errorf("model calls: %w", err)
	}
	for _, r := range rows {
		b := at(out, r.B)
		if b == nil {
			continue
		}
		b.ModelCalls += r.N
		b.ModelErrors += r.Errors
		b.TokensIn += r.TokensIn
		b.TokensOut += r.TokensOut
		b.CachedIn += r.Cached
		b.CacheWriteIn += r.Wrote
		p := f.Prices[r.Model]
		b.Cost += p.Bill(r.TokensIn, r.Cached, r.Wrote, r.TokensOut) + p.AudioCost(r.AudioMs) + p.ImageCost(r.Images)
	}
	return nil
}

func (s *UsageQuery) overviewToolCalls(ctx context.Context, f OverviewFilter, out []OverviewBucket) error {
	var rows []struct {
		B      int64
		Status audit.Status
		N      int64
	}
	q := `SELECT ` + s.bucketOf("started_at", f) + ` AS b, status, COUNT(*) AS n
		FROM tool_calls WHERE started_at >= ? AND started_at < ? GROUP BY 1, status`
	if err := s.r.WithContext(ctx).Raw(q, dbTime(f.Since), dbTime(f.Until)).Scan(&rows).Error; err != nil {
		return fmt.Errorf("tool calls: %w", err)
	}
	for _, r := range rows {
		b := at(out, r.B)
		if b == nil {
			continue
		}
		if b.ToolCalls == nil {
			b.ToolCalls = map[audit.Status]int64{}
		}
		b.ToolCalls[r.Status] += r.N
		if r.Status.Failed() {
			b.ToolErrors += r.N
		}
	}
	return nil
}

// overviewLatency ranks the times to the first text and to the final message per bucket and
// over the whole window, nearest rank. The database reads the turns' times (one number each,
// parsed once); Go sorts them: SQLite's window functions cost several times the CPU for the
// same ranks (docs/performance/2026-12-07-overview.md).
func (s *UsageQuery) overviewLatency(ctx context.Context, f OverviewFilter, out []OverviewBucket, total *OverviewBucket) error {
	q := `SELECT ` + s.seconds("started_at") + `, ` + s.seconds("first_text_at") + `, ` + s.seconds("final_at") + `
		FROM turns WHERE started_at >= ? AND started_at < ? AND (first_text_at IS NOT NULL OR final_at IS NOT NULL)`
	rows, err := s.r.WithContext(ctx).Raw(q, dbTime(f.Since), dbTime(f.Until)).Rows()
	if err != nil {
		return fmt.Errorf("reply times: %w", err)
	}
	defer rows.Close()
	since, step := float64(f.Since.UnixNano())/1e9, f.Step.Seconds()
	first, final := make([][]int64, len(out)), make([][]int64, len(out))
	var allFirst, allFinal []int64
	for rows.Next() {
		var st float64
		var ft, fi sql.NullFloat64
		if err := rows.Scan(&st, &ft, &fi); err != nil {
			return fmt.Errorf("reply times: %w", err)
		}
		b := int((st - since) / step)
		if b < 0 || b >= len(out) {
			continue
		}
		if ft.Valid {
			ms := int64(math.Round((ft.Float64 - st) * 1000))
			first[b], allFirst = append(first[b], ms), append(allFirst, ms)
		}
		if fi.Valid {
			ms := int64(math.Round((fi.Float64 - st) * 1000))
			final[b], allFinal = append(final[b], ms), append(allFinal, ms)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reply times: %w", err)
	}
	for i := range out {
		out[i].FirstText, out[i].Final = percentiles(first[i]), percentiles(final[i])
	}
	total.FirstText, total.Final = percentiles(allFirst), percentiles(allFinal)
	return nil
}

// percentiles are the nearest-rank p50 and p95 of ms (sorted in place).
func percentiles(ms []int64) Percentiles {
	n := len(ms)
	if n == 0 {
		return Percentiles{}
	}
	slices.Sort(ms)
	rank := func(p int) int64 { return ms[(n*p+99)/100-1] }
	return Percentiles{N: int64(n), P50: rank(50), P95: rank(95)}
}
