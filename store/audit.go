package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"

	"relaybot/audit"
)

// StartToolCall writes the row of a call that is starting (status running unless r.Status says
// otherwise) and sets r.ID. The row is committed before it returns; while the database is away
// the write is tried again (Retry) until ctx ends. Many concurrent callers share
// one commit. Once the row is handed to the writer the call waits for the commit even if ctx ends,
// so the row and r.ID stay consistent.
func (s *ToolCallQuery) StartToolCall(ctx context.Context, r *audit.Record) error {
	if r == nil {
		return errors.New("store: start tool call: nil record")
	}
	if r.ToolName == "" {
		return fmt.Errorf("store: start tool call %q: no tool name", r.ToolCallID)
	}
	row := *r
	if row.Status == "" {
		row.Status = audit.StatusRunning
	}
	if row.StartedAt.IsZero() {
		row.StartedAt = time.Now()
	}
	row.StartedAt = dbTime(row.StartedAt)
	var id int64
	err := Retry(ctx, Write{What: "a tool call's start", Log: s.log}, func(ctx context.Context) error {
		var err error
		id, err = s.audit.do(ctx, auditStart, &row)
		return err
	})
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
// the write (a cancelled call must be recorded too), its deadline does: while the database is
// away it is tried again (Retry) until then, or for WriteAttempt at least.
func (s *ToolCallQuery) FinishToolCall(ctx context.Context, r *audit.Record) error {
	if r == nil {
		return errors.New("store: finish tool call: nil record")
	}
	row := *r
	if row.Status == "" || row.Status == audit.StatusRunning {
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
	bctx, cancel := Bound(ctx, WriteAttempt)
	defer cancel()
	// Written by id, an update to the outcome, it may land twice; written whole (no id), it is
	// an insert.
	var id int64
	err := Retry(bctx, Write{What: "a tool call's end", Idempotent: row.ID > 0, Log: s.log}, func(ctx context.Context) error {
		var err error
		id, err = s.audit.do(ctx, auditFinish, &row)
		return err
	})
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
	rec  *audit.Record // a copy owned by the writer until done is signalled
	id   int64
	err  error
	done chan struct{}
}

// auditWriter is the one goroutine that writes audit rows. It takes whatever requests are
// waiting (up to batch) and commits them in one transaction.
type auditWriter struct {
	s      *conn
	batch  int
	reqs   chan *auditReq
	mu     sync.RWMutex // guards closed against sends on a closed channel
	closed bool
	wg     sync.WaitGroup
}

func newAuditWriter(s *conn, batch int) *auditWriter {
	w := &auditWriter{s: s, batch: batch, reqs: make(chan *auditReq, batch)}
	w.wg.Add(1)
	go w.run()
	return w
}

func (w *auditWriter) do(ctx context.Context, op auditOp, rec *audit.Record) (int64, error) {
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
	// The writer outlives any caller's context; each transaction is bounded by WriteAttempt on
	// PostgreSQL and by the busy timeout on SQLite (writerAttempt), so a database that does not
	// answer holds no call.
	if err := w.attempt(batch); err != nil {
		for _, r := range batch {
			if err := w.attempt([]*auditReq{r}); err != nil {
				r.err = err
			}
		}
	}
	for _, r := range batch {
		close(r.done)
	}
}

// attempt is one writeTx of batch within the store's writer attempt (writerAttempt).
func (w *auditWriter) attempt(batch []*auditReq) error {
	ctx, cancel := w.s.attempt.context()
	defer cancel()
	return w.writeTx(ctx, batch)
}

// writeTx writes a batch atomically through GORM, like every other write of the store: each
// finished call updates its row (a row gone meanwhile is written whole again), and the new rows go
// in one multi-row INSERT. A batch of one request runs without BEGIN and COMMIT around it.
func (w *auditWriter) writeTx(ctx context.Context, batch []*auditReq) error {
	ids := make([]int64, len(batch))
	write := func(tx *gorm.DB) error {
		var (
			rows []toolCallModel
			at   []int // batch index of each new row
		)
		for i, r := range batch {
			if r.op == auditFinish && r.rec.ID > 0 {
				done, err := finishAudit(tx, r.rec)
				if err != nil {
					return err
				}
				if done {
					ids[i] = r.rec.ID
					continue
				}
			}
			rows = append(rows, newToolCallModel(r.rec))
			at = append(at, i)
		}
		if len(rows) == 0 {
			return nil
		}
		// Chunks keep each INSERT well below both databases' limit on parameters.
		if err := tx.CreateInBatches(&rows, insertChunk).Error; err != nil {
			return err
		}
		for j, i := range at {
			ids[i] = rows[j].ID
		}
		return nil
	}
	db := w.s.w.WithContext(ctx)
	var err error
	if len(batch) == 1 {
		// One request needs no transaction: its statement is atomic on its own (a finish whose
		// row is gone updates nothing before its INSERT).
		err = write(db)
	} else {
		err = db.Transaction(write)
	}
	if err != nil {
		return err
	}
	for i, r := range batch {
		r.id = ids[i]
	}
	return nil
}

// finishToolCallSQL completes a tool_calls row. It is written out, not built from a map per
// call: the audit writer runs it for every finished call, and GORM's statement building cost
// more than the write itself.
const finishToolCallSQL = `UPDATE tool_calls SET status = ?, result = ?, error = ?, arguments = ?,
arguments_size = ?, result_size = ?, source = ?, server = ?, finished_at = ?, duration_ms = ?,
server_tool = ?, approval_required = ?, decision = ?, approver = ?, approver_id = ?, decided_at = ?, progress = ?,
elicitation = ? WHERE id = ?`

// finishAudit completes the row of r with its outcome; false when the row does not exist.
func finishAudit(tx *gorm.DB, r *audit.Record) (bool, error) {
	res := tx.Exec(finishToolCallSQL, string(r.Status), r.Result, r.Error, r.Arguments,
		r.ArgumentsSize, r.ResultSize, string(r.Source), r.Server, finishedAt(r), r.Duration.Milliseconds(),
		r.ServerTool, r.ApprovalRequired, r.Decision, r.Approver, r.ApproverID, decidedAt(r), r.Progress, r.Elicitation, r.ID)
	return res.RowsAffected == 1, res.Error
}

// insertChunk is the most audit rows one INSERT carries (28 parameters each).
const insertChunk = 256

// decidedAt is the decided_at of r's row: NULL until an approval is decided.
func decidedAt(r *audit.Record) *time.Time {
	if r.DecidedAt.IsZero() {
		return nil
	}
	t := r.DecidedAt
	return &t
}

// finishedAt is the finished_at of r's row: NULL while running.
func finishedAt(r *audit.Record) *time.Time {
	if r.FinishedAt.IsZero() {
		return nil
	}
	t := r.FinishedAt
	return &t
}
