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
func (a *Adapter) plan(ctx context.Context) (gatewayPlan, error) {
	p := gatewayPlan{count: a.opts.Shards, maxConcurrency: 1}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var gb *discordgo.GatewayBotResponse
	err := a.botWide(cctx, "GET /gateway/bot", func(ctx context.Context) (err error) {
		gb, err = a.session.GatewayBot(a.reqOpts(ctx)...)
		return err
	})
	if err != nil {
		if p.count > 0 {
			a.log.Warn("discord: shard recommendation not read; identifying one shard at a time", "err", err)
			return p, nil
		}
		return p, fmt.Errorf("discord: asking %s for the shard count (discord.shards = \"auto\"): %w", a.opts.APIBase, err)
	}
	if p.count <= 0 {
		p.count = max(gb.Shards, 1)
	}
	p.maxConcurrency = max(gb.SessionStartLimit.MaxConcurrency, 1)
	return p, nil
}

// newShard builds the session of shard id of count; it connects in connect.
func (a *Adapter) newShard(ctx context.Context, h adapters.Handler, id, count int) (*shard, error) {
	s, err := a.newSession()
	if err != nil {
		return nil, err
	}
	s.ShardID, s.ShardCount = id, count
	sh := &shard{id: id, count: count, s: s, disconnected: make(chan struct{}, 1)}
	s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) { a.onMessage(ctx, h, m) })
	s.AddHandler(func(_ *discordgo.Session, i *discordgo.InteractionCreate) { a.onInteraction(ctx, h, i) })
	s.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) { a.onReady(r) })
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
func (a *Adapter) open(ctx context.Context, sh *shard) error {
	if !sh.identified {
		if err := a.identifyTurn(ctx, sh.id); err != nil {
			return err
		}
	}
	err := sh.s.Open()
	if err != nil && !errors.Is(err, discordgo.ErrWSAlreadyOpen) {
		return fmt.Errorf("discord: connecting shard %d of %d to the gateway via %s: %w", sh.id, sh.count, a.opts.APIBase, err)
	}
	first := !sh.identified
	sh.identified = true
	a.learnBot(sh.s.State)
	a.mu.Lock()
	a.shards[sh.id] = sh.s
	a.mu.Unlock()
	if first {
		a.log.Info("discord: shard connected", "shard", sh.id, "shards", sh.count, "bot", a.botUserID())
		a.registerOnce(ctx)
	} else {
		a.log.Info("discord: gateway reconnected", "shard", sh.id)
	}
	return nil
}

// identifyTurn waits until shard id may identify: Discord lets one session per bucket
// (id % max_concurrency) identify every 5 seconds.
func (a *Adapter) identifyTurn(ctx context.Context, id int) error {
	a.identMu.Lock()
	bucket := id % max(a.gw.maxConcurrency, 1)
	next := a.identified[bucket].Add(identifySpacing)
	now := time.Now()
	if next.Before(now) {
		next = now
	}
	a.identified[bucket] = next
	a.identMu.Unlock()
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
func (a *Adapter) connect(ctx context.Context, sh *shard) bool {
	backoff := time.Second
	for {
		err := a.open(ctx, sh)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		a.log.Warn("discord: gateway connection failed", "shard", sh.id, "retry_in", backoff, "err", err)
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
func (a *Adapter) keepConnected(ctx context.Context, sh *shard) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sh.disconnected:
		}
		if !a.connect(ctx, sh) {
			return
		}
	}
}

// close disconnects the shard and forgets its state.
func (a *Adapter) close(sh *shard) {
	a.mu.Lock()
	if a.shards[sh.id] == sh.s {
		delete(a.shards, sh.id)
	}
	a.mu.Unlock()
	if err := sh.s.Close(); err != nil {
		a.log.Debug("discord: closing the gateway", "shard", sh.id, "err", err)
	}
}

// runShards connects every shard in this process and keeps them connected until ctx ends.
// A shard that cannot connect at first fails the run, as a single connection always did.
func (a *Adapter) runShards(runCtx context.Context, h adapters.Handler, wg *sync.WaitGroup) error {
	var opened []*shard
	for id := range a.gw.count {
		sh, err := a.newShard(runCtx, h, id, a.gw.count)
		if err == nil {
			err = a.open(runCtx, sh)
		}
		if err != nil {
			for _, o := range opened {
				a.close(o)
			}
			return err
		}
		opened = append(opened, sh)
	}
	for _, sh := range opened {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.keepConnected(runCtx, sh)
			a.close(sh)
		}()
	}
	return nil
}

// holdShard connects shard id whenever this replica holds its lease, until ctx ends. A lease
// lost closes the shard's connection at once (another replica may hold it already); a lease
// given up (another replica joined) is released at once and its connection kept open until the
// replica that took the shard has a session of its own (handOff), so no event Discord sends the
// shard meanwhile goes to nobody.
func (a *Adapter) holdShard(ctx context.Context, h adapters.Handler, lease adapters.Lease, id int) {
	for {
		held, release, err := lease.Acquire(ctx)
		if err != nil {
			return // ctx ended
		}
		a.log.Info("discord: this replica holds the shard", "shard", id, "shards", a.gw.count)
		sh, err := a.newShard(ctx, h, id, a.gw.count)
		if err != nil {
			a.log.Error("discord: shard session not built", "shard", id, "err", err)
			release()
		} else if !a.connect(held, sh) {
			a.close(sh)
			release()
		} else {
			if ho, ok := lease.(adapters.HandOff); ok {
				if err := ho.Serving(held); err != nil && held.Err() == nil {
					a.log.Warn("discord: shard session not marked served; a replica handing it over closes its own later", "shard", id, "err", err)
				}
			}
			a.keepConnected(held, sh)
			var given *adapters.GivenUp
			if errors.As(context.Cause(held), &given) && ctx.Err() == nil {
				release()
				a.handOff(ctx, sh, given)
				continue
			}
			a.close(sh)
			release()
		}
		if ctx.Err() != nil {
			return
		}
		a.log.Warn("discord: shard lease lost; its connection is closed", "shard", id)
	}
}

// handOff keeps the session of a shard this replica gave up connected until the replica that
// took it over serves it (or the lease's hand-off limit passes, or ctx ends), then closes it.
// Both sessions receive the shard's events meanwhile; the ledger answers each once.
func (a *Adapter) handOff(ctx context.Context, sh *shard, given *adapters.GivenUp) {
	a.log.Info("discord: shard given up; its connection stays open until the replica taking it over is connected", "shard", sh.id)
	hctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- given.HandedOver(hctx)
		stop()
	}()
	a.keepConnected(hctx, sh)
	err := <-done
	a.close(sh)
	switch {
	case ctx.Err() != nil:
	case err != nil:
		a.log.Warn("discord: shard hand-off not confirmed; its connection is closed anyway", "shard", sh.id, "err", err)
	default:
		a.log.Info("discord: shard handed over; its connection is closed", "shard", sh.id)
	}
}

// learnBot records who the bot is from a connected shard's state.
func (a *Adapter) learnBot(st *discordgo.State) {
	if st == nil {
		return
	}
	st.RLock()
	defer st.RUnlock()
	if st.User == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.botID = st.User.ID
	a.botName = st.User.Username
	if a.appID == "" {
		a.appID = st.User.ID
	}
	if st.Application != nil && st.Application.ID != "" {
		a.appID = st.Application.ID
	}
}

// registerOnce registers the application commands after the first shard connects, when asked.
func (a *Adapter) registerOnce(ctx context.Context) {
	if !a.opts.RegisterCommands {
		return
	}
	a.registered.Do(func() {
		if err := a.registerCommands(ctx); err != nil {
			a.log.Warn("discord: slash commands not registered; text commands still work", "err", err)
		}
	})
}

// states returns the gateway state of every connected shard.
func (a *Adapter) states() []*discordgo.State {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*discordgo.State, 0, len(a.shards))
	for _, s := range a.shards {
		if s.State != nil {
			out = append(out, s.State)
		}
	}
	return out
}

// stateChannel returns a channel the connected shards know, or nil.
func (a *Adapter) stateChannel(id string) *discordgo.Channel {
	for _, st := range a.states() {
		if c, err := st.Channel(id); err == nil && c != nil {
			return c
		}
	}
	return nil
}

// stateMember returns a guild member the connected shards know, or nil.
func (a *Adapter) stateMember(guildID, userID string) *discordgo.Member {
	for _, st := range a.states() {
		if m, err := st.Member(guildID, userID); err == nil && m != nil {
			return m
		}
	}
	return nil
}

// stateGuilds returns the ids of the guilds the connected shards know.
func (a *Adapter) stateGuilds() []string {
	var out []string
	for _, st := range a.states() {
		st.RLock()
		for _, g := range st.Guilds {
			out = append(out, g.ID)
		}
		st.RUnlock()
	}
	return out
}
