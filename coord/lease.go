package coord

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"hash/fnv"
	"time"
)

// Lease is a named role held by one replica at a time: a PostgreSQL session advisory lock on a
// connection pinned for as long as it is held. When the holder dies its connection closes and
// the database frees the lock at once; the others retry every RetryEvery. It implements
// adapters.Lease.
type Lease struct {
	db   *sql.DB
	name string
	key  int64
	// RetryEvery is how often a replica waiting for the lease tries again, and how often the
	// holder checks that its connection (so its lock) is still there. 0 means 2s.
	RetryEvery time.Duration
}

// NewLease returns the lease called name over db.
func NewLease(db *sql.DB, name string) *Lease {
	h := fnv.New64a()
	h.Write([]byte("relaybot lease " + name))
	return &Lease{db: db, name: name, key: int64(h.Sum64())}
}

// Acquire implements adapters.Lease.
func (l *Lease) Acquire(ctx context.Context) (context.Context, func(), error) {
	every := l.RetryEvery
	if every <= 0 {
		every = 2 * time.Second
	}
	for {
		conn, ok, err := l.try(ctx)
		if err == nil && ok {
			held, release := l.hold(ctx, conn, every, nil, 0)
			return held, release, nil
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, ctx.Err()
		case <-t.C:
		}
	}
}

// try takes the lock on a connection of its own, which it keeps when the lock was taken.
func (l *Lease) try(ctx context.Context) (*sql.Conn, bool, error) {
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("coord: lease %s: %w", l.name, err)
	}
	var ok bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, l.key).Scan(&ok); err != nil {
		discard(conn)
		return nil, false, fmt.Errorf("coord: lease %s: %w", l.name, err)
	}
	if !ok {
		conn.Close()
		return nil, false, nil
	}
	return conn, true, nil
}

// hold watches the pinned connection: the held context ends when a check fails (the database
// may have dropped the session, and with it the lock), keep (when set, asked after each good
// check) says to give the lease up, or ctx ends. With retake > 0 a failed check first tries, for
// up to retake, to take the lock again on a new connection: a database blip shorter than that
// (a failover, a dropped connection) keeps the lease, and whatever it guards, when nobody took
// the lock meanwhile.
func (l *Lease) hold(ctx context.Context, conn *sql.Conn, every time.Duration, keep func(context.Context) bool, retake time.Duration) (context.Context, func()) {
	held, lost := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every / 2)
		defer t.Stop()
		for {
			select {
			case <-held.Done():
				return
			case <-t.C:
			}
			cctx, cancel := context.WithTimeout(held, every)
			err := conn.PingContext(cctx)
			cancel()
			if err != nil && retake > 0 {
				discard(conn)
				var ok bool
				if conn, ok = l.retake(held, every, retake); ok {
					continue
				}
				conn = nil
			}
			if err != nil || (keep != nil && !keep(held)) {
				lost()
				return
			}
		}
	}()
	release := func() {
		lost()
		<-done
		if conn == nil {
			return // lost with its session
		}
		// A connection whose unlock failed may still hold the lock: it is closed, not pooled.
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := conn.ExecContext(cctx, `SELECT pg_advisory_unlock($1)`, l.key); err != nil {
			discard(conn)
			return
		}
		conn.Close()
	}
	return held, release
}

// retake tries to take the lock again every every/2 for up to d, and gives up at once when
// another session holds it.
func (l *Lease) retake(ctx context.Context, every, d time.Duration) (*sql.Conn, bool) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		cctx, cancel := context.WithTimeout(ctx, every)
		conn, ok, err := l.try(cctx)
		cancel()
		switch {
		case err == nil && ok:
			return conn, true
		case err == nil:
			return nil, false // another replica holds it now
		case ctx.Err() != nil:
			return nil, false
		}
		t := time.NewTimer(every / 2)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, false
		case <-t.C:
		}
	}
	return nil, false
}

// discard closes conn for good instead of returning it to the pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}
