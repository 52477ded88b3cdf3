package discord

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"
)

// dmVerdictTTL is how long the answer to "may this user send direct messages" is remembered:
// roles change rarely, and a DM conversation should not cost a REST call per message.
const dmVerdictTTL = time.Minute

// maxDMVerdicts bounds the remembered answers; expired ones are dropped when it is reached.
const maxDMVerdicts = 4096

// Access is where and for whom the bot answers: [discord]'s allow lists and the [access] users
// they let send direct messages, which a reload may change (Adapter.SetAccess).
type Access struct {
	// AllowedGuilds, AllowedChannels and AllowedRoles restrict where and for whom the bot
	// answers in guilds; empty means no restriction of that kind. A thread is allowed when it
	// or its parent channel is listed. When any of them is set, a direct message (or a slash
	// command in one) is answered only for a user in AccessUsers or a member of an allowed guild
	// (AllowedGuilds, else the guilds of AllowedChannels, else every guild the bot is in) who
	// holds an allowed role there when AllowedRoles is set; the membership is asked of Discord
	// and remembered for a minute.
	AllowedGuilds, AllowedChannels, AllowedRoles []string
	// AccessUsers are user ids listed in the bot's [access] allow_users or admins: they may
	// always send direct messages, whatever the guild rules.
	AccessUsers []string
	// NoDMs refuses every direct message and every slash command used in one.
	NoDMs bool
}

// guildRules reports whether any of AllowedGuilds, AllowedChannels and AllowedRoles is set.
func (o *Access) guildRules() bool {
	return len(o.AllowedGuilds) > 0 || len(o.AllowedChannels) > 0 || len(o.AllowedRoles) > 0
}

// SetAccess makes acc where and for whom the bot answers from the next message on (a reload);
// the direct messages' verdicts remembered under the old rules are forgotten.
func (a *Adapter) SetAccess(acc Access) { a.interactions.access.set(acc) }

type dmVerdict struct {
	ok    bool
	until time.Time
}

// access applies the guild rules (AllowedGuilds, AllowedChannels, AllowedRoles) to guild
// messages and interactions, and to direct messages (NoDMs, AccessUsers, the members of the
// allowed guilds), learning channels and members from the gateway's state or over REST.
type access struct {
	rules atomic.Pointer[Access]
	log   *slog.Logger
	rest  *rest
	state *shardStates

	mu      sync.Mutex
	parents map[string]threadInfo // channel id → its parent and owner (zero for no thread), for AllowedChannels
	guildOf map[string]string     // channel id → guild id, for the DM rule with AllowedChannels
	dmUsers map[string]dmVerdict
}

func newAccess(opts Options, api *rest, state *shardStates) *access {
	x := &access{log: opts.Logger, rest: api, state: state,
		parents: map[string]threadInfo{}, guildOf: map[string]string{}, dmUsers: map[string]dmVerdict{}}
	x.set(opts.Access)
	return x
}

// set makes acc the rules, forgetting the verdicts of the old ones.
func (x *access) set(acc Access) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.rules.Store(&acc)
	clear(x.dmUsers)
}

// dmAllowed applies the guild rules to a direct message from userID: without them anyone may
// send one (unless NoDMs); with them only users in AccessUsers, or members of an allowed guild
// with an allowed role. Otherwise a user refused in the guild for lacking the role would be
// answered by DM.
func (x *access) dmAllowed(ctx context.Context, userID string) bool {
	o := x.rules.Load()
	if o.NoDMs {
		return false
	}
	if !o.guildRules() || slices.Contains(o.AccessUsers, userID) {
		return true
	}
	now := time.Now()
	x.mu.Lock()
	v, ok := x.dmUsers[userID]
	x.mu.Unlock()
	if ok && now.Before(v.until) {
		return v.ok
	}
	allowed, err := x.memberPasses(ctx, o, userID)
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
	// A verdict of rules a reload replaced meanwhile is not kept.
	if len(x.dmUsers) < maxDMVerdicts && x.rules.Load() == o {
		x.dmUsers[userID] = dmVerdict{ok: allowed, until: now.Add(dmVerdictTTL)}
	}
	x.mu.Unlock()
	return allowed
}

// memberPasses reports whether userID is a member of an allowed guild holding an allowed role
// there (any role when AllowedRoles is empty).
func (x *access) memberPasses(ctx context.Context, o *Access, userID string) (bool, error) {
	guilds, err := x.dmGuilds(ctx, o)
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
		if len(o.AllowedRoles) == 0 || slices.ContainsFunc(roles, func(r string) bool { return slices.Contains(o.AllowedRoles, r) }) {
			return true, nil
		}
	}
	return false, nil
}

// dmGuilds returns the guilds whose members may send direct messages: AllowedGuilds, else the
// guilds of AllowedChannels, else every guild the bot is in.
func (x *access) dmGuilds(ctx context.Context, o *Access) ([]string, error) {
	if len(o.AllowedGuilds) > 0 {
		return o.AllowedGuilds, nil
	}
	if len(o.AllowedChannels) > 0 {
		var guilds []string
		for _, ch := range o.AllowedChannels {
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
	o := x.rules.Load()
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
