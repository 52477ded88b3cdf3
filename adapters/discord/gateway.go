package discord

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"relaybot/adapters"
)

// receivers take the gateway's events. They are called in the gateway's order on a shard's
// reader goroutine, so they must not block: each hands its event to a goroutine of its own.
type receivers struct {
	message     func(ctx context.Context, h adapters.Handler, m *discordgo.MessageCreate)
	interaction func(ctx context.Context, h adapters.Handler, ic *discordgo.InteractionCreate)
}

// gateway holds the adapter's gateway connections: one discordgo session per shard it
// connects (all of them, or with ShardLeases the ones this replica holds), each reopened and
// resumed when it drops, their events handed to the receivers.
type gateway struct {
	opts  Options
	log   *slog.Logger
	rt    http.RoundTripper
	rest  *rest
	bot   *botIdentity
	state *shardStates
	recv  receivers
	plan  gatewayPlan // set by run before any shard connects

	identMu    sync.Mutex
	identified map[int]time.Time // identify bucket → when its last identify went out
	registered sync.Once
}

func newGateway(opts Options, rt http.RoundTripper, api *rest, bot *botIdentity, state *shardStates, recv receivers) *gateway {
	return &gateway{opts: opts, log: opts.Logger, rt: rt, rest: api, bot: bot, state: state, recv: recv,
		identified: map[int]time.Time{}}
}

// run plans the shards and connects them, handing their events (for h) to the receivers until
// ctx ends; wg waits for the goroutines keeping them connected. It fails when the plan cannot
// be made, the shards cannot be shared with the other replicas, or (without leases) a shard
// cannot connect at first.
func (g *gateway) run(ctx context.Context, h adapters.Handler, wg *sync.WaitGroup) error {
	var err error
	if g.plan, err = g.planShards(ctx); err != nil {
		return err
	}
	if g.opts.ShardLeases == nil {
		return g.runShards(ctx, h, wg)
	}
	leases, err := g.opts.ShardLeases.Join(ctx, g.plan.count)
	if err != nil {
		return fmt.Errorf("discord: sharing %d shards with the other replicas: %w", g.plan.count, err)
	}
	g.log.Info("discord: sharing the gateway shards with the other replicas", "shards", g.plan.count)
	for id, l := range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.holdShard(ctx, h, l, id)
		}()
	}
	return nil
}

// registerOnce registers the application commands after the first shard connects, when asked.
func (g *gateway) registerOnce(ctx context.Context) {
	if !g.opts.RegisterCommands {
		return
	}
	g.registered.Do(func() {
		if err := g.rest.registerCommands(ctx, g.bot.app(), g.opts.Commands); err != nil {
			g.log.Warn("discord: slash commands not registered; text commands still work", "err", err)
		}
	})
}

// botIdentity is who the bot is, learnt from the shards' READY and state.
type botIdentity struct {
	mu    sync.Mutex
	id    string
	name  string // the bot's username, which a text command may name ("/reset@name")
	appID string
}

// ready learns who the bot is from a shard's READY.
func (b *botIdentity) ready(r *discordgo.Ready) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.User != nil {
		b.id = r.User.ID
		b.name = r.User.Username
		if b.appID == "" {
			b.appID = r.User.ID
		}
	}
	if r.Application != nil && r.Application.ID != "" {
		b.appID = r.Application.ID
	}
}

// learn records who the bot is from a connected shard's state.
func (b *botIdentity) learn(st *discordgo.State) {
	if st == nil {
		return
	}
	st.RLock()
	defer st.RUnlock()
	if st.User == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.id = st.User.ID
	b.name = st.User.Username
	if b.appID == "" {
		b.appID = st.User.ID
	}
	if st.Application != nil && st.Application.ID != "" {
		b.appID = st.Application.ID
	}
}

// userID is the bot user's id, "" before a shard connected.
func (b *botIdentity) userID() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.id
}

// userName is the bot user's name, "" before a shard connected.
func (b *botIdentity) userName() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.name
}

// app is the application's id, for registering commands.
func (b *botIdentity) app() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.appID
}

// shardStates are the gateway states of the connected shards, for lookups that need no REST
// request (channels, members, guilds).
type shardStates struct {
	mu     sync.Mutex
	shards map[int]*discordgo.Session // connected shards by id
}

// put registers shard id's session.
func (s *shardStates) put(id int, session *discordgo.Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shards[id] = session
}

// drop forgets shard id's session, unless another session took its place.
func (s *shardStates) drop(id int, session *discordgo.Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shards[id] == session {
		delete(s.shards, id)
	}
}

// states returns the gateway state of every connected shard.
func (s *shardStates) states() []*discordgo.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*discordgo.State, 0, len(s.shards))
	for _, sess := range s.shards {
		if sess.State != nil {
			out = append(out, sess.State)
		}
	}
	return out
}

// channel returns a channel the connected shards know, or nil.
func (s *shardStates) channel(id string) *discordgo.Channel {
	for _, st := range s.states() {
		if c, err := st.Channel(id); err == nil && c != nil {
			return c
		}
	}
	return nil
}

// member returns a guild member the connected shards know, or nil.
func (s *shardStates) member(guildID, userID string) *discordgo.Member {
	for _, st := range s.states() {
		if m, err := st.Member(guildID, userID); err == nil && m != nil {
			return m
		}
	}
	return nil
}

// guilds returns the ids of the guilds the connected shards know.
func (s *shardStates) guilds() []string {
	var out []string
	for _, st := range s.states() {
		st.RLock()
		for _, g := range st.Guilds {
			out = append(out, g.ID)
		}
		st.RUnlock()
	}
	return out
}
