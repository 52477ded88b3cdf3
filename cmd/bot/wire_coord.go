package main

import (
	"context"
	"fmt"

	"relaybot/config"
	"relaybot/coord"
	"relaybot/store"
)

// claimReplica takes this process's place in the deployment before the store opens: on SQLite
// the lock of the database file (a second process is refused, naming the first), on PostgreSQL
// a fresh replica id for the store to stamp on its turns. The lock, when taken, is released by a
// cleanup of b that runs after the store has closed.
func (b *bot) claimReplica(cfg *config.Config) (instance string, err error) {
	if cfg.Storage.Driver == store.DriverPostgres {
		return coord.NewID()
	}
	lock, err := coord.LockFile(cfg.SQLitePath())
	if err != nil {
		return "", fmt.Errorf("storage: %w", err)
	}
	b.cleanup = append(b.cleanup, func() {
		if err := lock.Unlock(); err != nil {
			b.log.Error("unlock the database file", "err", err)
		}
	})
	return "", nil
}

// joinDeployment takes this process's place among the processes serving the bot, after the
// migrations: alone on SQLite; on PostgreSQL a replica among the others, which it leaves at
// shutdown (a cleanup that runs before the store closes).
func (b *bot) joinDeployment(ctx context.Context, st *store.Store) error {
	db, shared := st.Postgres()
	if !shared {
		b.dep = coord.NewLocal()
		return nil
	}
	r, err := coord.NewReplica(ctx, db, coord.ReplicaOptions{ID: b.instance, Store: st, Logger: b.log})
	if err != nil {
		return err
	}
	b.dep = r
	b.cleanup = append(b.cleanup, func() {
		if err := r.Close(context.Background()); err != nil {
			b.log.Error("leave the replicas", "err", err)
		}
	})
	return nil
}

// adminInstances lists the replicas for the admin pages; nil for a single process, whose pages
// say that it runs alone.
func adminInstances(dep coord.Deployment) func(ctx context.Context) ([]coord.Instance, error) {
	if !dep.Shared() {
		return nil
	}
	return dep.Instances
}
