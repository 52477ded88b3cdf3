package coord

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"relaybot/adapters"
)

// Lease is a named role held by one replica at a time: a PostgreSQL session advisory lock on a
// connection pinned for as long as it is held. When the holder dies its connection closes and
// the database frees the lock at once; the others retry every RetryEvery. It implements
// adapters.Lease.
type Lease struct {
	db   *sql.DB
	name string
	key  int64
	// servedKey is the lock a holder that serves the lease takes, shared, on the lease's
	// connection (hold's serve): a replica that gave the lease up learns from pg_locks that the
	// new holder serves it.
	servedKey int64
	// member, when set, fences the lease: it is taken only while the member's fence is open,
	// its connection is named after the member and the epoch it was taken under (holderName) so
	// that a survivor taking that epoch over ends it (TakeOver), and it is given up once that
	// epoch is taken over.
	member *Member
	// RetryEvery is how often a replica waiting for the lease tries again, and how often the
	// holder checks that its connection (so its lock) is still there. 0 means 2s.
	RetryEvery time.Duration
}

// NewLease returns the lease called name over db.
func NewLease(db *sql.DB, name string) *Lease {
	h := fnv.New64a()
	h.Write([]byte("relaybot lease " + name))
	served := fnv.New64a()
	served.Write([]byte("relaybot lease " + name + " served"))
	return &Lease{db: db, name: name, key: int64(h.Sum64()), servedKey: int64(served.Sum64())}
}

// Acquire implements adapters.Lease.
func (l *Lease) Acquire(ctx context.Context) (context.Context, func(), error) {
	every := l.RetryEvery
	if every <= 0 {
		every = 2 * time.Second
	}
	for {
		epoch, err := l.await(ctx)
		if err == nil {
			conn, ok, err := l.try(ctx, epoch)
			if err == nil && ok {
				held, release, _ := l.hold(ctx, conn, epoch, every, nil, 0)
				return held, release, nil
			}
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

// await waits until the member's fence is open (at once without a member) and returns the epoch
// the lease is to be taken under (0 without a member).
func (l *Lease) await(ctx context.Context) (int64, error) {
	if l.member == nil {
		return 0, nil
	}
	epoch := l.member.Epoch()
	if err := l.fenced(ctx, epoch); err != nil {
		return 0, err
	}
	return epoch, nil
}

// fenced waits while the member's fence is closed; ErrTakenOver once epoch was taken over.
func (l *Lease) fenced(ctx context.Context, epoch int64) error {
	if l.member == nil {
		return nil
	}
	return l.member.Fence(context.WithValue(ctx, epochKey{}, epoch))
}

// takenOver reports, without waiting, whether the epoch a lease was taken under was taken over.
func (l *Lease) takenOver(epoch int64) bool {
	return l.member != nil && l.member.Epoch() != epoch
}

// Server-side TCP keepalives of a fenced lease's connection (seconds): a holder cut off by a
// network partition loses its session, so its lock, within about idle + interval*count, rather
// than at the operating system's default of hours.
const (
	leaseKeepaliveIdle     = 5
	leaseKeepaliveInterval = 2
	leaseKeepaliveCount    = 3
)

// holderName is the application_name of the connections holding a lease of replica id under
// epoch: a digest of the id (an application_name keeps 63 bytes) and the epoch.
func holderName(id string, epoch int64) string {
	h := fnv.New64a()
	h.Write([]byte(id))
	return fmt.Sprintf("relaybot lease %016x:%d", h.Sum64(), epoch)
}

// try takes the lock on a connection of its own, which it keeps when the lock was taken; a
// fenced lease names the connection after its holder and epoch and sets its keepalives in the
// same statement, only when the lock was taken.
func (l *Lease) try(ctx context.Context, epoch int64) (*sql.Conn, bool, error) {
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("coord: lease %s: %w", l.name, err)
	}
	var ok bool
	if l.member == nil {
		err = conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, l.key).Scan(&ok)
	} else {
		err = conn.QueryRowContext(ctx, `SELECT CASE WHEN pg_try_advisory_lock($1) THEN
				set_config('application_name', $2, false) <> '' AND set_config('tcp_keepalives_idle', $3, false) <> ''
				AND set_config('tcp_keepalives_interval', $4, false) <> '' AND set_config('tcp_keepalives_count', $5, false) <> ''
			ELSE FALSE END`, l.key, holderName(l.member.ID(), epoch), fmt.Sprint(leaseKeepaliveIdle),
			fmt.Sprint(leaseKeepaliveInterval), fmt.Sprint(leaseKeepaliveCount)).Scan(&ok)
	}
	if err != nil {
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
// check) says to give the lease up (the cause is then an *adapters.GivenUp), or ctx ends. With
// retake > 0 a failed check first tries, for up to retake, to take the lock again on a new
// connection: a database blip shorter than that (a failover, a dropped connection) keeps the
// lease, and whatever it guards, when nobody took the lock meanwhile.
//
// A fenced lease taken under epoch is also lost once that epoch is taken over (its connection
// was ended by the survivor, or is about to be), and a retake waits for the fence: a replica
// waking from a pause finds its session gone, learns at its renewal that it was taken over,
// and gives the lease up instead of taking the lock again for work that is no longer its own.
//
// serve takes the served lock on the lease's connection (and again on a retaken one), so it
// holds exactly as long as the lease does.
func (l *Lease) hold(ctx context.Context, conn *sql.Conn, epoch int64, every time.Duration, keep func(context.Context) bool, retake time.Duration) (context.Context, func(), func(context.Context) error) {
	h := &holding{l: l, conn: conn, epoch: epoch, every: every, keep: keep, retake: retake, done: make(chan struct{})}
	h.held, h.end = context.WithCancelCause(ctx)
	go h.watch()
	return h.held, h.release, h.serve
}

// holding is one hold of a lease: its pinned connection watched until the lease is lost, given
// up or released.
type holding struct {
	l      *Lease
	epoch  int64
	every  time.Duration
	keep   func(context.Context) bool
	retake time.Duration
	held   context.Context
	end    context.CancelCauseFunc
	done   chan struct{} // closed when watch returns

	mu      sync.Mutex // guards conn (swapped by a retake) and serving against serve
	conn    *sql.Conn
	serving bool
}

func (h *holding) lost(why string) { h.end(fmt.Errorf("coord: lease %s lost: %s", h.l.name, why)) }

// watch checks the lease every half period until it ends.
func (h *holding) watch() {
	defer close(h.done)
	t := time.NewTicker(h.every / 2)
	defer t.Stop()
	for {
		select {
		case <-h.held.Done():
			return
		case <-t.C:
		}
		if !h.check() {
			return
		}
	}
}

// check is one look at the lease: its epoch, its session (retaken after a blip when allowed),
// and whether to keep it. It reports whether the lease is still held.
func (h *holding) check() bool {
	if h.l.takenOver(h.epoch) {
		h.lost("its epoch was taken over")
		return false
	}
	h.mu.Lock()
	c := h.conn
	h.mu.Unlock()
	cctx, cancel := context.WithTimeout(h.held, h.every)
	err := c.PingContext(cctx)
	cancel()
	if err != nil && h.retake > 0 {
		// serve waits for the retake (it takes mu), so it marks the new connection and never
		// the one discarded here; the retake is bounded by h.retake and by the hold.
		h.mu.Lock()
		discard(c)
		next, ok := h.l.retake(h.held, h.epoch, h.every, h.retake)
		h.conn = next
		if ok && h.serving {
			if err := h.l.serve(h.held, next); err != nil {
				h.mu.Unlock()
				h.lost("its served lock not taken again: " + err.Error())
				return false
			}
		}
		h.mu.Unlock()
		if ok {
			return true
		}
	}
	if err != nil {
		h.lost("its session failed a check: " + err.Error())
		return false
	}
	if h.keep != nil && !h.keepNow() {
		h.end(&adapters.GivenUp{HandedOver: func(ctx context.Context) error { return h.l.handedOver(ctx, h.epoch, HandOffLimit) }})
		return false
	}
	return true
}

// keepNow asks keep within one check period: an answer that needs a connection of a pool with
// none free (keep counts the replicas) must not stall the watch, which would then miss the
// session's loss; keep reads an unanswered question as "keep".
func (h *holding) keepNow() bool {
	kctx, cancel := context.WithTimeout(h.held, h.every)
	defer cancel()
	return h.keep(kctx)
}

// release ends the hold and gives the lock back.
func (h *holding) release() {
	h.end(fmt.Errorf("coord: lease %s released", h.l.name))
	<-h.done
	h.mu.Lock()
	conn, wasServing := h.conn, h.serving
	h.mu.Unlock()
	if conn == nil {
		return // lost with its session
	}
	// A connection whose unlock failed may still hold the lock: it is closed, not pooled; so is
	// a named one (a takeover would end it in the pool), and one that held the served lock. The
	// served lock is given back here, not left to the session's end, so that a replica handing
	// the lease over never sees it served by a holder that has let it go.
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	if wasServing {
		_, err = conn.ExecContext(cctx, `SELECT pg_advisory_unlock($1), pg_advisory_unlock_shared($2)`, h.l.key, h.l.servedKey)
	} else {
		_, err = conn.ExecContext(cctx, `SELECT pg_advisory_unlock($1)`, h.l.key)
	}
	if err != nil || h.l.member != nil || wasServing {
		discard(conn)
		return
	}
	conn.Close()
}

// serve takes the served lock on the lease's connection while it is held.
func (h *holding) serve(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held.Err() != nil || h.conn == nil {
		return fmt.Errorf("coord: lease %s is no longer held", h.l.name)
	}
	if err := h.l.serve(ctx, h.conn); err != nil {
		return err
	}
	h.serving = true
	return nil
}

// serve takes the lease's served lock, shared, on conn.
func (l *Lease) serve(ctx context.Context, conn *sql.Conn) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var ok bool
	if err := conn.QueryRowContext(cctx, `SELECT pg_try_advisory_lock_shared($1)`, l.servedKey).Scan(&ok); err != nil {
		return fmt.Errorf("coord: lease %s: mark it served: %w", l.name, err)
	}
	if !ok {
		return fmt.Errorf("coord: lease %s: mark it served: its served lock is held exclusively", l.name)
	}
	return nil
}

// handOffCheck is how often a replica that gave a lease up looks whether its new holder serves
// it.
const handOffCheck = time.Second

// handedOver waits until a session holds the lease's served lock (the replica that took the
// lease over serves it), limit passes, or ctx ends. This replica's own served lock went with
// its connection at release. A fenced lease given up under epoch stops waiting once its fence
// closes or the epoch is taken over: such a replica stops serving at once, as one that lost
// the lease.
func (l *Lease) handedOver(ctx context.Context, epoch int64, limit time.Duration) error {
	end := time.NewTimer(limit)
	defer end.Stop()
	t := time.NewTicker(handOffCheck)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, handOffCheck)
		var served bool
		err := l.db.QueryRowContext(cctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE locktype = 'advisory' AND granted AND objsubid = 1
			  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			  AND ((classid::bigint << 32) | objid::bigint) = $1::bigint)`, l.servedKey).Scan(&served)
		cancel()
		if err == nil && served {
			return nil
		}
		if l.member != nil && (l.takenOver(epoch) || l.member.LiveFor() == 0) {
			return fmt.Errorf("coord: lease %s: this replica was fenced or taken over during the hand-off", l.name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-end.C:
			return fmt.Errorf("coord: lease %s: its new holder did not serve it within %s of the hand-off", l.name, limit)
		case <-t.C:
		}
	}
}

// retake tries to take the lock again every every/2 for up to d, and gives up at once when
// another session holds it or epoch was taken over; it waits for the fence before each try.
func (l *Lease) retake(ctx context.Context, epoch int64, every, d time.Duration) (*sql.Conn, bool) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		cctx, cancel := context.WithTimeout(ctx, every)
		var conn *sql.Conn
		var ok bool
		err := l.fenced(cctx, epoch)
		if errors.Is(err, ErrTakenOver) {
			cancel()
			return nil, false
		}
		if err == nil {
			conn, ok, err = l.try(cctx, epoch)
		}
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
