package store

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"relaybot/audit"
)

// toolCallModel is a tool_calls row: the audit record itself, but for the two columns whose form
// differs (finished_at is NULL while the call runs; the duration is whole milliseconds).
type toolCallModel struct {
	audit.Record  `gorm:"embedded"`
	FinishedAtCol *time.Time `gorm:"column:finished_at"`
	DurationMs    int64      `gorm:"column:duration_ms"`
	DecidedAtCol  *time.Time `gorm:"column:decided_at"` // NULL until an approval is decided
}

func (toolCallModel) TableName() string { return "tool_calls" }

// newToolCallModel is the row of a new record: the database gives it its id.
func newToolCallModel(r *audit.Record) toolCallModel {
	m := toolCallModel{Record: *r, FinishedAtCol: finishedAt(r), DurationMs: r.Duration.Milliseconds(), DecidedAtCol: decidedAt(r)}
	m.ID = 0
	return m
}

// record is the audit.Record of the row, its times in UTC.
func (m toolCallModel) record() audit.Record {
	r := m.Record
	r.StartedAt = r.StartedAt.UTC()
	r.Duration = time.Duration(m.DurationMs) * time.Millisecond
	if m.FinishedAtCol != nil {
		r.FinishedAt = m.FinishedAtCol.UTC()
	}
	if m.DecidedAtCol != nil {
		r.DecidedAt = m.DecidedAtCol.UTC()
	}
	return r
}

func encodeCursor(t time.Time, id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(t.UTC().Format(time.RFC3339Nano) + "|" + strconv.FormatInt(id, 10)))
}

func decodeCursor(c string) (time.Time, int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("%w: %q", audit.ErrBadCursor, c)
	}
	ts, ids, ok := strings.Cut(string(b), "|")
	if !ok {
		return time.Time{}, 0, fmt.Errorf("%w: %q", audit.ErrBadCursor, c)
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("%w: %q", audit.ErrBadCursor, c)
	}
	id, err := strconv.ParseInt(ids, 10, 64)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("%w: %q", audit.ErrBadCursor, c)
	}
	return t.UTC(), id, nil
}

// where applies the filter f to db, without the cursor.
func where(db *gorm.DB, f audit.Filter) *gorm.DB {
	if !f.Since.IsZero() {
		db = db.Where("started_at >= ?", dbTime(f.Since))
	}
	if !f.Until.IsZero() {
		db = db.Where("started_at < ?", dbTime(f.Until))
	}
	eq := []struct {
		col, v string
	}{{"tool_name", f.Tool}, {"source", string(f.Source)}, {"server", f.Server},
		{"platform", f.Platform}, {"chat_id", f.ChatID}, {"user_id", f.UserID}}
	for _, e := range eq {
		if e.v != "" {
			db = db.Where(e.col+" = ?", e.v)
		}
	}
	if f.ThreadID != "" {
		db = db.Where("conversation_id IN (?)", db.Session(&gorm.Session{NewDB: true}).Table("conversations").
			Select("id").Where("thread_id = ?", f.ThreadID))
	}
	if len(f.Statuses) > 0 {
		in := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			in[i] = string(st)
		}
		db = db.Where("status IN ?", in)
	}
	if f.TurnID != 0 {
		db = db.Where("turn_id = ?", f.TurnID)
	}
	if f.Decision != "" {
		db = db.Where("decision = ?", f.Decision)
	}
	if f.ApprovalRequired {
		db = db.Where("approval_required = ?", true)
	}
	if f.Text != "" {
		like := "%" + likeEscaper.Replace(strings.ToLower(f.Text)) + "%"
		db = db.Where(`(LOWER(tool_name) LIKE ? ESCAPE '\' OR LOWER(arguments) LIKE ? ESCAPE '\' OR LOWER(result) LIKE ? ESCAPE '\')`, like, like, like)
	}
	return db
}

// likeEscaper makes a text match itself in a LIKE pattern: its %, _ and \ are escaped.
var likeEscaper = strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`)

// toolCallsQuery builds the ToolCalls query (limit+1 rows, so the caller knows whether a next
// page exists).
func (s *conn) toolCallsQuery(ctx context.Context, f audit.Filter) (*gorm.DB, int, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = audit.DefaultLimit
	}
	limit = min(limit, audit.MaxLimit)
	q := where(s.r.WithContext(ctx).Model(&toolCallModel{}), f)
	if f.Order == audit.Slowest {
		if f.Cursor != "" || f.After != "" {
			return nil, 0, fmt.Errorf("%w: slowest-first has one page only", audit.ErrBadCursor)
		}
		return q.Order("duration_ms DESC, started_at DESC, id DESC").Limit(limit), limit, nil
	}
	switch {
	case f.Cursor != "" && f.After != "":
		return nil, 0, fmt.Errorf("%w: a page is either older (cursor) or newer (after) than another", audit.ErrBadCursor)
	case f.After != "":
		t, id, err := decodeCursor(f.After)
		if err != nil {
			return nil, 0, err
		}
		// The rows just newer than the cursor: oldest first here, turned around by the caller.
		q = q.Where("(started_at > ? OR (started_at = ? AND id > ?))", t, t, id)
		return q.Order("started_at, id").Limit(limit), limit, nil
	case f.Cursor != "":
		t, id, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, 0, err
		}
		q = q.Where("(started_at < ? OR (started_at = ? AND id < ?))", t, t, id)
	}
	return q.Order("started_at DESC, id DESC").Limit(limit + 1), limit, nil
}

// ToolCalls implements audit.Log: the rows matching f in f.Order, and the cursor of the next page
// (empty on the last page, and always with audit.Slowest).
func (s *ToolCallQuery) ToolCalls(ctx context.Context, f audit.Filter) (items []audit.Record, next string, err error) {
	q, limit, err := s.toolCallsQuery(ctx, f)
	if err != nil {
		return nil, "", err
	}
	var rows []toolCallModel
	if err := q.Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("store: tool calls: %w", err)
	}
	switch {
	case f.After != "":
		// A page newer than another: the page it came from holds older rows.
		slices.Reverse(rows)
		if len(rows) > 0 {
			next = encodeCursor(rows[len(rows)-1].StartedAt, rows[len(rows)-1].ID)
		}
	case len(rows) > limit && f.Order != audit.Slowest:
		rows = rows[:limit]
		last := rows[limit-1]
		next = encodeCursor(last.StartedAt, last.ID)
	}
	items = make([]audit.Record, len(rows))
	for i, r := range rows {
		items[i] = r.record()
	}
	return items, next, nil
}

// ToolCallPage is ToolCalls with the cursor of the newer page too (Prev, for Filter.After),
// set when the page is not the newest and newer records match f.
func (s *ToolCallQuery) ToolCallPage(ctx context.Context, f audit.Filter) (audit.Page, error) {
	items, next, err := s.ToolCalls(ctx, f)
	if err != nil {
		return audit.Page{}, err
	}
	p := audit.Page{Items: items, Next: next}
	if (f.Cursor == "" && f.After == "") || len(items) == 0 || f.Order == audit.Slowest {
		return p, nil
	}
	first := encodeCursor(items[0].StartedAt, items[0].ID)
	probe := f
	probe.Cursor, probe.After, probe.Limit = "", first, 1
	newer, _, err := s.ToolCalls(ctx, probe)
	if err != nil {
		return audit.Page{}, err
	}
	if len(newer) > 0 {
		p.Prev = first
	}
	return p, nil
}

// CountToolCalls returns how many records match f (its order and page ignored).
func (s *ToolCallQuery) CountToolCalls(ctx context.Context, f audit.Filter) (int, error) {
	var n int64
	if err := where(s.r.WithContext(ctx).Model(&toolCallModel{}), f).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("store: count tool calls: %w", err)
	}
	return int(n), nil
}

// ToolCall implements audit.Log: one audit row; an error wrapping both ErrNotFound and
// audit.ErrNotFound when there is none.
func (s *ToolCallQuery) ToolCall(ctx context.Context, id int64) (audit.Record, error) {
	var m toolCallModel
	err := s.r.WithContext(ctx).Take(&m, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return audit.Record{}, fmt.Errorf("store: tool call %d: %w (%w)", id, ErrNotFound, audit.ErrNotFound)
	}
	if err != nil {
		return audit.Record{}, fmt.Errorf("store: tool call %d: %w", id, err)
	}
	return m.record(), nil
}

// toolStatRow is one group of ToolStats as the database computes it.
type toolStatRow struct {
	ToolName            string
	Source              audit.Source
	Server              string
	N, Finished, Errors int
	AvgMs               float64
	MaxMs, P50Ms, P95Ms int64
}

// ToolStats implements audit.Log: the calls matching f summarised per tool (source and server),
// busiest first. Order, Limit and Cursor are ignored. Everything is computed by the database, however many rows match.
func (s *ToolCallQuery) ToolStats(ctx context.Context, f audit.Filter) ([]audit.Stat, error) {
	var rows []toolStatRow
	var err error
	if s.driver == DriverPostgres {
		rows, err = s.toolStatsPostgres(ctx, f)
	} else {
		rows, err = s.toolStatsSQLite(ctx, f)
	}
	if err != nil {
		return nil, fmt.Errorf("store: tool stats: %w", err)
	}
	out := make([]audit.Stat, 0, len(rows))
	for _, r := range rows {
		st := audit.Stat{Tool: r.ToolName, Source: r.Source, Server: r.Server, Count: r.N,
			Errors: r.Errors, Finished: r.Finished,
			P50: time.Duration(r.P50Ms) * time.Millisecond,
			P95: time.Duration(r.P95Ms) * time.Millisecond,
			Avg: time.Duration(r.AvgMs * float64(time.Millisecond)).Round(time.Microsecond),
			Max: time.Duration(r.MaxMs) * time.Millisecond}
		if r.Finished > 0 {
			st.ErrorRate = float64(r.Errors) / float64(r.Finished)
		}
		out = append(out, st)
	}
	return out, nil
}

// toolStatsAggregates are the columns of ToolStats both dialects compute alike; the arguments are
// statusAggregateArgs.
const toolStatsAggregates = `tool_name, source, server, COUNT(*) AS n,
	SUM(CASE WHEN status <> ? THEN 1 ELSE 0 END) AS finished,
	SUM(CASE WHEN status NOT IN (?, ?) THEN 1 ELSE 0 END) AS errors,
	COALESCE(AVG(CASE WHEN status <> ? THEN duration_ms END), 0) AS avg_ms,
	COALESCE(MAX(CASE WHEN status <> ? THEN duration_ms END), 0) AS max_ms`

var statusAggregateArgs = []any{audit.StatusRunning, audit.StatusRunning, audit.StatusOK, audit.StatusRunning, audit.StatusRunning}

// toolStatsPostgres computes every column in one aggregate query; percentile_disc is the
// nearest-rank percentile.
func (s *conn) toolStatsPostgres(ctx context.Context, f audit.Filter) ([]toolStatRow, error) {
	var rows []toolStatRow
	args := append(append([]any(nil), statusAggregateArgs...), audit.StatusRunning, audit.StatusRunning)
	err := where(s.r.WithContext(ctx).Model(&toolCallModel{}), f).
		Select(toolStatsAggregates+`,
			COALESCE(percentile_disc(0.5) WITHIN GROUP (ORDER BY duration_ms) FILTER (WHERE status <> ?), 0) AS p50_ms,
			COALESCE(percentile_disc(0.95) WITHIN GROUP (ORDER BY duration_ms) FILTER (WHERE status <> ?), 0) AS p95_ms`,
			args...).
		Group("tool_name, source, server").Order("n DESC, tool_name, source, server").
		Scan(&rows).Error
	return rows, err
}

// toolStatsSQLite computes the aggregates in one query and the nearest-rank percentiles in a
// second one with window functions (SQLite has no percentile aggregate).
func (s *conn) toolStatsSQLite(ctx context.Context, f audit.Filter) ([]toolStatRow, error) {
	var rows []toolStatRow
	err := where(s.r.WithContext(ctx).Model(&toolCallModel{}), f).
		Select(toolStatsAggregates, statusAggregateArgs...).
		Group("tool_name, source, server").Order("n DESC, tool_name, source, server").
		Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	ranked := where(s.r.WithContext(ctx).Model(&toolCallModel{}), f).
		Where("status <> ?", audit.StatusRunning).
		Select(`tool_name, source, server, duration_ms,
			ROW_NUMBER() OVER (PARTITION BY tool_name, source, server ORDER BY duration_ms) AS rn,
			COUNT(*) OVER (PARTITION BY tool_name, source, server) AS cnt`)
	type pct struct {
		ToolName, Source, Server string
		DurationMs               int64
		Rn, Cnt                  int64
	}
	var pcts []pct
	err = s.r.WithContext(ctx).Table("(?) AS ranked", ranked).
		Select("tool_name, source, server, duration_ms, rn, cnt").
		Where("rn = (cnt * 50 + 99) / 100 OR rn = (cnt * 95 + 99) / 100").
		Scan(&pcts).Error
	if err != nil {
		return nil, fmt.Errorf("percentiles: %w", err)
	}
	type key struct{ t, so, se string }
	at := make(map[key]*toolStatRow, len(rows))
	for i := range rows {
		at[key{rows[i].ToolName, string(rows[i].Source), rows[i].Server}] = &rows[i]
	}
	for _, p := range pcts {
		r := at[key{p.ToolName, p.Source, p.Server}]
		if r == nil {
			continue
		}
		if p.Rn == (p.Cnt*50+99)/100 {
			r.P50Ms = p.DurationMs
		}
		if p.Rn == (p.Cnt*95+99)/100 {
			r.P95Ms = p.DurationMs
		}
	}
	return rows, nil
}
