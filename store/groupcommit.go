package store

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
)

// groupWriter commits the per-turn writes of concurrent turns together. With synchronous=FULL
// every SQLite commit is an fsync (PostgreSQL's commit flushes its WAL too), and a busy bot makes
// two or three of them per turn; the writes waiting when the writer comes free share one
// transaction and one commit instead. Each write runs under its own savepoint, so a write that
// fails is rolled back alone and the others still commit. A caller is answered only after the
// commit that holds its write: durability is unchanged, nothing is acknowledged before it is on
// disk. A write waiting alone is committed at once, as before: there is no timer to wait out.
type groupWriter struct {
	db      *gorm.DB // the writer
	max     int      // writes per commit at most
	attempt writerAttempt
	jobs    chan *groupJob
	mu      sync.RWMutex // guards closed against sends on a closed channel
	closed  bool
	wg      sync.WaitGroup
	commits atomic.Int64 // transactions committed (or tried), for tests
}

type groupJob struct {
	fn   func(tx *gorm.DB) error
	err  error
	done chan struct{}
}

func newGroupWriter(db *gorm.DB, max int, attempt writerAttempt) *groupWriter {
	g := &groupWriter{db: db, max: max, attempt: attempt, jobs: make(chan *groupJob, max)}
	g.wg.Add(1)
	go g.run()
	return g
}

// do runs fn in a transaction shared with the writes waiting at the same time and returns once
// that transaction is committed (or fn failed and was rolled back). fn may run on another
// goroutine and must not keep tx. ctx bounds only the wait to be taken in: a write taken in is
// finished, bounded by the busy timeout, as the audit writer's are.
func (g *groupWriter) do(ctx context.Context, fn func(tx *gorm.DB) error) error {
	job := &groupJob{fn: fn, done: make(chan struct{})}
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return ErrClosed
	}
	select {
	case g.jobs <- job:
	case <-ctx.Done():
		g.mu.RUnlock()
		return ctx.Err()
	}
	g.mu.RUnlock()
	<-job.done
	return job.err
}

// close refuses new writes and waits until every write taken in is committed.
func (g *groupWriter) close() {
	g.mu.Lock()
	if !g.closed {
		g.closed = true
		close(g.jobs)
	}
	g.mu.Unlock()
	g.wg.Wait()
}

func (g *groupWriter) run() {
	defer g.wg.Done()
	batch := make([]*groupJob, 0, g.max)
	for job := range g.jobs {
		batch = append(batch[:0], job)
	fill:
		for len(batch) < g.max {
			select {
			case j, ok := <-g.jobs:
				if !ok {
					break fill
				}
				batch = append(batch, j)
			default:
				break fill
			}
		}
		g.commit(batch)
		for _, j := range batch {
			close(j.done)
		}
		clear(batch)
	}
}

// tx runs fn in a transaction within the writer's attempt: the writer outlives its callers'
// contexts, and a database that does not answer must not hold every write behind it.
func (g *groupWriter) tx(fn func(tx *gorm.DB) error) error {
	ctx, cancel := g.attempt.context()
	defer cancel()
	return g.db.WithContext(ctx).Transaction(fn)
}

// writerAttempt bounds one transaction of the store's writers (the group writer, the audit
// writer). On PostgreSQL it is WriteAttempt: a server that does not answer is away, and its
// network stalls end only by a deadline. On SQLite it is zero, no deadline: there is no network,
// a lock wait ends at the busy timeout (SQLITE_BUSY), and go-sqlite3 starts a goroutine for each
// statement step run under a context that can end, to interrupt it then, which was a tenth of
// the writer's CPU; the interrupt it pays for cannot end a stalled write(2) or fsync either.
type writerAttempt time.Duration

// context returns the context of one transaction: Background itself when there is no deadline,
// so no statement of it can be cancelled.
func (a writerAttempt) context() (context.Context, context.CancelFunc) {
	if a <= 0 {
		return context.Background(), func() {}
	}
	return context.WithTimeout(context.Background(), time.Duration(a))
}

// commit writes a batch in one transaction, each write under its own savepoint.
func (g *groupWriter) commit(batch []*groupJob) {
	g.commits.Add(1)
	if len(batch) == 1 {
		batch[0].err = g.tx(batch[0].fn)
		for try := 0; try < 3 && retryable(batch[0].err); try++ {
			batch[0].err = g.tx(batch[0].fn)
		}
		return
	}
	err := g.tx(func(tx *gorm.DB) error {
		for i, j := range batch {
			sp := "w" + strconv.Itoa(i)
			if err := tx.SavePoint(sp).Error; err != nil {
				return err
			}
			if j.err = j.fn(tx); j.err != nil {
				if err := tx.RollbackTo(sp).Error; err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		for _, j := range batch {
			if j.err == nil {
				j.err = err
			}
		}
		return
	}
	// A write that lost a deadlock to another replica's transaction (two batches taking the same
	// keys in opposite orders) was rolled back to its savepoint, alone: it runs again in a
	// transaction of its own, now that this batch's locks are released.
	for _, j := range batch {
		for try := 0; try < 3 && retryable(j.err); try++ {
			j.err = g.tx(j.fn)
		}
	}
}

// retryable reports whether err is PostgreSQL's verdict that the transaction lost a deadlock or
// a serialization conflict, which running the write again resolves.
func retryable(err error) bool {
	var state interface{ SQLState() string }
	if err == nil || !errors.As(err, &state) {
		return false
	}
	switch state.SQLState() {
	case "40P01", "40001": // deadlock_detected, serialization_failure
		return true
	}
	return false
}
