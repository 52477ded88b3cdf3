package coord

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"relaybot/adapters"
)

// recorded is lease l, called name, whose holder is written down in the lease book while this
// replica holds it, so the admin pages of every replica show who holds what.
func (r *Replica) recorded(name string, l adapters.Lease) adapters.Lease {
	return recordedLease{Lease: l, name: name, instance: r.member.ID(), book: r.st, log: r.log}
}

// recordedLease is a lease whose holder is written down while it holds it. A record that
// cannot be written costs only that line of the page: the lease works the same.
type recordedLease struct {
	adapters.Lease
	name, instance string
	book           LeaseBook
	log            *slog.Logger
}

// Acquire implements adapters.Lease: it records the holder once the lease is held, and forgets
// it when the lease is lost or released.
func (l recordedLease) Acquire(ctx context.Context) (context.Context, func(), error) {
	held, release, err := l.Lease.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := l.book.HoldLease(ctx, l.instance, l.name); err != nil {
		l.log.Warn("lease holder not recorded for the admin pages", "lease", l.name, "err", err)
	}
	var once sync.Once
	forget := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := l.book.ReleaseLease(ctx, l.instance, l.name); err != nil {
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
