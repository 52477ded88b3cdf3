// Package coord lets several replicas of `bot serve` share one PostgreSQL database as one bot,
// and keeps a single process on SQLite alone on its file.
//
// On PostgreSQL each replica joins as a member: a row in the instances table whose lease
// (expires_at, on the database's clock) it renews every TTL/3. A replica whose lease has expired
// is gone: its running turns are reclaimed by the others (store.Recover). Named leases (the
// Telegram poller) are session advisory locks held on one pinned connection, so the database
// frees them the moment the holder's connection dies; no consensus of our own.
//
// On SQLite there is one process: FileLock refuses a second one on the same database file.
//
// A Replica is what the rest of the bot sees of all this, one role at a time (roles.go). Adapters
// and the pipeline never import this package: they declare the small interfaces they need (a
// lease, the conversation gate) and cmd/bot hands each of them the Replica's. This package
// imports no platform and no delivery engine.
package coord

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultTTL is how long a member's lease lasts without a heartbeat.
const DefaultTTL = 6 * time.Second

// Options configure Join.
type Options struct {
	// ID is this replica's id, from NewID; empty means a new one. The store that runs this
	// replica's turns must carry the same id (store.Options.Instance).
	ID string
	// TTL is the lease of the member's row; it is renewed every TTL/3. 0 means DefaultTTL.
	TTL time.Duration
	// Logger receives heartbeat failures; nil discards them.
	Logger *slog.Logger
	// Sweep, when set, runs after every heartbeat: a Replica sweeps up after the replicas that
	// are gone, so the turns and audit rows of one that died end interrupted within a lease or
	// two.
	Sweep func(ctx context.Context) error
	// Members, when set, is told after every heartbeat how many replicas are live (this one
	// included): a Replica divides the platforms' bot-wide budgets by it.
	Members func(n int)
}

// Instance is one replica as the instances table shows it, and as the admin API lists it
// (GET /api/v1/instances, in this JSON shape).
type Instance struct {
	ID          string    `json:"id"`
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	ExpiresAt   time.Time `json:"lease_expires_at"`
	// TurnsRunning counts the turns the replica is running.
	TurnsRunning int `json:"turns_running"`
	// Leases are the names of the leases the replica holds (the Telegram poller, Discord
	// shards; Replica.Instances fills them in).
	Leases []string `json:"leases"`
	// Self marks the replica that listed the instances (Replica.Instances fills it in).
	Self bool `json:"self"`
	// ConfigDigest names the configuration the replica runs with (config.Config.Digest); empty
	// until it says.
	ConfigDigest string `json:"config_digest"`
}

// Member is this replica's membership: its row and epoch in the instances table, and the fence
// that stops the work it holds when the lease is not confirmed in time. Its methods are safe for
// concurrent use.
type Member struct {
	db    *sql.DB
	id    string
	ttl   time.Duration
	log   *slog.Logger
	fence *fence
	stop  context.CancelFunc
	done  chan struct{}
	once  sync.Once
	// digest is the configuration's digest the heartbeat writes (SetConfigDigest).
	digest atomic.Pointer[string]
}

// FenceDeadline is how long after the last renewal the database confirmed (as sent, on this
// replica's monotonic clock) the fence closes, for a lease of ttl: two thirds of it, so a replica
// that missed one renewal still acts and one cut off stops well before its lease expires.
func FenceDeadline(ttl time.Duration) time.Duration { return ttl * 2 / 3 }

// TakeoverGrace is how long, for a lease of ttl, a lease must stay expired after a survivor is
// itself back (its fence open without a break) before the survivor takes the work it covers
// over: long enough for a live replica that shared an outage to renew (every ttl/3).
func TakeoverGrace(ttl time.Duration) time.Duration { return ttl / 2 }

// Join registers this replica in the instances table and renews its lease until Leave. The
// instances table comes from the store's migrations: call it after store.Migrate.
func Join(ctx context.Context, db *sql.DB, opts Options) (*Member, error) {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	host, _ := os.Hostname()
	id := opts.ID
	if id == "" {
		var err error
		if id, err = NewID(); err != nil {
			return nil, err
		}
	}
	m := &Member{db: db, id: id, ttl: opts.TTL, log: opts.Logger, done: make(chan struct{})}
	sent := time.Now()
	var epoch int64
	if err := db.QueryRowContext(ctx, `INSERT INTO instances (id, host, pid, started_at, heartbeat_at, expires_at)
		VALUES ($1, $2, $3, now(), now(), now() + make_interval(secs => $4)) RETURNING epoch`,
		id, host, os.Getpid(), opts.TTL.Seconds()).Scan(&epoch); err != nil {
		return nil, fmt.Errorf("coord: register instance %s: %w", id, err)
	}
	m.fence = newFence(FenceDeadline(opts.TTL), sent, epoch)
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.stop = cancel
	go m.beat(bctx, opts.Sweep, opts.Members)
	return m, nil
}

// NewID names a replica by host and process, with a random tail so a restarted process with
// the same pid is a new member.
func NewID() (string, error) {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("coord: instance id: %w", err)
	}
	if host == "" {
		host = "host"
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b)), nil
}

// ID is this replica's id, the one its turns carry (store.Options.Instance).
func (m *Member) ID() string { return m.id }

// TTL is the member's lease.
func (m *Member) TTL() time.Duration { return m.ttl }

// Fence returns nil when this replica may act on the work it holds now: its last renewal the
// database confirmed was sent within the fence deadline. Otherwise it waits until a renewal is
// confirmed, or ctx ends (an error wrapping ErrFenced). Work begun under an epoch that was taken
// over since (ctx stamped with Stamp) is refused with ErrTakenOver, now and forever. Ask it right
// before every platform request, tool start and message taken, not once per turn.
func (m *Member) Fence(ctx context.Context) error { return m.fence.wait(ctx) }

// Stamp returns ctx carrying this replica's epoch now: Fence refuses what is done with it once
// that epoch has been taken over.
func (m *Member) Stamp(ctx context.Context) context.Context { return m.fence.stamp(ctx) }

// Epoch is this replica's registration now; a takeover makes the next renewal register anew.
func (m *Member) Epoch() int64 {
	_, e := m.fence.open()
	return e
}

// LiveFor is how long this replica's fence has been open without a break; 0 while it is closed.
// A survivor takes over only after it has been back TakeoverGrace itself.
func (m *Member) LiveFor() time.Duration { return m.fence.liveFor() }

func (m *Member) beat(ctx context.Context, sweep func(context.Context) error, members func(int)) {
	defer close(m.done)
	t := time.NewTicker(m.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := m.renew(ctx); err != nil {
			if ctx.Err() == nil {
				m.log.Warn("instance lease not renewed", "instance", m.id, "err", err)
			}
			continue
		}
		if members != nil {
			var n int
			cctx, cancel := context.WithTimeout(ctx, m.ttl/3)
			if err := m.db.QueryRowContext(cctx, `SELECT COUNT(*) FROM instances WHERE expires_at > now()`).Scan(&n); err == nil {
				members(max(n, 1))
			}
			cancel()
		}
		if sweep != nil {
			// Bounded, so a slow sweep delays the next renewal by a third of the lease at most.
			cctx, cancel := context.WithTimeout(ctx, m.ttl/3)
			err := sweep(cctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				m.log.Warn("reclaiming the turns of replicas that are gone", "instance", m.id, "err", err)
			}
		}
	}
}

// renew extends the lease of the epoch this replica holds, within a third of the lease. A row a
// survivor removed (it took this replica's work over while the replica was paused or cut off) is
// registered again under a new epoch: what was begun under the old one is refused from then on
// (ErrTakenOver), and the fence opens for new work only.
func (m *Member) renew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.ttl/3)
	defer cancel()
	sent := time.Now()
	epoch := m.Epoch()
	res, err := m.db.ExecContext(ctx, `UPDATE instances SET heartbeat_at = now(), expires_at = now() + make_interval(secs => $3),
		config_digest = $4 WHERE id = $1 AND epoch = $2`, m.id, epoch, m.ttl.Seconds(), m.configDigest())
	if err != nil {
		return fmt.Errorf("coord: renew lease of %s: %w", m.id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("coord: renew lease of %s: %w", m.id, err)
	} else if n == 1 {
		m.fence.confirm(sent, epoch)
		return nil
	}
	host, _ := os.Hostname()
	var next int64
	if err := m.db.QueryRowContext(ctx, `INSERT INTO instances (id, host, pid, started_at, heartbeat_at, expires_at, config_digest)
		VALUES ($1, $2, $3, now(), now(), now() + make_interval(secs => $4), $5) RETURNING epoch`,
		m.id, host, os.Getpid(), m.ttl.Seconds(), m.configDigest()).Scan(&next); err != nil {
		return fmt.Errorf("coord: register %s again: %w", m.id, err)
	}
	m.fence.confirm(sent, next)
	m.log.Warn("this replica's work was taken over while it was cut off: it drops what it held and takes new work",
		"instance", m.id, "epoch", epoch, "new_epoch", next)
	return nil
}

// configDigest is the digest SetConfigDigest last set; empty before.
func (m *Member) configDigest() string {
	if d := m.digest.Load(); d != nil {
		return *d
	}
	return ""
}

// SetConfigDigest records the digest of the configuration this replica runs with, in its row
// at once and with every heartbeat after.
func (m *Member) SetConfigDigest(ctx context.Context, digest string) error {
	m.digest.Store(&digest)
	if _, err := m.db.ExecContext(ctx, `UPDATE instances SET config_digest = $2 WHERE id = $1`, m.id, digest); err != nil {
		return fmt.Errorf("coord: record the config digest of %s: %w", m.id, err)
	}
	return nil
}

// Leave stops the heartbeat and removes this replica's row at once, so the others treat what it
// left running as reclaimable without waiting for the lease to expire. Call it after the turns
// have ended. It is safe to call more than once.
func (m *Member) Leave(ctx context.Context) error {
	var err error
	m.once.Do(func() {
		m.stop()
		<-m.done
		if _, e := m.db.ExecContext(ctx, `DELETE FROM instances WHERE id = $1`, m.id); e != nil {
			err = fmt.Errorf("coord: leave as %s: %w", m.id, e)
		}
	})
	return err
}

// Instances lists the live replicas (lease not expired), oldest first.
func Instances(ctx context.Context, db *sql.DB) ([]Instance, error) {
	rows, err := db.QueryContext(ctx, `SELECT i.id, i.host, i.pid, i.started_at, i.heartbeat_at, i.expires_at, i.config_digest,
		(SELECT COUNT(*) FROM turns t WHERE t.status = 'running' AND t.instance_id = i.id)
		FROM instances i WHERE i.expires_at > now() ORDER BY i.started_at, i.id`)
	if err != nil {
		return nil, fmt.Errorf("coord: list instances: %w", err)
	}
	defer rows.Close()
	var out []Instance
	for rows.Next() {
		var in Instance
		if err := rows.Scan(&in.ID, &in.Host, &in.PID, &in.StartedAt, &in.HeartbeatAt, &in.ExpiresAt, &in.ConfigDigest, &in.TurnsRunning); err != nil {
			return nil, fmt.Errorf("coord: list instances: %w", err)
		}
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("coord: list instances: %w", err)
	}
	return out, nil
}

// ErrInUse is returned by FileLock when another process holds the database file.
var ErrInUse = errors.New("coord: database file in use by another process")
