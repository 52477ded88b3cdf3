package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"relaybot/adapters"
	"relaybot/agent"
	"relaybot/chat"
	"relaybot/store"
)

// Limits caps tokens (prompt and completion together) and cost per UTC day and month; zero means
// no cap of that kind.
type Limits struct {
	TokensPerDay   int64
	TokensPerMonth int64
	CostPerDay     float64
	CostPerMonth   float64
}

func (l Limits) empty() bool { return l == Limits{} }

// QuotaOverride replaces the per-user limits for the users and roles it lists.
type QuotaOverride struct {
	// Users are "platform:user_id" entries ("*:id" for any platform).
	Users []string
	// Roles are platform role ids ("discord_role:ID") or "chat_admins".
	Roles  []string
	Limits Limits
}

// Quotas cap what each user and each chat may spend. Admins are exempt unless AdminsCounted.
type Quotas struct {
	User          Limits
	Chat          Limits
	Overrides     []QuotaOverride
	AdminsCounted bool
}

// userLimits returns the limits of the sender: the first override listing them, else User.
func (q Quotas) userLimits(in adapters.Inbound) Limits {
	for _, o := range q.Overrides {
		if newIDSet(o.Users).has(in.Chat.Platform, in.UserID) {
			return o.Limits
		}
		for _, r := range o.Roles {
			if r == "chat_admins" && in.ChatAdmin {
				return o.Limits
			}
			if id, ok := cutRole(r, in.Chat.Platform); ok && slices.Contains(in.Roles, id) {
				return o.Limits
			}
		}
	}
	return q.User
}

// cutRole returns the role id of a "platform_role:ID" entry for platform.
func cutRole(role string, p chat.Platform) (string, bool) {
	prefix := string(p) + "_role:"
	if len(role) > len(prefix) && role[:len(prefix)] == prefix {
		return role[len(prefix):], true
	}
	return "", false
}

// quotaError ends a turn whose quota ran out between two of its model calls; its text tells the
// user when the quota resets.
type quotaError struct{ text string }

func (e *quotaError) Error() string { return "over quota: " + e.text }

// quotaGuard checks the quotas before each model call of a turn.
type quotaGuard struct {
	opts   *Options
	access *accessRules
}

// beforeCall is the agent's BeforeCall for a turn of in: the turn's own model calls so far (not
// saved yet) count with what is stored, so a long tool loop stops at the quota too.
func (g *quotaGuard) beforeCall(in adapters.Inbound, log *slog.Logger) func(context.Context, []agent.LLMCall) error {
	return func(ctx context.Context, done []agent.LLMCall) error {
		var pending []store.UsageRow
		for _, c := range done {
			pending = append(pending, store.UsageRow{Platform: string(in.Chat.Platform), ChatID: in.Chat.ChatID,
				UserID: in.UserID, Model: c.Model, Calls: 1, TokensIn: int64(c.TokensIn), TokensOut: int64(c.TokensOut)})
		}
		if text, over := g.over(ctx, in, pending, log); over {
			return &quotaError{text: text}
		}
		return nil
	}
}

// over reports whether the sender or the chat has used up a quota, with the message that
// tells them when it resets; pending is usage not saved yet (the running turn's calls). A failed
// usage query lets the turn run (logged).
func (g *quotaGuard) over(ctx context.Context, in adapters.Inbound, pending []store.UsageRow, log *slog.Logger) (string, bool) {
	q := g.opts.Quotas
	if g.opts.Usage == nil || !q.AdminsCounted && g.access.isAdmin(in) {
		return "", false
	}
	user, chat := q.userLimits(in), q.Chat
	if user.empty() && chat.empty() {
		return "", false
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	now := g.opts.Now()
	checks := []struct {
		who    string
		limits Limits
		f      store.UsageFilter
	}{
		{"You have", user, store.UsageFilter{Platform: string(in.Chat.Platform), UserID: in.UserID}},
		{"This chat has", chat, store.UsageFilter{Platform: string(in.Chat.Platform), ChatID: in.Chat.ChatID}},
	}
	for _, c := range checks {
		if c.limits.empty() {
			continue
		}
		for _, period := range []struct {
			name          string
			since, resets time.Time
			tokens        int64
			cost          float64
		}{
			{"today's", dayStart(now), dayStart(now).AddDate(0, 0, 1), c.limits.TokensPerDay, c.limits.CostPerDay},
			{"this month's", monthStart(now), monthStart(now).AddDate(0, 1, 0), c.limits.TokensPerMonth, c.limits.CostPerMonth},
		} {
			if period.tokens == 0 && period.cost == 0 {
				continue
			}
			f := c.f
			f.Since = period.since
			rows, err := g.opts.Usage.Usage(qctx, f)
			if err != nil {
				log.Error("pipeline: quota not checked: usage query failed", "err", err)
				return "", false
			}
			t := total(append(rows, pending...), g.opts.Models.Prices)
			if period.tokens > 0 && t.TokensIn+t.TokensOut >= period.tokens || period.cost > 0 && t.Cost >= period.cost {
				return fmt.Sprintf("%s used up %s quota (%s). It resets %s UTC.", c.who, period.name,
					quotaUsed(t, period.tokens, period.cost), period.resets.Format("Jan 2 15:04")), true
			}
		}
	}
	return "", false
}

func quotaUsed(t store.UsageTotal, tokens int64, cost float64) string {
	if tokens > 0 && t.TokensIn+t.TokensOut >= tokens {
		return fmt.Sprintf("%d of %d tokens", t.TokensIn+t.TokensOut, tokens)
	}
	return fmt.Sprintf("cost %.4f of %.4f", t.Cost, cost)
}
