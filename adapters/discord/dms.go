package discord

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// guildRules reports whether any of AllowedGuilds, AllowedChannels and AllowedRoles is set.
func (a *Adapter) guildRules() bool {
	o := a.opts
	return len(o.AllowedGuilds) > 0 || len(o.AllowedChannels) > 0 || len(o.AllowedRoles) > 0
}

// dmAllowed applies the guild rules to a direct message from userID: without them anyone may
// send one (unless NoDMs); with them only users in AccessUsers, or members of an allowed guild
// with an allowed role. Otherwise a user refused in the guild for lacking the role would be
// answered by DM.
func (a *Adapter) dmAllowed(ctx context.Context, userID string) bool {
	if a.opts.NoDMs {
		return false
	}
	if !a.guildRules() || slices.Contains(a.opts.AccessUsers, userID) {
		return true
	}
	now := time.Now()
	a.mu.Lock()
	v, ok := a.dmUsers[userID]
	a.mu.Unlock()
	if ok && now.Before(v.until) {
		return v.ok
	}
	allowed, err := a.memberPasses(ctx, userID)
	if err != nil {
		a.log.Warn("discord: cannot tell whether the sender of a direct message passes the guild rules; ignoring the message",
			"user", userID, "err", err)
		return false
	}
	a.mu.Lock()
	if len(a.dmUsers) >= maxDMVerdicts {
		for id, v := range a.dmUsers {
			if !now.Before(v.until) {
				delete(a.dmUsers, id)
			}
		}
	}
	if len(a.dmUsers) < maxDMVerdicts {
		a.dmUsers[userID] = dmVerdict{ok: allowed, until: now.Add(dmVerdictTTL)}
	}
	a.mu.Unlock()
	return allowed
}

// memberPasses reports whether userID is a member of an allowed guild holding an allowed role
// there (any role when AllowedRoles is empty).
func (a *Adapter) memberPasses(ctx context.Context, userID string) (bool, error) {
	guilds, err := a.dmGuilds(ctx)
	if err != nil {
		return false, err
	}
	for _, g := range guilds {
		roles, member, err := a.memberRoles(ctx, g, userID)
		if err != nil {
			return false, err
		}
		if !member {
			continue
		}
		if len(a.opts.AllowedRoles) == 0 || slices.ContainsFunc(roles, func(r string) bool { return slices.Contains(a.opts.AllowedRoles, r) }) {
			return true, nil
		}
	}
	return false, nil
}

// dmGuilds returns the guilds whose members may send direct messages: AllowedGuilds, else the
// guilds of AllowedChannels, else every guild the bot is in.
func (a *Adapter) dmGuilds(ctx context.Context) ([]string, error) {
	if len(a.opts.AllowedGuilds) > 0 {
		return a.opts.AllowedGuilds, nil
	}
	if len(a.opts.AllowedChannels) > 0 {
		var guilds []string
		for _, ch := range a.opts.AllowedChannels {
			g, err := a.channelGuild(ctx, ch)
			if err != nil {
				return nil, err
			}
			if g != "" && !slices.Contains(guilds, g) {
				guilds = append(guilds, g)
			}
		}
		return guilds, nil
	}
	return a.stateGuilds(), nil
}

// channelGuild returns the guild a channel belongs to: from the gateway's state when known,
// else asked once over REST and remembered.
func (a *Adapter) channelGuild(ctx context.Context, channelID string) (string, error) {
	if c := a.stateChannel(channelID); c != nil {
		return c.GuildID, nil
	}
	a.mu.Lock()
	g, ok := a.guildOf[channelID]
	a.mu.Unlock()
	if ok {
		return g, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := a.channel(cctx, channelID)
	if err != nil {
		return "", err
	}
	a.mu.Lock()
	a.guildOf[channelID] = c.GuildID
	a.mu.Unlock()
	return c.GuildID, nil
}

// memberRoles returns the roles userID holds in guildID, and false when they are not a member.
func (a *Adapter) memberRoles(ctx context.Context, guildID, userID string) ([]string, bool, error) {
	if m := a.stateMember(guildID, userID); m != nil {
		return m.Roles, true, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var m *discordgo.Member
	err := a.botWide(cctx, fmt.Sprintf("looking up member %s of guild %s", userID, guildID), func(ctx context.Context) (err error) {
		m, err = a.session.GuildMember(guildID, userID, a.reqOpts(ctx)...)
		return err
	})
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Message != nil && re.Message.Code == discordgo.ErrCodeUnknownMember {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return m.Roles, true, nil
}
