package coord

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// reloadChannel is the NOTIFY channel of config reloads.
const reloadChannel = "relaybot_reload"

// PublishReload tells every other replica that this one reloaded its config: each reads its own
// file again (ListenReloads).
func (r *Replica) PublishReload(ctx context.Context) error {
	if _, err := r.db.ExecContext(ctx, `SELECT pg_notify(`+channelSQL("$1")+`, $2)`, reloadChannel, r.member.ID()); err != nil {
		return fmt.Errorf("coord: announce a reload: %w", err)
	}
	return nil
}

// ListenReloads calls fn with the id of a replica each time another one announces a reload
// (PublishReload), until ctx ends; this replica's own announcements are not handed back. A
// replica that missed an announcement (its listener was reconnecting, it was paused, it started
// as the others reloaded) learns of it by the digests the replicas record (SetConfigDigest): at
// once and with every heartbeat after, fn is called with the id of a live replica that runs
// another configuration than this one, once for each such digest until this replica's own
// changes. fn is called one call at a time.
func (r *Replica) ListenReloads(ctx context.Context, fn func(from string)) error {
	var one sync.Mutex
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.watchDigests(ctx, &one, fn)
	}()
	defer wg.Wait()
	return listenLoop(ctx, r.db, reloadChannel, "config reloads", r.log, func(from string) {
		if from != r.member.ID() {
			one.Lock()
			defer one.Unlock()
			fn(from)
		}
	})
}

// watchDigests compares this replica's config digest with the other live replicas' at once and
// every heartbeat period until ctx ends, and calls fn (holding one) for a digest it has not
// acted on since this replica's own last changed: a reload that changes nothing is not asked
// again for the same difference, and replicas whose files differ for good read them once each.
func (r *Replica) watchDigests(ctx context.Context, one *sync.Mutex, fn func(from string)) {
	t := time.NewTicker(r.member.TTL() / 3)
	defer t.Stop()
	var tried map[string]bool
	var own string
	for {
		one.Lock()
		if d := r.member.configDigest(); d != own || tried == nil {
			own, tried = d, map[string]bool{}
		}
		from, digest, err := r.otherDigest(ctx, own, tried)
		switch {
		case err != nil && ctx.Err() == nil:
			r.log.Warn("config digests of the other replicas not read; trying again at the next heartbeat", "err", err)
		case from != "":
			r.log.Info("another replica runs another configuration than this one: reading this one's again",
				"from", from, "its_digest", digest, "this_digest", own)
			fn(from)
		}
		one.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// otherDigest returns a live replica running a config digest other than own and not in tried,
// the one heartbeating last, and adds every such digest to tried; none ("") while this replica
// has recorded no digest.
func (r *Replica) otherDigest(ctx context.Context, own string, tried map[string]bool) (from, digest string, err error) {
	if own == "" {
		return "", "", nil
	}
	rows, err := r.db.QueryContext(ctx, `SELECT id, config_digest FROM instances
		WHERE expires_at > now() AND id <> $1 AND config_digest NOT IN ('', $2) ORDER BY heartbeat_at DESC, id`, r.member.ID(), own)
	if err != nil {
		return "", "", fmt.Errorf("coord: read the replicas' config digests: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, d string
		if err := rows.Scan(&id, &d); err != nil {
			return "", "", fmt.Errorf("coord: read the replicas' config digests: %w", err)
		}
		if !tried[d] && from == "" {
			from, digest = id, d
		}
		tried[d] = true
	}
	if err := rows.Err(); err != nil {
		return "", "", fmt.Errorf("coord: read the replicas' config digests: %w", err)
	}
	return from, digest, nil
}

// SetConfigDigest records the digest of the configuration this replica runs with, which the
// Replicas page shows beside each replica and the others compare theirs with (ListenReloads).
func (r *Replica) SetConfigDigest(ctx context.Context, digest string) error {
	return r.member.SetConfigDigest(ctx, digest)
}
