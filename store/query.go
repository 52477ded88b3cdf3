package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Limits of one ToolCalls page.
const (
	DefaultLimit = 50
	MaxLimit     = 1000
)

// ToolCallFilter selects audit rows. Zero fields do not filter.
type ToolCallFilter struct {
	Since, Until time.Time // started_at >= Since and < Until
	Tool         string
	Status       string
	Source       string
	Server       string
	Platform     string
	ChatID       string
	UserID       string
	TurnID       int64
	// Decision keeps rows whose approval ended so (approved, always, denied, timeout,
	// cancelled); ApprovalRequired keeps the rows a policy asked about.
	Decision         string
	ApprovalRequired bool
	// Limit is the page size: 0 means DefaultLimit; more than MaxLimit is cut to MaxLimit.
	Limit int
	// Cursor is the next value of the previous page; empty starts at the newest row.
	Cursor string
}

// ToolCallRow is one audit row as the CLI and the admin API show it (the DESIGN contract, plus the
// sizes of arguments and result before capping).
type ToolCallRow struct {
	ID             int64      `json:"id"`
	TurnID         int64      `json:"turn_id"`
	ConversationID int64      `json:"conversation_id"`
	Platform       string     `json:"platform"`
	ChatID         string     `json:"chat_id"`
	UserID         string     `json:"user_id"`
	Round          int        `json:"round"`
	ToolCallID     string     `json:"tool_call_id"`
	ToolName       string     `json:"tool_name"`
	Source         string     `json:"source"`
	Server         string     `json:"server"`
	Status         string     `json:"status"`
	Arguments      string     `json:"arguments"`
	Result         string     `json:"result"`
	Error          string     `json:"error"`
	StartedAt      time.Time  `json:"started_at"`
	FinishedAt     *time.Time `json:"finished_at"` // null while running
	DurationMS     int64      `json:"duration_ms"`
	ArgumentsSize  int        `json:"arguments_size"`
	ResultSize     int        `json:"result_size"`
	// ServerTool is the MCP server's own name of a tool its tool_prefix renamed.
	ServerTool string `json:"server_tool"`
	// The approval of a call a tool policy asked about: decision is approved, always, denied,
	// timeout or cancelled; decided_at is null until decided.
	ApprovalRequired bool       `json:"approval_required"`
	Decision         string     `json:"decision"`
	Approver         string     `json:"approver"`
	DecidedAt        *time.Time `json:"decided_at"`
}

type toolCallModel struct {
	ID             int64 `gorm:"primaryKey"`
	TurnID         int64
	ConversationID int64
	Platform       string
	ChatID         string
	UserID         string
	Round          int
	ToolCallID     string
	ToolName       string
	Source         string
	Server         string
	Status         string
	Arguments      string
	Result         string
	Error          string
	ArgumentsSize  int
	ResultSize     int
	StartedAt      time.Time
	FinishedAt     *time.Time
	DurationMs     int64 `gorm:"column:duration_ms"`
	// Approval and prefix columns (migration 00004).
	ServerTool       string
	ApprovalRequired bool
	Decision         string
	Approver         string
	DecidedAt        *time.Time
}

func (toolCallModel) TableName() string { return "tool_calls" }

func (m toolCallModel) public() ToolCallRow {
	r := ToolCallRow{ID: m.ID, TurnID: m.TurnID, ConversationID: m.ConversationID,
		Platform: m.Platform, ChatID: m.ChatID, UserID: m.UserID, Round: m.Round,
		ToolCallID: m.ToolCallID, ToolName: m.ToolName, Source: m.Source, Server: m.Server,
		Status: m.Status, Arguments: m.Arguments, Result: m.Result, Error: m.Error,
		StartedAt: m.StartedAt.UTC(), DurationMS: m.DurationMs, ArgumentsSize: m.ArgumentsSize,
		ResultSize: m.ResultSize}
	if m.FinishedAt != nil {
		t := m.FinishedAt.UTC()
		r.FinishedAt = &t
	}
	r.ServerTool, r.ApprovalRequired, r.Decision, r.Approver = m.ServerTool, m.ApprovalRequired, m.Decision, m.Approver
	if m.DecidedAt != nil {
		t := m.DecidedAt.UTC()
		r.DecidedAt = &t
	}
	return r
}

// ErrBadCursor is returned for a cursor that ToolCalls did not make.
var ErrBadCursor = errors.New("store: bad cursor")

func encodeCursor(t time.Time, id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(t.UTC().Format(time.RFC3339Nano) + "|" + strconv.FormatInt(id, 10)))
}

func decodeCursor(c string) (time.Time, int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("%w: %q", ErrBadCursor, c)
	}
	ts, ids, ok := strings.Cut(string(b), "|")
	if !ok {
		return time.Time{}, 0, fmt.Errorf("%w: %q", ErrBadCursor, c)
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("%w: %q", ErrBadCursor, c)
	}
	id, err := strconv.ParseInt(ids, 10, 64)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("%w: %q", ErrBadCursor, c)
	}
	return t.UTC(), id, nil
}

// where applies the filter, without the cursor.
func (f ToolCallFilter) where(db *gorm.DB) *gorm.DB {
	if !f.Since.IsZero() {
		db = db.Where("started_at >= ?", dbTime(f.Since))
	}
	if !f.Until.IsZero() {
		db = db.Where("started_at < ?", dbTime(f.Until))
	}
	eq := []struct {
		col, v string
	}{{"tool_name", f.Tool}, {"status", f.Status}, {"source", f.Source}, {"server", f.Server},
		{"platform", f.Platform}, {"chat_id", f.ChatID}, {"user_id", f.UserID}}
	for _, e := range eq {
		if e.v != "" {
			db = db.Where(e.col+" = ?", e.v)
		}
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
	return db
}

// toolCallsQuery builds the ToolCalls query (limit+1 rows, so the caller knows whether a next
// page exists).
func (s *Store) toolCallsQuery(ctx context.Context, f ToolCallFilter) (*gorm.DB, int, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	q := f.where(s.r.WithContext(ctx).Model(&toolCallModel{}))
	if f.Cursor != "" {
		t, id, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, 0, err
		}
		q = q.Where("(started_at < ? OR (started_at = ? AND id < ?))", t, t, id)
	}
	return q.Order("started_at DESC, id DESC").Limit(limit + 1), limit, nil
}

// ToolCalls returns audit rows matching f, newest first, and the cursor of the next page (empty on
// the last page).
func (s *Store) ToolCalls(ctx context.Context, f ToolCallFilter) (items []ToolCallRow, next string, err error) {
	q, limit, err := s.toolCallsQuery(ctx, f)
	if err != nil {
		return nil, "", err
	}
	var rows []toolCallModel
	if err := q.Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("store: tool calls: %w", err)
	}
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		next = encodeCursor(last.StartedAt, last.ID)
	}
	items = make([]ToolCallRow, len(rows))
	for i, r := range rows {
		items[i] = r.public()
	}
	return items, next, nil
}

// ToolCall returns one audit row; ErrNotFound (wrapped) when there is none.
func (s *Store) ToolCall(ctx context.Context, id int64) (ToolCallRow, error) {
	var m toolCallModel
	err := s.r.WithContext(ctx).Take(&m, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return ToolCallRow{}, fmt.Errorf("store: tool call %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return ToolCallRow{}, fmt.Errorf("store: tool call %d: %w", id, err)
	}
	return m.public(), nil
}

// ToolStat summarises the calls of one tool.
type ToolStat struct {
	Tool   string `json:"tool"`
	Source string `json:"source"`
	Server string `json:"server"`
	// Count is every matching call, running ones included.
	Count int `json:"count"`
	// Errors counts finished calls whose status is not ok.
	Errors int `json:"errors"`
	// ErrorRate is Errors over finished calls (0 when none finished).
	ErrorRate float64 `json:"error_rate"`
	// P50 and P95 are nearest-rank percentiles of the duration of finished calls (millisecond
	// resolution). In JSON they are p50_ms and p95_ms.
	P50 time.Duration `json:"-"`
	P95 time.Duration `json:"-"`
}

// MarshalJSON writes the percentiles as p50_ms and p95_ms.
func (t ToolStat) MarshalJSON() ([]byte, error) {
	type plain ToolStat
	return json.Marshal(struct {
		plain
		P50 int64 `json:"p50_ms"`
		P95 int64 `json:"p95_ms"`
	}{plain(t), t.P50.Milliseconds(), t.P95.Milliseconds()})
}

// ToolStats summarises the calls matching f per tool (source and server), busiest first. Limit and
// Cursor are ignored.
func (s *Store) ToolStats(ctx context.Context, f ToolCallFilter) ([]ToolStat, error) {
	type agg struct {
		ToolName, Source, Server string
		N, Finished, Errors      int
	}
	var aggs []agg
	err := f.where(s.r.WithContext(ctx).Model(&toolCallModel{})).
		Select(`tool_name, source, server, COUNT(*) AS n,
			SUM(CASE WHEN status <> ? THEN 1 ELSE 0 END) AS finished,
			SUM(CASE WHEN status NOT IN (?, ?) THEN 1 ELSE 0 END) AS errors`,
			StatusRunning, StatusRunning, StatusOK).
		Group("tool_name, source, server").Order("n DESC, tool_name, source, server").
		Scan(&aggs).Error
	if err != nil {
		return nil, fmt.Errorf("store: tool stats: %w", err)
	}
	// Nearest-rank percentiles, one pass with window functions (SQLite >= 3.25 and PostgreSQL).
	ranked := f.where(s.r.WithContext(ctx).Model(&toolCallModel{})).
		Where("status <> ?", StatusRunning).
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
		return nil, fmt.Errorf("store: tool stats percentiles: %w", err)
	}
	type key struct{ t, so, se string }
	p50 := map[key]int64{}
	p95 := map[key]int64{}
	for _, p := range pcts {
		k := key{p.ToolName, p.Source, p.Server}
		if p.Rn == (p.Cnt*50+99)/100 {
			p50[k] = p.DurationMs
		}
		if p.Rn == (p.Cnt*95+99)/100 {
			p95[k] = p.DurationMs
		}
	}
	out := make([]ToolStat, 0, len(aggs))
	for _, a := range aggs {
		k := key{a.ToolName, a.Source, a.Server}
		st := ToolStat{Tool: a.ToolName, Source: a.Source, Server: a.Server, Count: a.N,
			Errors: a.Errors, P50: time.Duration(p50[k]) * time.Millisecond,
			P95: time.Duration(p95[k]) * time.Millisecond}
		if a.Finished > 0 {
			st.ErrorRate = float64(a.Errors) / float64(a.Finished)
		}
		out = append(out, st)
	}
	return out, nil
}
