package main

import (
	"context"
	"fmt"
	"log/slog"

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

// joinReplicas registers this replica with the others on PostgreSQL, after the migrations: its
// lease is renewed until the shutdown, where it leaves at once; every heartbeat reclaims the turns
// of replicas whose lease expired. Nothing to do on SQLite.
func (b *bot) joinReplicas(ctx context.Context, st *store.Store, instance string, log *slog.Logger) error {
	db, ok := st.Postgres()
	if !ok {
		return nil
	}
	m, err := coord.Join(ctx, db, coord.Options{ID: instance, Logger: log, Sweep: func(ctx context.Context) error {
		turns, calls, err := st.Recover(ctx)
		if turns+calls > 0 {
			log.Warn("reclaimed the work of a replica that is gone", "turns", turns, "tool_calls", calls)
		}
		return err
	}})
	if err != nil {
		return err
	}
	log.Info("replica joined", "instance", m.ID(), "lease", m.TTL())
	b.cleanup = append(b.cleanup, func() {
		if err := m.Leave(context.Background()); err != nil {
			log.Error("leave the replicas", "err", err)
		}
	})
	return nil
}
