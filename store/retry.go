package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Write describes one database write on the message path for Retry.
type Write struct {
	// What names the write in the log ("the turn's end", "the ledger's done").
	What string
	// Attempt bounds each try; 0 means WriteAttempt.
	Attempt time.Duration
	// Idempotent says that the write landing twice is the write landing once (an UPDATE to a
	// value, an upsert, a DELETE): it is also tried again after a failure that leaves unknown
	// whether it landed (the connection lost mid-statement, the attempt's deadline).
	Idempotent bool
	// Log receives each failed try; nil discards them.
	Log *slog.Logger
}

// WriteAttempt is the deadline of one try of a write on the message path, and of one
// transaction of the store's writers (group commit, audit rows): a database that does not
// answer within it is treated as away, not waited for.
const WriteAttempt = 10 * time.Second

// The back-off between the tries of a write: the first wait, doubling up to the last.
const (
	retryFirst = 200 * time.Millisecond
	retryMax   = 5 * time.Second
)

// Retry runs fn, one database write on the message path, each try within w.Attempt, and tries
// it again with back-off (200 ms doubling to 5 s) while it fails in a way that makes another
// try safe: the database away before the statement reached it (Transient) or, for an idempotent
// write, any failure of the connection or the try's deadline. It stops at ctx's end, which is
// the write's bound (a turn's limit); it returns nil or fn's last error. A write that is refused
// (a turn already ended, a constraint) is not tried again.
func Retry(ctx context.Context, w Write, fn func(ctx context.Context) error) error {
	attempt := w.Attempt
	if attempt <= 0 {
		attempt = WriteAttempt
	}
	wait := retryFirst
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := fn(actx)
		timedOut := actx.Err() != nil
		cancel()
		if err == nil || ctx.Err() != nil || !(Transient(err) || w.Idempotent && (timedOut || lostConnection(err))) {
			return err
		}
		if w.Log != nil {
			w.Log.Warn("store: the database is away; writing again", "what", w.What, "in", wait, "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(wait*2, retryMax)
	}
}

// lostConnection reports whether err is the connection failing (mid-statement included), as
// opposed to the database refusing the statement.
func lostConnection(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, driver.ErrBadConn)
}

// Bound is ctx for a write that must outlive ctx's cancellation (a turn stopped still records
// how it ended) but not its limit: ctx's values, without its cancellation, until ctx's deadline
// or least from now, whichever is later (least from now when ctx has no deadline).
func Bound(ctx context.Context, least time.Duration) (context.Context, context.CancelFunc) {
	end := time.Now().Add(least)
	if d, ok := ctx.Deadline(); ok && d.After(end) {
		end = d
	}
	return context.WithDeadline(context.WithoutCancel(ctx), end)
}
