package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	"relaybot/admin"
	"relaybot/chat"
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
	queue := coord.NewTurns(db, instance, log)
	b.chats = replicaChats{db: db, instance: instance, log: log}
	b.background = append(b.background, part{name: "replies in flight", run: b.chats.run})
	var purged time.Time // touched by the heartbeat goroutine only
	b.share.setLog(log)
	m, err := coord.Join(ctx, db, coord.Options{ID: instance, Logger: log, Members: b.share.set, Sweep: func(ctx context.Context) error {
		turns, calls, err := st.Recover(ctx)
		if turns+calls > 0 {
			log.Warn("reclaimed the work of a replica that is gone", "turns", turns, "tool_calls", calls)
		}
		if err != nil {
			return err
		}
		if err := b.chats.markInterrupted(ctx); err != nil {
			return err
		}
		if _, err := queue.Purge(ctx); err != nil {
			return err
		}
		if time.Since(purged) < time.Hour {
			return nil
		}
		purged = time.Now()
		if _, err := coord.PurgeChatBudgets(ctx, db, time.Hour); err != nil {
			return err
		}
		_, err = ledger.Purge(ctx, ledgerKeep)
		return err
	}})
	if err != nil {
		return err
	}
	if err := b.awaitCounted(ctx, db, m, log); err != nil {
		return err
	}
	b.ledger = ledger
	b.signals = coord.NewSignals(db, log)
	b.turns = queue
	b.webRelay = coord.NewWebRelay(db, instance, log)
	b.instances = func(ctx context.Context) ([]admin.Instance, error) {
		live, err := coord.Instances(ctx, db)
		if err != nil {
			return nil, err
		}
		held, err := st.LeaseHolders(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]admin.Instance, 0, len(live))
		for _, in := range live {
			out = append(out, admin.Instance{ID: in.ID, Host: in.Host, PID: in.PID, StartedAt: in.StartedAt,
				HeartbeatAt: in.HeartbeatAt, ExpiresAt: in.ExpiresAt, TurnsRunning: in.TurnsRunning,
				Leases: held[in.ID], Self: in.ID == m.ID()})
		}
		return out, nil
	}
	record := func(name string, l adapters.Lease) adapters.Lease {
		return recordedLease{Lease: l, name: name, instance: m.ID(), st: st, log: log}
	}
	b.lease = func(name string) adapters.Lease { return record(name, coord.NewLease(db, name)) }
	b.shards = func(name string) adapters.Shards { return shardLeases{s: coord.NewShards(db, name), record: record} }
	log.Info("replica joined", "instance", m.ID(), "lease", m.TTL())
	b.cleanup = append(b.cleanup, func() {
		if err := m.Leave(context.Background()); err != nil {
			log.Error("leave the replicas", "err", err)
		}
	})
	return nil
}

// recordedLease is a lease whose holder is written down in the store while it holds it, so the
// admin pages of every replica show who holds what (an advisory lock does not name its holder).
// A record that cannot be written costs only that line of the page: the lease works the same.
type recordedLease struct {
	adapters.Lease
	name, instance string
	st             *store.Store
	log            *slog.Logger
}

// Acquire implements adapters.Lease: it records the holder once the lease is held, and forgets
// it when the lease is lost or released.
func (l recordedLease) Acquire(ctx context.Context) (context.Context, func(), error) {
	held, release, err := l.Lease.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := l.st.HoldLease(ctx, l.instance, l.name); err != nil {
		l.log.Warn("lease holder not recorded for the admin pages", "lease", l.name, "err", err)
	}
	var once sync.Once
	forget := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := l.st.ReleaseLease(ctx, l.instance, l.name); err != nil {
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

// awaitCounted divides the bot-wide budgets by the replicas live now and, when others are,
// waits one heartbeat period before this replica takes messages: the others count it at their
// next heartbeat, and until then they each spend their share as if it were not there, so a
// replica that joins and sends at once would take the deployment over the bot's budget.
func (b *bot) awaitCounted(ctx context.Context, db *sql.DB, m *coord.Member, log *slog.Logger) error {
	live, err := coord.Instances(ctx, db)
	if err != nil {
		return fmt.Errorf("replicas: count the live replicas: %w", err)
	}
	b.share.set(max(len(live), 1))
	if len(live) < 2 {
		return nil
	}
	wait := m.TTL()/3 + 250*time.Millisecond
	log.Info("waiting for the other replicas to count this one", "replicas", len(live), "wait", wait)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("replicas: waiting to be counted: %w", ctx.Err())
	case <-t.C:
		return nil
	}
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

// discordShards shares the gateway shards of the Discord bot with token among the replicas, or
// is nil for a single process (which connects every shard). Like the poller lease, it is named
// by a digest of the token.
func (b *bot) discordShards(token string) adapters.Shards {
	if b.shards == nil {
		return nil
	}
	sum := sha256.Sum256([]byte(token))
	return b.shards("discord shards " + hex.EncodeToString(sum[:8]))
}

// shardLeases is coord.Shards as the adapters see it (adapters.Shards).
// Each shard's holder is recorded for the admin pages.
type shardLeases struct {
	s      *coord.Shards
	record func(name string, l adapters.Lease) adapters.Lease
}

// Join implements adapters.Shards.
func (l shardLeases) Join(ctx context.Context, count int) ([]adapters.Lease, error) {
	leases, err := l.s.Join(ctx, count)
	if err != nil {
		return nil, err
	}
	out := make([]adapters.Lease, len(leases))
	for i, sl := range leases {
		out[i] = l.record(fmt.Sprintf("discord shard %d of %d", i, count), sl)
	}
	return out, nil
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
			if st.Interrupt {
				if pipe.InterruptFromReplica(st.Key) {
					b.log.Info("interrupted a turn: a newer message reached another replica", "conversation", st.Key)
				}
				return
			}
			if pipe.StopFromReplica(st.Key, st.UserID, st.Admin) {
				b.log.Info("stopped a turn on another replica's request", "conversation", st.Key)
			}
		})
	}})
}

// listenTurns wakes this replica's messages waiting for a conversation another replica frees;
// nothing to do for a single process.
func (b *bot) listenTurns() {
	if b.turns == nil {
		return
	}
	b.background = append(b.background, part{name: "conversation turns", run: b.turns.Listen})
}

// turnGate is the pipeline's TurnGate over coord.Turns.
type turnGate struct{ t *coord.Turns }

func (g turnGate) Enter(ctx context.Context, key string, in adapters.Inbound, limit int, interrupt bool) (int64, bool, error) {
	return g.t.Enter(ctx, coord.Entry{Key: key, UserID: in.UserID, MessageID: in.MessageID, Sent: in.Time}, limit, interrupt)
}

func (g turnGate) Wait(ctx context.Context, key string, ticket int64) (bool, error) {
	return g.t.Wait(ctx, key, ticket)
}

func (g turnGate) Leave(ctx context.Context, key string, ticket int64) error {
	return g.t.Leave(ctx, key, ticket)
}

func (g turnGate) Running(ctx context.Context, key string) (string, bool, bool, error) {
	return g.t.Running(ctx, key)
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

// replicaChats coordinates what the replicas' delivery engines do in the same chats: each
// chat's own budgets (coord.ChatBudgets) and the replies in flight a replica that dies leaves
// behind (coord.Replies), which a survivor ends with a note. Its zero value, for a single
// process, changes nothing.
type replicaChats struct {
	db       *sql.DB
	instance string
	log      *slog.Logger

	mu      sync.Mutex
	bots    map[coord.Bot]*delivery.Engine // by bot scope
	replies []*coord.Replies
}

// options adds to deliver what the engine of the bot with token on platform needs to deliver
// alongside other replicas.
func (r *replicaChats) options(platform chat.Platform, token string, lim adapters.Limits, deliver delivery.Options) delivery.Options {
	if r.db == nil {
		return deliver
	}
	scope := coord.BotOf(platform, token)
	deliver.SharedChats = coord.NewChatBudgets(r.db, r.instance, coord.ChatBudgetOptions{Bot: scope,
		Chat: coord.Window{N: lim.PerChat.N, Per: lim.PerChat.Per}, Group: coord.Window{N: lim.PerGroup.N, Per: lim.PerGroup.Per}})
	rep := coord.NewReplies(r.db, r.instance, scope, r.log)
	deliver.InFlight = rep
	r.mu.Lock()
	r.replies = append(r.replies, rep)
	r.mu.Unlock()
	return deliver
}

// add makes e the engine that ends the interrupted replies of the bot with token on platform.
func (r *replicaChats) add(platform chat.Platform, token string, e *delivery.Engine) {
	if r.db == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bots == nil {
		r.bots = map[coord.Bot]*delivery.Engine{}
	}
	r.bots[coord.BotOf(platform, token)] = e
}

// run writes the replies in flight until ctx ends; part of the background.
func (r *replicaChats) run(ctx context.Context) error {
	r.mu.Lock()
	reps := r.replies
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, rep := range reps {
		wg.Go(func() { rep.Run(ctx) })
	}
	wg.Wait()
	return nil
}

// markInterrupted takes the replies that replicas which are gone were streaming and ends each
// message with a note, on goroutines of their own: the heartbeat that calls it must not wait
// for the platform. A message the platform no longer lets the bot edit is skipped and logged.
func (r *replicaChats) markInterrupted(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for scope, e := range r.bots {
		taken, err := coord.Interrupted(ctx, r.db, scope, 100)
		if err != nil {
			return err
		}
		for _, ir := range taken {
			go func() {
				mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
				defer cancel()
				if err := e.MarkInterrupted(mctx, ir.Message, ir.Text); err != nil {
					r.log.Warn("partial reply of a replica that is gone not marked interrupted", "chat", ir.Message.Chat.String(),
						"message", ir.Message.ID, "replica", ir.Instance, "err", err)
					return
				}
				r.log.Info("marked the partial reply of a replica that is gone as interrupted", "chat", ir.Message.Chat.String(),
					"message", ir.Message.ID, "replica", ir.Instance)
			}()
		}
	}
	return nil
}
