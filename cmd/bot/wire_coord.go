package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	"relaybot/admin"
	"relaybot/config"
	"relaybot/coord"
	"relaybot/pipeline"
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

// ledgerKeep is how long the inbound ledger remembers a message: well past the 24 hours
// Telegram keeps resending an update.
const ledgerKeep = 48 * time.Hour

// joinReplicas registers this replica with the others on PostgreSQL, after the migrations: its
// lease is renewed until the shutdown, where it leaves at once; every heartbeat reclaims the turns
// of replicas whose lease expired. Nothing to do on SQLite.
func (b *bot) joinReplicas(ctx context.Context, st *store.Store, instance string, log *slog.Logger) error {
	db, ok := st.Postgres()
	if !ok {
		return nil
	}
	ledger := coord.NewLedger(db, instance)
	var purged time.Time // touched by the heartbeat goroutine only
	b.share.setLog(log)
	m, err := coord.Join(ctx, db, coord.Options{ID: instance, Logger: log, Members: b.share.set, Sweep: func(ctx context.Context) error {
		turns, calls, err := st.Recover(ctx)
		if turns+calls > 0 {
			log.Warn("reclaimed the work of a replica that is gone", "turns", turns, "tool_calls", calls)
		}
		if err != nil || time.Since(purged) < time.Hour {
			return err
		}
		purged = time.Now()
		_, err = ledger.Purge(ctx, ledgerKeep)
		return err
	}})
	if err != nil {
		return err
	}
	b.ledger = ledger
	b.signals = coord.NewSignals(db, log)
	b.instances = func(ctx context.Context) ([]admin.Instance, error) {
		live, err := coord.Instances(ctx, db)
		if err != nil {
			return nil, err
		}
		out := make([]admin.Instance, 0, len(live))
		for _, in := range live {
			out = append(out, admin.Instance{ID: in.ID, Host: in.Host, PID: in.PID, StartedAt: in.StartedAt,
				HeartbeatAt: in.HeartbeatAt, ExpiresAt: in.ExpiresAt, TurnsRunning: in.TurnsRunning, Self: in.ID == m.ID()})
		}
		return out, nil
	}
	b.lease = func(name string) adapters.Lease { return coord.NewLease(db, name) }
	log.Info("replica joined", "instance", m.ID(), "lease", m.TTL())
	b.cleanup = append(b.cleanup, func() {
		if err := m.Leave(context.Background()); err != nil {
			log.Error("leave the replicas", "err", err)
		}
	})
	return nil
}

// pollLease is the Telegram poller lease of the bot with token, or nil for a single process. The
// name carries a digest of the token, so two bots on one database poll each their own, and the
// token itself appears nowhere.
func (b *bot) pollLease(token string) adapters.Lease {
	if b.lease == nil {
		return nil
	}
	sum := sha256.Sum256([]byte(token))
	return b.lease("telegram poller " + hex.EncodeToString(sum[:8]))
}

// listenStops passes the stop requests other replicas publish to pipe, for the turns this
// replica runs; nothing to do for a single process. It runs until the background parts stop,
// after the turns.
func (b *bot) listenStops(pipe *pipeline.Pipeline) {
	if b.signals == nil {
		return
	}
	b.background = append(b.background, part{name: "stop signals", run: func(ctx context.Context) error {
		return b.signals.ListenStops(ctx, func(st coord.Stop) {
			if pipe.StopFromReplica(st.Key, st.UserID, st.Admin) {
				b.log.Info("stopped a turn on another replica's request", "conversation", st.Key)
			}
		})
	}})
}

// budgetShare divides the platforms' bot-wide budgets (Telegram's 30 a second) among the live
// replicas, so that together they draw no more 429s than one process. It is told the number of
// replicas by the heartbeat goroutine while the adapters are being built.
type budgetShare struct {
	mu      sync.Mutex
	n       int
	engines []*delivery.Engine
	log     *slog.Logger // nil logs nothing
}

// setLog makes changes of the share logged: an operator (or a test) sees when a replica that
// joined or left was counted.
func (s *budgetShare) setLog(log *slog.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = log
}

// add divides e's budget by the replicas known so far, and by later counts.
func (s *budgetShare) add(e *delivery.Engine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.engines = append(s.engines, e)
	if s.n > 1 {
		e.ShareGlobal(s.n)
	}
}

// set records that n replicas are live.
func (s *budgetShare) set(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n == s.n {
		return
	}
	s.n = n
	for _, e := range s.engines {
		e.ShareGlobal(n)
	}
	if s.log != nil {
		s.log.Info("platform budgets shared among the live replicas", "replicas", n)
	}
}
