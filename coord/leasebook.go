package coord

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"relaybot/adapters"
)

// LeaseBook writes down which replica holds which lease, for the admin pages: an advisory lock
// names no holder. Its table is lease_holders (migration 00011). Its methods are safe for
// concurrent use.
type LeaseBook struct {
	db *sql.DB
}

// NewLeaseBook returns the lease book of the replicas on db.
func NewLeaseBook(db *sql.DB) *LeaseBook { return &LeaseBook{db: db} }

// Hold records that replica instance now holds the named lease, replacing the record of an
// earlier holder.
func (b *LeaseBook) Hold(ctx context.Context, instance, name string) error {
	_, err := b.db.ExecContext(ctx, `INSERT INTO lease_holders (name, instance_id) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET instance_id = excluded.instance_id`, name, instance)
	if err != nil {
		return fmt.Errorf("coord: record lease %s: %w", name, err)
	}
	return nil
}

// Release deletes the record that instance holds the named lease; a record naming another
// holder (who took the lease since) stays.
func (b *LeaseBook) Release(ctx context.Context, instance, name string) error {
	_, err := b.db.ExecContext(ctx, `DELETE FROM lease_holders WHERE name = $1 AND instance_id = $2`, name, instance)
	if err != nil {
		return fmt.Errorf("coord: record release of lease %s: %w", name, err)
	}
	return nil
}

// Holders returns the names of the leases each replica is recorded to hold, by replica id,
// names in order. Records of replicas that died stay until the next holder replaces them: read
// them for the live replicas only.
func (b *LeaseBook) Holders(ctx context.Context) (map[string][]string, error) {
	rows, err := b.db.QueryContext(ctx, `SELECT name, instance_id FROM lease_holders ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("coord: lease holders: %w", err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var name, instance string
		if err := rows.Scan(&name, &instance); err != nil {
			return nil, fmt.Errorf("coord: lease holders: %w", err)
		}
		out[instance] = append(out[instance], name)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("coord: lease holders: %w", err)
	}
	return out, nil
}

// recorded is lease l, called name, whose holder is written down in the lease book while this
// replica holds it, so the admin pages of every replica show who holds what.
func (r *Replica) recorded(name string, l adapters.Lease) adapters.Lease {
	return recordedLease{Lease: l, name: name, instance: r.member.ID(), book: r.book, log: r.log}
}

// recordedLease is a lease whose holder is written down while it holds it. A record that
// cannot be written costs only that line of the page: the lease works the same.
type recordedLease struct {
	adapters.Lease
	name, instance string
	book           *LeaseBook
	log            *slog.Logger
}

// Acquire implements adapters.Lease: it records the holder once the lease is held, and forgets
// it when the lease is lost or released.
func (l recordedLease) Acquire(ctx context.Context) (context.Context, func(), error) {
	held, release, err := l.Lease.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := l.book.Hold(ctx, l.instance, l.name); err != nil {
		l.log.Warn("lease holder not recorded for the admin pages", "lease", l.name, "err", err)
	}
	var once sync.Once
	forget := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := l.book.Release(ctx, l.instance, l.name); err != nil {
				l.log.Warn("lease release not recorded for the admin pages", "lease", l.name, "err", err)
			}
		})
	}
	stop := context.AfterFunc(held, forget)
	return held, func() {
		stop()
		release()
		forget()
	}, nil
}

// Serving implements adapters.HandOff: it passes on to a lease that can be handed off, and has
// nothing to record for one that cannot (the poller's is never given up).
func (l recordedLease) Serving(ctx context.Context) error {
	if h, ok := l.Lease.(adapters.HandOff); ok {
		return h.Serving(ctx)
	}
	return nil
}

// sharedShards is Shards as the adapters see it (adapters.Shards), each shard's holder written
// down for the admin pages.
type sharedShards struct {
	s   *Shards
	bot Bot
	r   *Replica
}

// Join implements adapters.Shards.
func (s sharedShards) Join(ctx context.Context, count int) ([]adapters.Lease, error) {
	leases, err := s.s.Join(ctx, count)
	if err != nil {
		return nil, err
	}
	out := make([]adapters.Lease, len(leases))
	for i, l := range leases {
		out[i] = s.r.recorded(fmt.Sprintf("%s shard %d of %d", s.bot.Platform, i, count), l)
	}
	return out, nil
}
