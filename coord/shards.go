package coord

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
)

// Shards shares the gateway shards of one bot among the replicas that run it. Each shard is a
// Lease (a session advisory lock on a pinned connection), so it has one holder and passes on the
// moment its holder's connection dies. A replica holds at most ceil(shards / replicas taking
// part), so the shards spread: a replica over its share (a new replica joined) gives up its
// highest shard, and one under its share takes any shard nobody holds. The replicas taking part
// are counted by a shared advisory lock each holds on a pinned connection while it takes part
// (pg_locks lists its holders), so a replica that dies stops counting, and its shards are taken
// by the others, within RetryEvery.
//
// Advisory locks belong to the database, not to a schema: lock names carry the schema, so two
// deployments in two schemas of one database do not share shards.
type Shards struct {
	db   *sql.DB
	name string
	// member, when set, fences the shards' leases and the connection that counts this replica
	// among the participants (Lease.member).
	member *Member
	// RetryEvery is how often a replica under its share tries to take a free shard, and twice
	// the rate at which a holder checks its connection and its share. 0 means 2s.
	RetryEvery time.Duration
}

// NewShards returns the shards of the bot called name (a digest of its token, say) over db.
func NewShards(db *sql.DB, name string) *Shards {
	return &Shards{db: db, name: name}
}

// ShardLease is the lease of one shard of a Join. It implements adapters.HandOff: a shard given
// up (the replica is over its share) ends its held context with an *adapters.GivenUp, whose
// HandedOver waits (at most HandOffLimit) until the replica that took the shard serves it.
type ShardLease struct {
	g     *shardGroup
	id    int
	lease *Lease

	mu    sync.Mutex
	serve func(context.Context) error // the current term's, nil while not held
}

// shardGroup is this replica's part in sharing count shards: which it holds.
type shardGroup struct {
	db      *sql.DB
	count   int
	every   time.Duration
	members *Lease // its key is the shared lock every replica taking part holds

	mu   sync.Mutex
	held map[int]bool
}

// Join takes part in sharing count shards until ctx ends, and returns the lease of each shard,
// by shard id. Replicas that join with another count (Discord recommended another between their
// starts) share the shards of their count among themselves.
func (s *Shards) Join(ctx context.Context, count int) ([]*ShardLease, error) {
	if count < 1 {
		return nil, fmt.Errorf("coord: %d shards: want at least 1", count)
	}
	var schema string
	if err := s.db.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return nil, fmt.Errorf("coord: shards of %s: %w", s.name, err)
	}
	every := s.RetryEvery
	if every <= 0 {
		every = 2 * time.Second
	}
	prefix := fmt.Sprintf("%s %s", schema, s.name)
	members := NewLease(s.db, fmt.Sprintf("%s members of %d", prefix, count))
	members.member = s.member
	g := &shardGroup{db: s.db, count: count, every: every, held: map[int]bool{}, members: members}
	conn, err := g.takePart(ctx)
	if err != nil {
		return nil, fmt.Errorf("coord: join the shards of %s: %w", s.name, err)
	}
	go g.keepPart(ctx, conn)
	leases := make([]*ShardLease, count)
	for i := range leases {
		l := NewLease(s.db, fmt.Sprintf("%s shard %d/%d", prefix, i, count))
		l.RetryEvery = every
		l.member = s.member
		leases[i] = &ShardLease{g: g, id: i, lease: l}
	}
	return leases, nil
}

// takePart takes the shared lock that counts this replica among the participants, on a pinned
// connection, named after the replica and its epoch when fenced (as a Lease's).
func (g *shardGroup) takePart(ctx context.Context) (*sql.Conn, error) {
	m := g.members
	epoch, err := m.await(ctx)
	if err != nil {
		return nil, err
	}
	conn, err := g.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if m.member == nil {
		_, err = conn.ExecContext(ctx, `SELECT pg_advisory_lock_shared($1)`, m.key)
	} else {
		_, err = conn.ExecContext(ctx, `SELECT set_config('application_name', $2, false), set_config('tcp_keepalives_idle', $3, false),
			set_config('tcp_keepalives_interval', $4, false), set_config('tcp_keepalives_count', $5, false), pg_advisory_lock_shared($1)`,
			m.key, holderName(m.member.ID(), epoch), fmt.Sprint(leaseKeepaliveIdle), fmt.Sprint(leaseKeepaliveInterval), fmt.Sprint(leaseKeepaliveCount))
	}
	if err != nil {
		discard(conn)
		return nil, err
	}
	return conn, nil
}

// keepPart holds the participant's connection until ctx ends, checking it every g.every and
// taking part again on a new one when it was lost (a takeover ended it, or the database blipped),
// so a replica back from a pause counts again. The connection is closed, not pooled: PostgreSQL
// frees the lock with the session.
func (g *shardGroup) keepPart(ctx context.Context, conn *sql.Conn) {
	t := time.NewTicker(g.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if conn != nil {
				discard(conn)
			}
			return
		case <-t.C:
		}
		if conn != nil {
			cctx, cancel := context.WithTimeout(ctx, g.every)
			err := conn.PingContext(cctx)
			cancel()
			if err == nil {
				continue
			}
			discard(conn)
			conn = nil
		}
		cctx, cancel := context.WithTimeout(ctx, g.every)
		conn, _ = g.takePart(cctx)
		cancel()
	}
}

// ShardBlip is how long a shard's holder tries to take its lock again after its session was lost,
// before it closes the shard's gateway connection: a database blip shorter than that keeps the
// gateway session (Discord goes on sending its events to it) instead of losing what Discord sends
// until another replica identifies.
const ShardBlip = 10 * time.Second

// ID is the shard's id.
func (l *ShardLease) ID() int { return l.id }

// Acquire implements adapters.Lease: it returns once this replica holds the shard, which it
// tries every RetryEvery while it holds less than its share. The held context also ends when
// the replica is over its share and this is its highest shard.
func (l *ShardLease) Acquire(ctx context.Context) (context.Context, func(), error) {
	g := l.g
	for {
		if conn, epoch, ok := g.claim(ctx, l); ok {
			held, release, serve := l.lease.hold(ctx, conn, epoch, g.every, l.keep, ShardBlip)
			l.mu.Lock()
			l.serve = serve
			l.mu.Unlock()
			return held, func() {
				l.mu.Lock()
				l.serve = nil
				l.mu.Unlock()
				release()
				g.mu.Lock()
				delete(g.held, l.id)
				g.mu.Unlock()
			}, nil
		}
		t := time.NewTimer(g.every)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, ctx.Err()
		case <-t.C:
		}
	}
}

// claim takes the shard's lock when this replica holds less than its share, under the epoch it
// returns (once the fence is open). Claims of one replica go one at a time, so its share is
// never overrun by a race of its own.
func (g *shardGroup) claim(ctx context.Context, l *ShardLease) (*sql.Conn, int64, bool) {
	epoch, err := l.lease.await(ctx)
	if err != nil {
		return nil, 0, false
	}
	share := g.share(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.held) >= share || g.held[l.id] {
		return nil, 0, false
	}
	conn, ok, err := l.lease.try(ctx, epoch)
	if err != nil || !ok {
		return nil, 0, false
	}
	g.held[l.id] = true
	return conn, epoch, true
}

// HandOffLimit is the longest a replica that gave a shard up keeps its gateway session open
// waiting for the replica that took the shard to serve it.
const HandOffLimit = 30 * time.Second

// Serving implements adapters.HandOff: this replica's gateway session of the shard is READY.
func (l *ShardLease) Serving(ctx context.Context) error {
	l.mu.Lock()
	serve := l.serve
	l.mu.Unlock()
	if serve == nil {
		return fmt.Errorf("coord: shard %d is not held", l.id)
	}
	return serve(ctx)
}

// keep reports whether the replica keeps holding the shard: not when it holds more than its
// share and this is its highest shard (the shards it keeps are the low ones, so the replicas
// settle on one split). A shard not kept is given up (hold's cause is an *adapters.GivenUp).
func (l *ShardLease) keep(ctx context.Context) bool {
	g := l.g
	share := g.share(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.held) <= share {
		return true
	}
	highest := -1
	for id := range g.held {
		highest = max(highest, id)
	}
	if highest != l.id {
		return true
	}
	delete(g.held, l.id) // given up now, so another shard of this replica does not give up too
	return false
}

// share is the most shards this replica holds: ceil(count / replicas taking part). A count that
// cannot be read leaves the share at every shard: the locks still keep each shard to one holder.
func (g *shardGroup) share(ctx context.Context) int {
	n, err := g.participants(ctx)
	if err != nil || n < 1 {
		n = 1
	}
	return (g.count + n - 1) / n
}

// participants counts the replicas taking part: the sessions holding the shared lock.
func (g *shardGroup) participants(ctx context.Context) (int, error) {
	var n int
	err := g.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND mode = 'ShareLock'
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND ((classid::bigint << 32) | objid::bigint) = $1::bigint`, g.members.key).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("coord: count the replicas sharing shards: %w", err)
	}
	return n, nil
}
