package store

import (
	"context"
	"errors"
	"fmt"
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

// Overview sums turns, model calls, tool calls and the replies' timings per bucket, computed by
// the database from the rows themselves, so every replica shows the same.
func (s *UsageQuery) Overview(ctx context.Context, f OverviewFilter) ([]OverviewBucket, error) {
	if f.Step <= 0 || !f.Since.Before(f.Until) {
		return nil, errors.New("store: overview: want Since before Until and a positive Step")
	}
	n := int((f.Until.Sub(f.Since) + f.Step - 1) / f.Step)
	if n > maxOverviewBuckets {
		return nil, fmt.Errorf("store: overview: %d buckets, at most %d", n, maxOverviewBuckets)
	}
	out := make([]OverviewBucket, n)
	for i := range out {
		out[i].Start = f.Since.Add(time.Duration(i) * f.Step).UTC()
		out[i].End = out[i].Start.Add(f.Step)
		if out[i].End.After(f.Until) {
			out[i].End = f.Until.UTC()
		}
	}
	for _, part := range []func(context.Context, OverviewFilter, []OverviewBucket) error{
		s.overviewTurns, s.overviewModelCalls, s.overviewToolCalls, s.overviewLatency} {
		if err := part(ctx, f, out); err != nil {
			return nil, fmt.Errorf("store: overview: %w", err)
		}
	}
	return out, nil
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

// msBetween is the SQL of the milliseconds from column a to column b.
func (s *conn) msBetween(a, b string) string {
	if s.driver == DriverPostgres {
		return "CAST(FLOOR(EXTRACT(EPOCH FROM (" + b + " - " + a + ")) * 1000) AS BIGINT)"
	}
	return "CAST(ROUND((unixepoch(" + b + ", 'subsec') - unixepoch(" + a + ", 'subsec')) * 1000) AS INTEGER)"
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

// overviewLatency ranks each bucket's times to the first text and to the final message with
// window functions (SQLite has no percentile aggregate) and keeps the nearest-rank p50 and p95.
func (s *UsageQuery) overviewLatency(ctx context.Context, f OverviewFilter, out []OverviewBucket) error {
	for _, m := range []struct {
		col string
		get func(*OverviewBucket) *Percentiles
	}{
		{"first_text_at", func(b *OverviewBucket) *Percentiles { return &b.FirstText }},
		{"final_at", func(b *OverviewBucket) *Percentiles { return &b.Final }},
	} {
		var rows []struct{ B, Ms, Rn, Cnt int64 }
		q := `SELECT b, ms, rn, cnt FROM (SELECT b, ms,
				ROW_NUMBER() OVER (PARTITION BY b ORDER BY ms) AS rn, COUNT(*) OVER (PARTITION BY b) AS cnt
			FROM (SELECT ` + s.bucketOf("started_at", f) + ` AS b, ` + s.msBetween("started_at", m.col) + ` AS ms
				FROM turns WHERE started_at >= ? AND started_at < ? AND ` + m.col + ` IS NOT NULL) AS timed) AS ranked
			WHERE rn = (cnt * 50 + 99) / 100 OR rn = (cnt * 95 + 99) / 100`
		if err := s.r.WithContext(ctx).Raw(q, dbTime(f.Since), dbTime(f.Until)).Scan(&rows).Error; err != nil {
			return fmt.Errorf("%s: %w", m.col, err)
		}
		for _, r := range rows {
			b := at(out, r.B)
			if b == nil {
				continue
			}
			p := m.get(b)
			p.N = r.Cnt
			if r.Rn == (r.Cnt*50+99)/100 {
				p.P50 = r.Ms
			}
			if r.Rn == (r.Cnt*95+99)/100 {
				p.P95 = r.Ms
			}
		}
	}
	return nil
}
