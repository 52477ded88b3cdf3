package discord

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"relaybot/adapters"
)

// identifySpacing is how far apart Discord lets two sessions of one rate-limit bucket identify
// (shard id % max_concurrency names the bucket).
const identifySpacing = 5 * time.Second

// shard is the gateway connection of one shard: a discordgo session of its own, whose handlers
// hand events to the adapter. A shard that loses its lease is closed and its session dropped;
// the next term identifies afresh.
type shard struct {
	id, count    int
	s            *discordgo.Session
	disconnected chan struct{}
	identified   bool // the session has identified once; later opens resume it
}

// gatewayPlan is what the adapter connects: count shards, identifying at most maxConcurrency
// at a time.
type gatewayPlan struct {
	count, maxConcurrency int
}

// plan asks Discord (GET /gateway/bot) for the shard count it recommends and how many sessions
// may identify at once. A configured count needs no answer: without one, one session identifies
// at a time.
func (g *gateway) planShards(ctx context.Context) (gatewayPlan, error) {
	p := gatewayPlan{count: g.opts.Shards, maxConcurrency: 1}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	gb, err := g.rest.gatewayBot(cctx)
	if err != nil {
		if p.count > 0 {
			g.log.Warn("discord: shard recommendation not read; identifying one shard at a time", "err", err)
			return p, nil
		}
		return p, fmt.Errorf("discord: asking %s for the shard count (discord.shards = \"auto\"): %w", g.opts.APIBase, err)
	}
	if p.count <= 0 {
		p.count = max(gb.Shards, 1)
	}
	p.maxConcurrency = max(gb.SessionStartLimit.MaxConcurrency, 1)
	return p, nil
}

// newShard builds the session of shard id of count; it connects in connect.
func (g *gateway) newShard(ctx context.Context, h adapters.Handler, id, count int) (*shard, error) {
	s, err := newSession(g.opts, g.rt)
	if err != nil {
		return nil, err
	}
	s.ShardID, s.ShardCount = id, count
	sh := &shard{id: id, count: count, s: s, disconnected: make(chan struct{}, 1)}
	s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) { g.recv.message(ctx, h, m) })
	s.AddHandler(func(_ *discordgo.Session, i *discordgo.InteractionCreate) { g.recv.interaction(ctx, h, i) })
	s.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) { g.bot.ready(r) })
	s.AddHandler(func(_ *discordgo.Session, _ *discordgo.Disconnect) {
		select {
		case sh.disconnected <- struct{}{}:
		default:
		}
	})
	return sh, nil
}

// open connects the shard once: it identifies (waiting its turn among the shards of this
// process) or resumes, and registers the shard's state for lookups.
func (g *gateway) open(ctx context.Context, sh *shard) error {
	if !sh.identified {
		if err := g.identifyTurn(ctx, sh.id); err != nil {
			return err
		}
	}
	err := sh.s.Open()
	if err != nil && !errors.Is(err, discordgo.ErrWSAlreadyOpen) {
		return fmt.Errorf("discord: connecting shard %d of %d to the gateway via %s: %w", sh.id, sh.count, g.opts.APIBase, err)
	}
	first := !sh.identified
	sh.identified = true
	g.bot.learn(sh.s.State)
	g.state.put(sh.id, sh.s)
	if first {
		g.log.Info("discord: shard connected", "shard", sh.id, "shards", sh.count, "bot", g.bot.userID())
		g.registerOnce(ctx)
	} else {
		g.log.Info("discord: gateway reconnected", "shard", sh.id)
	}
	return nil
}

// identifyTurn waits until shard id may identify: Discord lets one session per bucket
// (id % max_concurrency) identify every 5 seconds.
func (g *gateway) identifyTurn(ctx context.Context, id int) error {
	g.identMu.Lock()
	bucket := id % max(g.plan.maxConcurrency, 1)
	next := g.identified[bucket].Add(identifySpacing)
	now := time.Now()
	if next.Before(now) {
		next = now
	}
	g.identified[bucket] = next
	g.identMu.Unlock()
	wait := time.Until(next)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// connect opens the shard, trying again with a backoff from 1 s to 1 min, until it is
// connected (true) or ctx ends.
func (g *gateway) connect(ctx context.Context, sh *shard) bool {
	backoff := time.Second
	for {
		err := g.open(ctx, sh)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		g.log.Warn("discord: gateway connection failed", "shard", sh.id, "retry_in", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		backoff = min(2*backoff, time.Minute)
	}
}

// keepConnected reopens the shard's connection whenever it drops, resuming the session, until
// ctx ends.
func (g *gateway) keepConnected(ctx context.Context, sh *shard) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sh.disconnected:
		}
		if !g.connect(ctx, sh) {
			return
		}
	}
}

// close disconnects the shard and forgets its state.
func (g *gateway) close(sh *shard) {
	g.state.drop(sh.id, sh.s)
	if err := sh.s.Close(); err != nil {
		g.log.Debug("discord: closing the gateway", "shard", sh.id, "err", err)
	}
}

// runShards connects every shard in this process and keeps them connected until ctx ends.
// A shard that cannot connect at first fails the run, as a single connection always did.
func (g *gateway) runShards(runCtx context.Context, h adapters.Handler, wg *sync.WaitGroup) error {
	var opened []*shard
	for id := range g.plan.count {
		sh, err := g.newShard(runCtx, h, id, g.plan.count)
		if err == nil {
			err = g.open(runCtx, sh)
		}
		if err != nil {
			for _, o := range opened {
				g.close(o)
			}
			return err
		}
		opened = append(opened, sh)
	}
	for _, sh := range opened {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.keepConnected(runCtx, sh)
			g.close(sh)
		}()
	}
	return nil
}

// holdShard connects shard id whenever this replica holds its lease, until ctx ends. A lease
// lost closes the shard's connection at once (another replica may hold it already); a lease
// given up (another replica joined) is released at once and its connection kept open until the
// replica that took the shard has a session of its own (handOff), so no event Discord sends the
// shard meanwhile goes to nobody.
func (g *gateway) holdShard(ctx context.Context, h adapters.Handler, lease adapters.Lease, id int) {
	for {
		held, release, err := lease.Acquire(ctx)
		if err != nil {
			return // ctx ended
		}
		g.log.Info("discord: this replica holds the shard", "shard", id, "shards", g.plan.count)
		sh, err := g.newShard(ctx, h, id, g.plan.count)
		if err != nil {
			g.log.Error("discord: shard session not built", "shard", id, "err", err)
			release()
		} else if !g.connect(held, sh) {
			g.close(sh)
			release()
		} else {
			if ho, ok := lease.(adapters.HandOff); ok {
				if err := ho.Serving(held); err != nil && held.Err() == nil {
					g.log.Warn("discord: shard session not marked served; a replica handing it over closes its own later", "shard", id, "err", err)
				}
			}
			g.keepConnected(held, sh)
			var given *adapters.GivenUp
			if errors.As(context.Cause(held), &given) && ctx.Err() == nil {
				release()
				g.handOff(ctx, sh, given)
				continue
			}
			g.close(sh)
			release()
		}
		if ctx.Err() != nil {
			return
		}
		g.log.Warn("discord: shard lease lost; its connection is closed", "shard", id)
	}
}

// handOff keeps the session of a shard this replica gave up connected until the replica that
// took it over serves it (or the lease's hand-off limit passes, or ctx ends), then closes it.
// Both sessions receive the shard's events meanwhile; the ledger answers each once.
func (g *gateway) handOff(ctx context.Context, sh *shard, given *adapters.GivenUp) {
	g.log.Info("discord: shard given up; its connection stays open until the replica taking it over is connected", "shard", sh.id)
	hctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- given.HandedOver(hctx)
		stop()
	}()
	g.keepConnected(hctx, sh)
	err := <-done
	g.close(sh)
	switch {
	case ctx.Err() != nil:
	case err != nil:
		g.log.Warn("discord: shard hand-off not confirmed; its connection is closed anyway", "shard", sh.id, "err", err)
	default:
		g.log.Info("discord: shard handed over; its connection is closed", "shard", sh.id)
	}
}
