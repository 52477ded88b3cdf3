package discord

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
)

// dmVerdictTTL is how long the answer to "may this user send direct messages" is remembered:
// roles change rarely, and a DM conversation should not cost a REST call per message.
const dmVerdictTTL = time.Minute

// maxDMVerdicts bounds the remembered answers; expired ones are dropped when it is reached.
const maxDMVerdicts = 4096

type dmVerdict struct {
	ok    bool
	until time.Time
}

// access applies the guild rules (AllowedGuilds, AllowedChannels, AllowedRoles) to guild
// messages and interactions, and to direct messages (NoDMs, AccessUsers, the members of the
// allowed guilds), learning channels and members from the gateway's state or over REST.
type access struct {
	opts  Options
	log   *slog.Logger
	rest  *rest
	state *shardStates

	mu      sync.Mutex
	parents map[string]threadInfo // channel id → its parent and owner (zero for no thread), for AllowedChannels
	guildOf map[string]string     // channel id → guild id, for the DM rule with AllowedChannels
	dmUsers map[string]dmVerdict
}

func newAccess(opts Options, api *rest, state *shardStates) *access {
	return &access{opts: opts, log: opts.Logger, rest: api, state: state,
		parents: map[string]threadInfo{}, guildOf: map[string]string{}, dmUsers: map[string]dmVerdict{}}
}

// guildRules reports whether any of AllowedGuilds, AllowedChannels and AllowedRoles is set.
func (x *access) guildRules() bool {
	o := x.opts
	return len(o.AllowedGuilds) > 0 || len(o.AllowedChannels) > 0 || len(o.AllowedRoles) > 0
}

// dmAllowed applies the guild rules to a direct message from userID: without them anyone may
// send one (unless NoDMs); with them only users in AccessUsers, or members of an allowed guild
// with an allowed role. Otherwise a user refused in the guild for lacking the role would be
// answered by DM.
func (x *access) dmAllowed(ctx context.Context, userID string) bool {
	if x.opts.NoDMs {
		return false
	}
	if !x.guildRules() || slices.Contains(x.opts.AccessUsers, userID) {
		return true
	}
	now := time.Now()
	x.mu.Lock()
	v, ok := x.dmUsers[userID]
	x.mu.Unlock()
	if ok && now.Before(v.until) {
		return v.ok
	}
	allowed, err := x.memberPasses(ctx, userID)
	if err != nil {
		x.log.Warn("discord: cannot tell whether the sender of a direct message passes the guild rules; ignoring the message",
			"user", userID, "err", err)
		return false
	}
	x.mu.Lock()
	if len(x.dmUsers) >= maxDMVerdicts {
		for id, v := range x.dmUsers {
			if !now.Before(v.until) {
				delete(x.dmUsers, id)
			}
		}
	}
	if len(x.dmUsers) < maxDMVerdicts {
		x.dmUsers[userID] = dmVerdict{ok: allowed, until: now.Add(dmVerdictTTL)}
	}
	x.mu.Unlock()
	return allowed
}

// memberPasses reports whether userID is a member of an allowed guild holding an allowed role
// there (any role when AllowedRoles is empty).
func (x *access) memberPasses(ctx context.Context, userID string) (bool, error) {
	guilds, err := x.dmGuilds(ctx)
	if err != nil {
		return false, err
	}
	for _, g := range guilds {
		roles, member, err := x.memberRoles(ctx, g, userID)
		if err != nil {
			return false, err
		}
		if !member {
			continue
		}
		if len(x.opts.AllowedRoles) == 0 || slices.ContainsFunc(roles, func(r string) bool { return slices.Contains(x.opts.AllowedRoles, r) }) {
			return true, nil
		}
	}
	return false, nil
}

// dmGuilds returns the guilds whose members may send direct messages: AllowedGuilds, else the
// guilds of AllowedChannels, else every guild the bot is in.
func (x *access) dmGuilds(ctx context.Context) ([]string, error) {
	if len(x.opts.AllowedGuilds) > 0 {
		return x.opts.AllowedGuilds, nil
	}
	if len(x.opts.AllowedChannels) > 0 {
		var guilds []string
		for _, ch := range x.opts.AllowedChannels {
			g, err := x.channelGuild(ctx, ch)
			if err != nil {
				return nil, err
			}
			if g != "" && !slices.Contains(guilds, g) {
				guilds = append(guilds, g)
			}
		}
		return guilds, nil
	}
	return x.state.guilds(), nil
}

// channelGuild returns the guild a channel belongs to.
func (x *access) channelGuild(ctx context.Context, channelID string) (string, error) {
	return channelFact(ctx, x, channelID, x.guildOf, func(c *discordgo.Channel) string { return c.GuildID })
}

// memberRoles returns the roles userID holds in guildID, and false when they are not a member.
func (x *access) memberRoles(ctx context.Context, guildID, userID string) ([]string, bool, error) {
	if m := x.state.member(guildID, userID); m != nil {
		return m.Roles, true, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := x.rest.member(cctx, guildID, userID)
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Message != nil && re.Message.Code == discordgo.ErrCodeUnknownMember {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return m.Roles, true, nil
}

// allowed applies AllowedGuilds, AllowedChannels (a thread counts as its parent too) and
// AllowedRoles to a guild message or interaction, and returns the channel's parent when it is a
// thread or forum post: the pipeline's chat rules for the parent apply to it too. A channel
// whose parent cannot be learnt is not answered, so no thread escapes its parent's rules.
func (x *access) allowed(ctx context.Context, guildID, channelID string, roles []string) (parent string, ok bool) {
	o := x.opts
	if len(o.AllowedGuilds) > 0 && !slices.Contains(o.AllowedGuilds, guildID) {
		return "", false
	}
	if len(o.AllowedRoles) > 0 && !slices.ContainsFunc(roles, func(r string) bool { return slices.Contains(o.AllowedRoles, r) }) {
		return "", false
	}
	parent, err := x.parentOf(ctx, channelID)
	if err != nil {
		x.log.Warn("discord: cannot tell whether the channel is a thread, whose parent's rules apply; ignoring the message",
			"channel", channelID, "err", err)
		return "", false
	}
	if len(o.AllowedChannels) > 0 && !slices.Contains(o.AllowedChannels, channelID) {
		return parent, parent != "" && slices.Contains(o.AllowedChannels, parent)
	}
	return parent, true
}

// threadInfo is what the adapter keeps of a channel that may be a thread: its parent channel
// and the user who opened it ("" for a channel that is no thread).
type threadInfo struct {
	parent, owner string
}

// parentOf returns a thread's parent channel id ("" for other channels).
func (x *access) parentOf(ctx context.Context, channelID string) (string, error) {
	info, err := x.threadOf(ctx, channelID)
	return info.parent, err
}

// threadOf returns a channel's parent and, for a thread, who opened it.
func (x *access) threadOf(ctx context.Context, channelID string) (threadInfo, error) {
	return channelFact(ctx, x, channelID, x.parents, func(c *discordgo.Channel) threadInfo {
		if c.IsThread() {
			return threadInfo{parent: c.ParentID, owner: c.OwnerID}
		}
		return threadInfo{}
	})
}

// channelFact returns what fact reads of a channel: from the gateway's state when known, else
// asked once over REST and remembered in seen (guarded by x.mu).
func channelFact[T any](ctx context.Context, x *access, channelID string, seen map[string]T, fact func(*discordgo.Channel) T) (T, error) {
	if c := x.state.channel(channelID); c != nil {
		return fact(c), nil
	}
	x.mu.Lock()
	v, ok := seen[channelID]
	x.mu.Unlock()
	if ok {
		return v, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := x.rest.channel(cctx, channelID)
	if err != nil {
		var zero T
		return zero, err
	}
	v = fact(c)
	x.mu.Lock()
	seen[channelID] = v
	x.mu.Unlock()
	return v, nil
}

// noteThread remembers a channel's thread info: a thread the bot opened is known without
// asking Discord.
func (x *access) noteThread(channelID string, info threadInfo) {
	x.mu.Lock()
	x.parents[channelID] = info
	x.mu.Unlock()
}
