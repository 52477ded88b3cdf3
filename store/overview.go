package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
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
// the database, so every replica shows the same: the whole hours the roll-up holds
// (overview_hours, RollUp) read from it when the buckets are whole hours, the rest from the
// rows themselves.
func (s *UsageQuery) Overview(ctx context.Context, f OverviewFilter) (Overview, error) {
	if f.Step <= 0 || !f.Since.Before(f.Until) {
		return Overview{}, errors.New("store: overview: want Since before Until and a positive Step")
	}
	n := int((f.Until.Sub(f.Since) + f.Step - 1) / f.Step)
	if n > maxOverviewBuckets {
		return Overview{}, fmt.Errorf("store: overview: %d buckets, at most %d", n, maxOverviewBuckets)
	}
	acc := make([]sums, n)
	raw := f
	if f.Since.Equal(f.Since.Truncate(time.Hour)) && f.Step%time.Hour == 0 {
		rolled, err := s.readRolled(ctx, f, acc)
		if err != nil {
			return Overview{}, fmt.Errorf("store: overview: %w", err)
		}
		raw.Since = rolled
	}
	if raw.Since.Before(raw.Until) {
		if err := s.sumRows(ctx, raw, f, acc); err != nil {
			return Overview{}, fmt.Errorf("store: overview: %w", err)
		}
	}
	out := make([]OverviewBucket, n)
	var all sums
	for i := range out {
		start := f.Since.Add(time.Duration(i) * f.Step).UTC()
		end := start.Add(f.Step)
		if end.After(f.Until) {
			end = f.Until.UTC()
		}
		out[i] = acc[i].bucket(start, end, f.Prices)
		all.add(&acc[i])
	}
	return Overview{Buckets: out, Total: all.bucket(f.Since.UTC(), f.Until.UTC(), f.Prices)}, nil
}

// sumRows adds the rows that started in [f.Since, f.Until) to the buckets of view (whose
// window may start earlier): one grouped query per table, and the turns' reply times.
func (s *UsageQuery) sumRows(ctx context.Context, f, view OverviewFilter, out []sums) error {
	for _, part := range []func(context.Context, OverviewFilter, OverviewFilter, []sums) error{
		s.sumTurns, s.sumModelCalls, s.sumToolCalls, s.sumReplyTimes} {
		if err := part(ctx, f, view, out); err != nil {
			return err
		}
	}
	return nil
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

// bucketed is a row of a grouped overview query: the first column its bucket's index.
type bucketed interface{ index() int64 }

// series runs one grouped query of the overview over the rows of table that started in
// [f.Since, f.Until), its buckets those of view, and hands each row to add with its bucket's
// sums; rows outside view's buckets are dropped. cols are the query's columns after the
// bucket, group its GROUP BY after the bucket, args those of cols.
func series[R bucketed](ctx context.Context, s *UsageQuery, table, cols, group string, args []any, f, view OverviewFilter,
	out []sums, add func(*sums, R)) error {
	q := `SELECT ` + s.bucketOf("started_at", view) + ` AS b, ` + cols + ` FROM ` + table +
		` WHERE started_at >= ? AND started_at < ? GROUP BY 1` + group
	var rows []R
	if err := s.r.WithContext(ctx).Raw(q, append(args, dbTime(f.Since), dbTime(f.Until))...).Scan(&rows).Error; err != nil {
		return fmt.Errorf("%s: %w", table, err)
	}
	for _, r := range rows {
		if i := r.index(); i >= 0 && i < int64(len(out)) {
			add(&out[i], r)
		}
	}
	return nil
}

type turnSeries struct {
	B                  int64
	Status             chat.Status
	Failure            chat.Failure
	N, Waits, WaitedMs int64
}

func (r turnSeries) index() int64 { return r.B }

func (s *UsageQuery) sumTurns(ctx context.Context, f, view OverviewFilter, out []sums) error {
	return series(ctx, s, "turns", `status, failure, COUNT(*) AS n,
		COALESCE(SUM(waits_429), 0) AS waits, COALESCE(SUM(waited_429_ms), 0) AS waited_ms`, ", status, failure", nil, f, view, out,
		func(b *sums, r turnSeries) {
			b.Turns += r.N
			b.Waits += r.Waits
			b.WaitedMS += r.WaitedMs
			if r.Status == chat.StatusError {
				tally(&b.Errors, r.Failure, r.N)
			}
		})
}

type modelSeries struct {
	B                                                              int64
	Model                                                          string
	N, Errors, TokensIn, TokensOut, Cached, Wrote, AudioMs, Images int64
}

func (r modelSeries) index() int64 { return r.B }

func (s *UsageQuery) sumModelCalls(ctx context.Context, f, view OverviewFilter, out []sums) error {
	return series(ctx, s, "llm_calls", `model, COUNT(*) AS n, SUM(CASE WHEN status = ? THEN 1 ELSE 0 END) AS errors,
		COALESCE(SUM(tokens_in), 0) AS tokens_in, COALESCE(SUM(tokens_out), 0) AS tokens_out,
		COALESCE(SUM(cached_in), 0) AS cached, COALESCE(SUM(cache_write_in), 0) AS wrote,
		COALESCE(SUM(audio_ms), 0) AS audio_ms, COALESCE(SUM(images), 0) AS images`, ", model",
		[]any{chat.StatusError}, f, view, out,
		func(b *sums, r modelSeries) {
			if b.Models == nil {
				b.Models = map[string]*modelSums{}
			}
			m := b.Models[r.Model]
			if m == nil {
				m = &modelSums{}
				b.Models[r.Model] = m
			}
			m.add(modelSums{N: r.N, Errors: r.Errors, TokensIn: r.TokensIn, TokensOut: r.TokensOut, Cached: r.Cached,
				Wrote: r.Wrote, AudioMs: r.AudioMs, Images: r.Images})
		})
}

type toolSeries struct {
	B      int64
	Status audit.Status
	N      int64
}

func (r toolSeries) index() int64 { return r.B }

func (s *UsageQuery) sumToolCalls(ctx context.Context, f, view OverviewFilter, out []sums) error {
	return series(ctx, s, "tool_calls", "status, COUNT(*) AS n", ", status", nil, f, view, out,
		func(b *sums, r toolSeries) { tally(&b.Tools, r.Status, r.N) })
}

// sumReplyTimes adds the times to the first text and to the final message of each turn to its
// bucket, to be ranked. The database reads the turns' times (one number each, parsed once); Go
// ranks them: SQLite's window functions cost several times the CPU for the same ranks
// (docs/performance/2026-12-07-overview.md).
func (s *UsageQuery) sumReplyTimes(ctx context.Context, f, view OverviewFilter, out []sums) error {
	q := `SELECT ` + s.seconds("started_at") + `, ` + s.seconds("first_text_at") + `, ` + s.seconds("final_at") + `
		FROM turns WHERE started_at >= ? AND started_at < ? AND (first_text_at IS NOT NULL OR final_at IS NOT NULL)`
	rows, err := s.r.WithContext(ctx).Raw(q, dbTime(f.Since), dbTime(f.Until)).Rows()
	if err != nil {
		return fmt.Errorf("reply times: %w", err)
	}
	defer rows.Close()
	since, step := float64(view.Since.UnixNano())/1e9, view.Step.Seconds()
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
			tally(&out[b].First, int64(math.Round((ft.Float64-st)*1000)), 1)
		}
		if fi.Valid {
			tally(&out[b].Final, int64(math.Round((fi.Float64-st)*1000)), 1)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reply times: %w", err)
	}
	return nil
}
