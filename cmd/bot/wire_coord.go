package main

import (
	"context"
	"fmt"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
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
// migrations: alone on SQLite (no replica); on PostgreSQL a replica among the others, which it
// leaves at shutdown (a cleanup that runs before the store closes).
func (b *bot) joinDeployment(ctx context.Context, st *store.Database) error {
	db, shared := st.Postgres()
	if !shared {
		return nil
	}
	r, err := coord.NewReplica(ctx, db, coord.ReplicaOptions{ID: b.instance, Store: st.Turns, Logger: b.log})
	if err != nil {
		return err
	}
	b.replica = r
	b.cleanup = append(b.cleanup, func() {
		if err := r.Close(context.Background()); err != nil {
			b.log.Error("leave the replicas", "err", err)
		}
	})
	return nil
}

// claimToolCall is the tools manager's claim of each call: the replica's; nil alone, where
// nobody else could start the call.
func (b *bot) claimToolCall() func(ctx context.Context, turnID int64) error {
	if b.replica == nil {
		return nil
	}
	return b.replica.ClaimToolCall
}

// platformRoles are the roles a platform's adapter takes from the replica: all zero alone,
// where the adapter takes every message it receives, receives every press of its questions and
// paces every chat in memory.
type platformRoles struct {
	ledger    adapters.Ledger
	questions adapters.QuestionBook
	deliver   delivery.Options
}

// platformRoles returns bot's roles, its delivery engine's among them (its platform's limits are
// lim): on a replica the engine shares each chat's budgets with the other replicas, records the
// replies it streams for a survivor to end, and asks the fence before every platform request.
func (b *bot) platformRoles(bot coord.Bot, lim adapters.Limits, deliver delivery.Options) platformRoles {
	r := b.replica
	if r == nil {
		return platformRoles{deliver: deliver}
	}
	deliver.SharedChats, deliver.InFlight, deliver.Fence = r.SharedChats(bot, lim), r.InFlight(bot), r.Fence
	return platformRoles{ledger: r.Ledger(), questions: r.Questions(bot), deliver: deliver}
}

// pollLease is the lease of bot's Telegram poller; nil alone, where the process polls.
func (b *bot) pollLease(bot coord.Bot) adapters.Lease {
	if b.replica == nil {
		return nil
	}
	return b.replica.PollLease(bot)
}

// shardLeases shares bot's gateway shards among the replicas; nil alone, where the process
// connects every shard.
func (b *bot) shardLeases(bot coord.Bot) adapters.Shards {
	if b.replica == nil {
		return nil
	}
	return b.replica.Shards(bot)
}

// engineBuilt hands the replica bot's delivery engine (its share of the bot-wide budgets, the
// replies dead replicas left) and its adapter (the questions they left open); alone, the engine
// keeps the whole budget and no replica is ever taken over.
func (b *bot) engineBuilt(bot coord.Bot, e coord.Engine, closer adapters.QuestionCloser) {
	if b.replica == nil {
		return
	}
	b.replica.AddEngine(bot, e)
	b.replica.AddQuestionCloser(bot, closer)
}

// adminInstances lists the replicas for the admin pages; nil for a single process, whose pages
// say that it runs alone.
func adminInstances(r *coord.Replica) func(ctx context.Context) ([]coord.Instance, error) {
	if r == nil {
		return nil
	}
	return r.Instances
}
