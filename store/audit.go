package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Audit statuses of the DESIGN contract.
const (
	StatusRunning     = "running"
	StatusOK          = "ok"
	StatusError       = "error"
	StatusTimeout     = "timeout"
	StatusNotFound    = "not_found"
	StatusBadArgs     = "bad_args"
	StatusCancelled   = "cancelled"
	StatusDenied      = "denied"
	StatusInterrupted = "interrupted"
)

// ToolCallRecord is one audit row as the tool manager writes it; its fields follow tools.Record
// (cmd/bot converts one into the other, the store does not import tools).
type ToolCallRecord struct {
	ID             int64 // set by StartToolCall
	TurnID         int64
	ConversationID int64
	Platform       string
	ChatID         string
	UserID         string
	Round          int
	ToolCallID     string
	ToolName       string
	Source         string // native | plugin | mcp | skill; empty when no loader has the tool
	Server         string
	Status         string
	Arguments      string // already redacted and capped
	Result         string // already redacted and capped
	Error          string
	ArgumentsSize  int // size before capping
	ResultSize     int
	StartedAt      time.Time
	FinishedAt     time.Time
	Duration       time.Duration
	// ServerTool is the MCP server's own name of a tool its tool_prefix renamed.
	ServerTool string
	// ApprovalRequired, Decision, Approver and DecidedAt record the approval of a call a tool
	// policy asked about (tools.Record).
	ApprovalRequired bool
	Decision         string
	Approver         string
	DecidedAt        time.Time
}

// StartToolCall writes the row of a call that is starting (status running unless r.Status says
// otherwise) and sets r.ID. The row is committed before it returns. Many concurrent callers share
// one commit. Once the row is handed to the writer the call waits for the commit even if ctx ends,
// so the row and r.ID stay consistent.
func (s *Store) StartToolCall(ctx context.Context, r *ToolCallRecord) error {
	if r == nil {
		return errors.New("store: start tool call: nil record")
	}
	if r.ToolName == "" {
		return fmt.Errorf("store: start tool call %q: no tool name", r.ToolCallID)
	}
	row := *r
	if row.Status == "" {
		row.Status = StatusRunning
	}
	if row.StartedAt.IsZero() {
		row.StartedAt = time.Now()
	}
	row.StartedAt = dbTime(row.StartedAt)
	id, err := s.audit.do(ctx, auditStart, &row)
	if err != nil {
		return fmt.Errorf("store: start tool call %s (%s): %w", r.ToolName, r.ToolCallID, err)
	}
	r.ID = id
	r.Status = row.Status
	r.StartedAt = row.StartedAt
	return nil
}

// FinishToolCall completes the row of r (by r.ID) with its outcome. A record whose start was never
// written (ID 0) is written whole, so no call goes unrecorded. Cancellation of ctx does not stop
// the write: a cancelled call must be recorded too.
func (s *Store) FinishToolCall(ctx context.Context, r *ToolCallRecord) error {
	if r == nil {
		return errors.New("store: finish tool call: nil record")
	}
	row := *r
	if row.Status == "" || row.Status == StatusRunning {
		return fmt.Errorf("store: finish tool call %d (%s): status %q is not an outcome", r.ID, r.ToolName, row.Status)
	}
	if row.FinishedAt.IsZero() {
		row.FinishedAt = time.Now()
	}
	row.FinishedAt = dbTime(row.FinishedAt)
	if row.StartedAt.IsZero() {
		row.StartedAt = row.FinishedAt.Add(-row.Duration)
	}
	row.StartedAt = dbTime(row.StartedAt)
	if row.Duration == 0 {
		row.Duration = row.FinishedAt.Sub(row.StartedAt)
	}
	id, err := s.audit.do(context.WithoutCancel(ctx), auditFinish, &row)
	if err != nil {
		return fmt.Errorf("store: finish tool call %d (%s): %w", r.ID, r.ToolName, err)
	}
	r.ID = id
	r.FinishedAt = row.FinishedAt
	return nil
}

type auditOp int

const (
	auditStart auditOp = iota
	auditFinish
)

type auditReq struct {
	op   auditOp
	rec  *ToolCallRecord // a copy owned by the writer until done is signalled
	id   int64
	err  error
	done chan struct{}
}

// auditWriter is the one goroutine that writes audit rows. It takes whatever requests are
// waiting (up to batch) and commits them in one transaction.
type auditWriter struct {
	s      *Store
	batch  int
	reqs   chan *auditReq
	mu     sync.RWMutex // guards closed against sends on a closed channel
	closed bool
	wg     sync.WaitGroup
}

func newAuditWriter(s *Store, batch int) *auditWriter {
	w := &auditWriter{s: s, batch: batch, reqs: make(chan *auditReq, batch)}
	w.wg.Add(1)
	go w.run()
	return w
}

func (w *auditWriter) do(ctx context.Context, op auditOp, rec *ToolCallRecord) (int64, error) {
	req := &auditReq{op: op, rec: rec, done: make(chan struct{})}
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return 0, ErrClosed
	}
	select {
	case w.reqs <- req:
	case <-ctx.Done():
		w.mu.RUnlock()
		return 0, ctx.Err()
	}
	w.mu.RUnlock()
	<-req.done
	return req.id, req.err
}

// close refuses new requests and waits until every request handed in is written.
func (w *auditWriter) close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.reqs)
	}
	w.mu.Unlock()
	w.wg.Wait()
}

func (w *auditWriter) run() {
	defer w.wg.Done()
	batch := make([]*auditReq, 0, w.batch)
	for req := range w.reqs {
		batch = append(batch[:0], req)
	fill:
		for len(batch) < w.batch {
			select {
			case r, ok := <-w.reqs:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			default:
				break fill
			}
		}
		w.write(batch)
	}
}

// write commits a batch in one transaction. If that fails, each request is retried in its own
// transaction so one bad row does not take the others down.
func (w *auditWriter) write(batch []*auditReq) {
	// The writer outlives any caller's context; a write is bounded by the busy timeout.
	ctx := context.Background()
	if err := w.writeTx(ctx, batch); err != nil {
		for _, r := range batch {
			if err := w.writeTx(ctx, []*auditReq{r}); err != nil {
				r.err = err
			}
		}
	}
	for _, r := range batch {
		close(r.done)
	}
}

func (w *auditWriter) writeTx(ctx context.Context, batch []*auditReq) error {
	tx, err := w.s.wsql.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit the rollback is a no-op
	ids := make([]int64, len(batch))
	for i, r := range batch {
		if ids[i], err = w.s.writeAudit(ctx, tx, r.op, r.rec); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	for i, r := range batch {
		r.id = ids[i]
	}
	return nil
}

const insertToolCallSQL = `INSERT INTO tool_calls (turn_id, conversation_id, platform, chat_id, user_id,
round, tool_call_id, tool_name, source, server, status, arguments, result, error, arguments_size,
result_size, started_at, finished_at, duration_ms, server_tool, approval_required, decision,
approver, decided_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`

const finishToolCallSQL = `UPDATE tool_calls SET status = ?, result = ?, error = ?, arguments = ?,
arguments_size = ?, result_size = ?, source = ?, server = ?, finished_at = ?, duration_ms = ?,
server_tool = ?, approval_required = ?, decision = ?, approver = ?, decided_at = ?
WHERE id = ?`

func (s *Store) writeAudit(ctx context.Context, tx *sql.Tx, op auditOp, r *ToolCallRecord) (int64, error) {
	var finished, decided any
	if !r.FinishedAt.IsZero() {
		finished = r.FinishedAt
	}
	if !r.DecidedAt.IsZero() {
		decided = dbTime(r.DecidedAt)
	}
	if op == auditFinish && r.ID > 0 {
		res, err := tx.ExecContext(ctx, s.rebind(finishToolCallSQL), r.Status, r.Result, r.Error,
			r.Arguments, r.ArgumentsSize, r.ResultSize, r.Source, r.Server, finished,
			r.Duration.Milliseconds(), r.ServerTool, r.ApprovalRequired, r.Decision, r.Approver,
			decided, r.ID)
		if err != nil {
			return 0, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return 0, err
		} else if n == 1 {
			return r.ID, nil
		}
		// The row is gone (swept by retention); write it whole below.
	}
	var id int64
	err := tx.QueryRowContext(ctx, s.rebind(insertToolCallSQL), r.TurnID, r.ConversationID,
		r.Platform, r.ChatID, r.UserID, r.Round, r.ToolCallID, r.ToolName, r.Source, r.Server,
		r.Status, r.Arguments, r.Result, r.Error, r.ArgumentsSize, r.ResultSize, r.StartedAt,
		finished, r.Duration.Milliseconds(), r.ServerTool, r.ApprovalRequired, r.Decision,
		r.Approver, decided).Scan(&id)
	return id, err
}
