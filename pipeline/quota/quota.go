// Package quota is the part of the pipeline that holds users and chats to what they may spend:
// the quotas checked before a turn (Guard), the meter that checks them and reserves each model
// call's tokens before its request and settles it after (Meter), the usage report (/usage) and
// the per-user rate limit of messages. It knows nothing of turns or the queue: a turn takes a
// Meter and hands it to the runner.
package quota

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
	"relaybot/pipeline/access"
	"relaybot/policy"
	"relaybot/store"
)

// Policy caps what each user and each chat may spend. Admins are exempt unless AdminsCounted.
type Policy struct {
	User          policy.Limits
	Chat          policy.Limits
	Overrides     []policy.Override
	AdminsCounted bool
}

// userLimits returns the limits of the sender: the first override listing them, else User.
func (q Policy) userLimits(in adapters.Inbound) policy.Limits {
	for _, o := range q.Overrides {
		if access.NewIDSet(o.Users).Has(in.Chat.Platform, in.UserID) {
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

// Error ends a turn (or /compact) whose quota ran out before one of its model calls; its Text
// tells the user when the quota resets.
type Error struct{ Text string }

func (e *Error) Error() string { return "over quota: " + e.Text }

// quotaRule is one quota over a message's sender or chat in one period (a UTC day or month).
type quotaRule struct {
	who, period string
	resets      time.Time
	check       store.QuotaCheck
}

// refusal is what the user is told when the rule's quota is used up.
func (r quotaRule) refusal(used store.UsageTotal) string {
	return fmt.Sprintf("%s used up %s quota (%s). It resets %s UTC.", r.who, r.period,
		quotaUsed(used, r.check.Tokens, r.check.Cost), r.resets.Format("Jan 2 15:04"))
}

// over reports whether used reaches the rule's quota.
func (r quotaRule) over(used store.UsageTotal) bool {
	return r.check.Tokens > 0 && used.TokensIn+used.TokensOut >= r.check.Tokens || r.check.Cost > 0 && used.Cost >= r.check.Cost
}

// Options are what a Guard holds the turns to, and reads and writes usage with.
type Options struct {
	Policy Policy
	// Usage sums the usage stored; nil: no quota is checked, and /usage is not available.
	Usage UsageLog
	// Ledger keeps model calls from their start; nil when the store has none (the calls are
	// then saved with the turn, and the quotas checked without a reservation).
	Ledger CallLedger
	// Prices are the models' prices per million tokens, by configured model name.
	Prices map[string]chat.Price
	// Admins are exempt unless Policy.AdminsCounted.
	Admins access.IDSet
	// MaxOutput is the room a model keeps for its answer, reserved with each call's prompt.
	MaxOutput func(model string) int
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Guard holds the turns to the quotas: it checks them before a turn, and checks them and
// reserves each model call's tokens before its request (Meter). It is safe for concurrent use.
type Guard struct {
	opts Options
}

// New returns the Guard of o.
func New(o Options) *Guard {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxOutput == nil {
		o.MaxOutput = func(string) int { return 0 }
	}
	return &Guard{opts: o}
}

// rules returns the quotas a message of in is held to now; none for an exempt admin.
func (g *Guard) rules(in adapters.Inbound) []quotaRule {
	q := g.opts.Policy
	if g.opts.Usage == nil || !q.AdminsCounted && g.opts.Admins.Has(in.Chat.Platform, in.UserID) {
		return nil
	}
	now := g.opts.Now()
	var rules []quotaRule
	for _, c := range []struct {
		who    string
		limits policy.Limits
		f      store.UsageFilter
	}{
		{"You have", q.userLimits(in), store.UsageFilter{Platform: string(in.Chat.Platform), UserID: in.UserID}},
		{"This chat has", q.Chat, store.UsageFilter{Platform: string(in.Chat.Platform), QuotaChatID: ChatOf(in)}},
	} {
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
			rules = append(rules, quotaRule{who: c.who, period: period.name, resets: period.resets,
				check: store.QuotaCheck{Filter: f, Tokens: period.tokens, Cost: period.cost}})
		}
	}
	return rules
}

// Over reports whether the sender or the chat has used up a quota, with the message that
// tells them when it resets; pending is usage not saved yet. Calls running anywhere count with
// what they reserved. A failed usage query lets the message through (logged).
func (g *Guard) Over(ctx context.Context, in adapters.Inbound, pending []store.UsageRow, log *slog.Logger) (string, bool) {
	return g.overRules(ctx, g.rules(in), pending, log)
}

// overRules is over with the rules given.
func (g *Guard) overRules(ctx context.Context, rules []quotaRule, pending []store.UsageRow, log *slog.Logger) (string, bool) {
	if len(rules) == 0 {
		return "", false
	}
	// One try within a write's: a database that does not answer leaves the turn unchecked, not
	// waiting.
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), store.WriteAttempt)
	defer cancel()
	for _, r := range rules {
		rows, err := g.opts.Usage.Usage(qctx, r.check.Filter)
		if err != nil {
			log.Error("quota: not checked: usage query failed", "err", err)
			return "", false
		}
		if t := total(append(rows, pending...), g.opts.Prices); r.over(t) {
			return r.refusal(t), true
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

// Ledgered reports whether model calls are kept from their start (Options.Ledger): a turn's
// start may then ride in its first call's reservation.
func (g *Guard) Ledgered() bool { return g.opts.Ledger != nil }
