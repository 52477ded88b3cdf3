package coord

import (
	"context"
	"fmt"
)

// reloadChannel is the NOTIFY channel of config reloads.
const reloadChannel = "relaybot_reload"

// PublishReload tells every other replica that this one reloaded its config: each reads its own
// file again (ListenReloads). A replica whose listener is reconnecting misses it; the Replicas
// page shows it by its digest (SetConfigDigest).
func (r *Replica) PublishReload(ctx context.Context) error {
	if _, err := r.db.ExecContext(ctx, `SELECT pg_notify(`+channelSQL("$1")+`, $2)`, reloadChannel, r.member.ID()); err != nil {
		return fmt.Errorf("coord: announce a reload: %w", err)
	}
	return nil
}

// ListenReloads calls fn with the id of the replica each time another one announces a reload
// (PublishReload), until ctx ends; this replica's own announcements are not handed back.
func (r *Replica) ListenReloads(ctx context.Context, fn func(from string)) error {
	return listenLoop(ctx, r.db, reloadChannel, "config reloads", r.log, func(from string) {
		if from != r.member.ID() {
			fn(from)
		}
	})
}

// SetConfigDigest records the digest of the configuration this replica runs with, which the
// Replicas page shows beside each replica.
func (r *Replica) SetConfigDigest(ctx context.Context, digest string) error {
	return r.member.SetConfigDigest(ctx, digest)
}
