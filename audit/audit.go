// Package audit holds the nouns of the tool-call audit log: the status of a call, the source of a
// tool, the Record of one call, and Log, the one interface every reader of the log goes through
// (the admin pages and API, the bot audit command, /audit in chat and the audit_query plugin). It
// imports nothing of this module, so every package may import it; the store implements Log and
// writes Records, the tool manager fills them.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"
)

// Status is how one tool call ended, or running while it has not.
type Status string

// The statuses of the DESIGN audit contract.
const (
	StatusRunning  Status = "running"
	StatusOK       Status = "ok"
	StatusError    Status = "error"
	StatusTimeout  Status = "timeout"
	StatusNotFound Status = "not_found"
	// StatusUnavailable: the tool is a known server's, and that server is down, restarting or
	// waiting for an admin's login; the row names the server.
	StatusUnavailable Status = "unavailable"
	StatusBadArgs     Status = "bad_args"
	StatusCancelled   Status = "cancelled"
	StatusDenied      Status = "denied"
	StatusInterrupted Status = "interrupted"
)

// Statuses lists every status, running and ok first, then the failures.
var Statuses = []Status{StatusRunning, StatusOK, StatusError, StatusTimeout, StatusNotFound,
	StatusUnavailable, StatusBadArgs, StatusCancelled, StatusDenied, StatusInterrupted}

// Valid reports whether s is one of Statuses.
func (s Status) Valid() bool { return slices.Contains(Statuses, s) }

// Failed reports whether s is the outcome of a call that did not succeed (neither ok nor running).
func (s Status) Failed() bool { return s.Valid() && s != StatusOK && s != StatusRunning }

// Source names where a tool comes from.
type Source string

// The four tool sources, in the order the tool manager asks them.
const (
	SourceNative Source = "native"
	SourcePlugin Source = "plugin"
	SourceMCP    Source = "mcp"
	SourceSkill  Source = "skill"
)

// Sources lists the sources in the order the tool manager asks them.
var Sources = []Source{SourceNative, SourcePlugin, SourceMCP, SourceSkill}

// Valid reports whether s is one of Sources.
func (s Source) Valid() bool { return slices.Contains(Sources, s) }

// Decision is how an approval question about a tool call ended.
type Decision string

// The decisions of an approval question.
const (
	DecisionApproved  Decision = "approved"
	DecisionAlways    Decision = "always" // approved, and not asked again for this tool in this chat
	DecisionDenied    Decision = "denied"
	DecisionTimeout   Decision = "timeout"   // nobody answered in time: denied
	DecisionCancelled Decision = "cancelled" // the turn ended first (/stop, shutdown, restart): denied
)

// Decisions lists every decision, the approvals first.
var Decisions = []Decision{DecisionApproved, DecisionAlways, DecisionDenied, DecisionTimeout, DecisionCancelled}

// Valid reports whether d is one of Decisions.
func (d Decision) Valid() bool { return slices.Contains(Decisions, d) }

// Approved reports whether d lets the call run.
func (d Decision) Approved() bool { return d == DecisionApproved || d == DecisionAlways }

// Record is one audit row: one tool call, written when it starts (Status running, FinishedAt zero)
// and completed when it ends. In JSON it has the DESIGN contract's shape: finished_at is null while
// the call runs and the duration is duration_ms. The gorm tags let the store keep Record as its row
// (they are plain struct tags; this package does not import GORM): FinishedAt and Duration are
// stored in another form, so the store maps those two itself.
type Record struct {
	ID             int64 `gorm:"primaryKey"` // set by the writer when the call starts
	TurnID         int64
	ConversationID int64
	Platform       string
	ChatID         string
	UserID         string
	Round          int
	ToolCallID     string // the model's tool_call_id
	ToolName       string
	Source         Source // empty when no loader has the tool
	Server         string // the MCP server; empty for other sources
	Status         Status
	Arguments      string // redacted JSON, capped
	Result         string // redacted, capped
	Error          string
	ArgumentsSize  int // size before capping
	ResultSize     int
	StartedAt      time.Time
	FinishedAt     time.Time     `gorm:"-"` // zero while running
	Duration       time.Duration `gorm:"-"`
	// ServerTool is the MCP server's own name of the tool when its tool_prefix renamed it for
	// the model; empty otherwise.
	ServerTool string
	// ApprovalRequired is set on a call a tool policy asked about; Decision is how that ended
	// (approved, always, denied, timeout, cancelled), Approver who decided (their display name),
	// ApproverID their platform id (names can be changed to look like anyone's) and DecidedAt
	// when (zero until decided).
	ApprovalRequired bool
	Decision         Decision
	Approver         string
	ApproverID       string
	DecidedAt        time.Time `gorm:"-"`
	// TraceID is the OpenTelemetry trace of the call's turn (32 hex digits); empty when the
	// turn was not traced.
	TraceID string
	// Progress is the last progress message the call reported while it ran; empty when it
	// reported none.
	Progress string
	// Elicitation holds the questions the tool asked the user during the call, as a JSON array
	// of {message, mode, url, action, answer, by, at, note} (the answer redacted); empty when it
	// asked none.
	Elicitation string
}

// recordJSON is the wire form of a Record.
type recordJSON struct {
	ID               int64      `json:"id"`
	TurnID           int64      `json:"turn_id"`
	ConversationID   int64      `json:"conversation_id"`
	Platform         string     `json:"platform"`
	ChatID           string     `json:"chat_id"`
	UserID           string     `json:"user_id"`
	Round            int        `json:"round"`
	ToolCallID       string     `json:"tool_call_id"`
	ToolName         string     `json:"tool_name"`
	Source           Source     `json:"source"`
	Server           string     `json:"server"`
	Status           Status     `json:"status"`
	Arguments        string     `json:"arguments"`
	Result           string     `json:"result"`
	Error            string     `json:"error"`
	StartedAt        time.Time  `json:"started_at"`
	FinishedAt       *time.Time `json:"finished_at"`
	DurationMS       int64      `json:"duration_ms"`
	ArgumentsSize    int        `json:"arguments_size"`
	ResultSize       int        `json:"result_size"`
	ServerTool       string     `json:"server_tool,omitempty"`
	ApprovalRequired bool       `json:"approval_required"`
	Decision         Decision   `json:"decision,omitempty"`
	Approver         string     `json:"approver,omitempty"`
	ApproverID       string     `json:"approver_id,omitempty"`
	DecidedAt        *time.Time `json:"decided_at,omitempty"`
	TraceID          string     `json:"trace_id"`
	Progress         string     `json:"progress,omitempty"`
	Elicitation      string     `json:"elicitation,omitempty"`
}

// MarshalJSON writes r in the DESIGN contract's shape.
func (r Record) MarshalJSON() ([]byte, error) {
	j := recordJSON{ID: r.ID, TurnID: r.TurnID, ConversationID: r.ConversationID, Platform: r.Platform,
		ChatID: r.ChatID, UserID: r.UserID, Round: r.Round, ToolCallID: r.ToolCallID, ToolName: r.ToolName,
		Source: r.Source, Server: r.Server, Status: r.Status, Arguments: r.Arguments, Result: r.Result,
		Error: r.Error, StartedAt: r.StartedAt, DurationMS: r.Duration.Milliseconds(),
		ArgumentsSize: r.ArgumentsSize, ResultSize: r.ResultSize, ServerTool: r.ServerTool,
		ApprovalRequired: r.ApprovalRequired, Decision: r.Decision, Approver: r.Approver, ApproverID: r.ApproverID, TraceID: r.TraceID,
		Progress: r.Progress, Elicitation: r.Elicitation}
	if !r.FinishedAt.IsZero() {
		j.FinishedAt = &r.FinishedAt
	}
	if !r.DecidedAt.IsZero() {
		j.DecidedAt = &r.DecidedAt
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the form MarshalJSON writes.
func (r *Record) UnmarshalJSON(b []byte) error {
	var j recordJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Record{ID: j.ID, TurnID: j.TurnID, ConversationID: j.ConversationID, Platform: j.Platform,
		ChatID: j.ChatID, UserID: j.UserID, Round: j.Round, ToolCallID: j.ToolCallID, ToolName: j.ToolName,
		Source: j.Source, Server: j.Server, Status: j.Status, Arguments: j.Arguments, Result: j.Result,
		Error: j.Error, StartedAt: j.StartedAt, Duration: time.Duration(j.DurationMS) * time.Millisecond,
		ArgumentsSize: j.ArgumentsSize, ResultSize: j.ResultSize, ServerTool: j.ServerTool,
		ApprovalRequired: j.ApprovalRequired, Decision: j.Decision, Approver: j.Approver, ApproverID: j.ApproverID, TraceID: j.TraceID,
		Progress: j.Progress, Elicitation: j.Elicitation}
	if j.FinishedAt != nil {
		r.FinishedAt = *j.FinishedAt
	}
	if j.DecidedAt != nil {
		r.DecidedAt = *j.DecidedAt
	}
	return nil
}

// Limits of one page of Log.ToolCalls.
const (
	DefaultLimit = 50
	MaxLimit     = 1000
)

// Order is the order Log.ToolCalls returns records in.
type Order int

// The orders of a page.
const (
	// Newest first: by start time, then id, descending. Pages continue with Cursor.
	Newest Order = iota
	// Slowest first: by duration, descending. There is only one page (no cursor).
	Slowest
)

// Filter selects audit records. Zero fields do not filter.
type Filter struct {
	Since, Until time.Time // started_at >= Since and < Until
	Tool         string
	// Statuses keeps records with any of these statuses.
	Statuses []Status
	Source   Source
	Server   string
	Platform string
	ChatID   string
	// ThreadID keeps the calls of one thread or forum topic of the chat (chat.Ref's ThreadID);
	// the log's rows name the chat only, so it is matched through their conversation.
	ThreadID string
	UserID   string
	TurnID   int64
	// Decision keeps records whose approval ended so (approved, always, denied, timeout,
	// cancelled); ApprovalRequired keeps the records a tool policy asked about.
	Decision         Decision
	ApprovalRequired bool
	// Text keeps the records whose tool name, arguments or result contain it, case aside
	// (as stored: redacted, and capped).
	Text string
	// Order of the page; Newest when zero. Log.ToolStats ignores it.
	Order Order
	// Limit is the page size: 0 means DefaultLimit; more than MaxLimit is cut to MaxLimit.
	Limit int
	// Cursor is the next value of the previous page; empty starts at the first record.
	Cursor string
	// After is a page's Prev (Page): the page holds the Limit records just newer than it, still
	// newest first, and its next value continues with older ones. Not with Cursor or Slowest.
	After string
}

// Page is one page of the log with the cursors on both sides: Next continues with older
// records (Filter.Cursor), Prev with newer ones (Filter.After); each is empty when there are none.
type Page struct {
	Items      []Record
	Next, Prev string
}

// Stat summarises the calls of one tool (of one source and server).
type Stat struct {
	Tool   string `json:"tool"`
	Source Source `json:"source"`
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
	// Finished counts the calls that are no longer running; Avg and Max are over their durations.
	// They are not part of the JSON form.
	Finished int           `json:"-"`
	Avg      time.Duration `json:"-"`
	Max      time.Duration `json:"-"`
}

// MarshalJSON writes the percentiles as p50_ms and p95_ms.
func (s Stat) MarshalJSON() ([]byte, error) {
	type plain Stat
	return json.Marshal(struct {
		plain
		P50 int64 `json:"p50_ms"`
		P95 int64 `json:"p95_ms"`
	}{plain(s), s.P50.Milliseconds(), s.P95.Milliseconds()})
}

// Errors a Log returns.
var (
	// ErrBadCursor is returned for a cursor that ToolCalls did not make, a cursor with Slowest,
	// or Cursor and After together.
	ErrBadCursor = errors.New("audit: bad cursor")
	// ErrNotFound is returned (wrapped) by ToolCall for an id that has no record.
	ErrNotFound = errors.New("audit: no such tool call")
)

// Log reads the audit log. Implementations are safe for concurrent use.
type Log interface {
	// ToolCalls returns the records matching f in f.Order, and the cursor of the next page (empty
	// on the last page).
	ToolCalls(ctx context.Context, f Filter) (items []Record, next string, err error)
	// ToolCall returns one record; an error wrapping ErrNotFound when there is none.
	ToolCall(ctx context.Context, id int64) (Record, error)
	// ToolStats summarises the calls matching f per tool, source and server, busiest first.
	// Order, Limit and Cursor are ignored.
	ToolStats(ctx context.Context, f Filter) ([]Stat, error)
}
