package pipeline

import (
	"context"
	"fmt"
	"strings"
	"time"

	"relaybot/chat"
	"relaybot/store"
)

// UsageLog sums the tokens of model calls (*store.UsageQuery).
type UsageLog interface {
	Usage(ctx context.Context, f store.UsageFilter) ([]store.UsageRow, error)
}

// usageTopN is how many users and chats /usage all lists.
const usageTopN = 5

// dayStart and monthStart are the UTC starts of the day and month of t: usage and quotas count
// per UTC day and month.
func dayStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// usage answers /usage (the sender's tokens and cost today and this month, on this
// platform) and, for admins, /usage all (everyone's, with the top users and chats).
func (c *commands) usage(r *request) {
	ctx, in, args, out, log := r.ctx, r.in, r.in.Args, r.out, r.log
	if c.opts.Usage == nil {
		c.say(out, "Usage is not available in this server.", log)
		return
	}
	all := strings.EqualFold(strings.TrimSpace(args), "all")
	if all && !c.access.isAdmin(in) {
		c.say(out, "Only bot admins can use /usage all.", log)
		return
	}
	if !all && strings.TrimSpace(args) != "" {
		c.say(out, "Usage: /usage, or /usage all for admins.", log)
		return
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	now := c.opts.Now()
	f := store.UsageFilter{Since: monthStart(now)}
	if !all {
		f.Platform, f.UserID = string(in.Chat.Platform), in.UserID
	}
	month, err := c.opts.Usage.Usage(qctx, f)
	if err == nil {
		f.Since = dayStart(now)
		var day []store.UsageRow
		if day, err = c.opts.Usage.Usage(qctx, f); err == nil {
			c.say(out, formatUsage(day, month, all, c.opts.Models.Prices), log)
			return
		}
	}
	c.failed(r, "/usage", err)
}

// formatUsage renders the totals of today and this month (UTC), and for /usage all the month's
// top users, chats and models.
func formatUsage(day, month []store.UsageRow, all bool, prices map[string]chat.Price) string {
	var b strings.Builder
	who := "Your usage"
	if all {
		who = "Usage of everyone"
	}
	mt := total(month, prices)
	fmt.Fprintf(&b, "%s (UTC):\nToday: %s\nThis month: %s", who, usageLine(total(day, prices)), usageLine(mt))
	if all {
		for _, by := range []struct{ name, key string }{{"users", store.ByUser}, {"chats", store.ByChat}, {"models", store.ByModel}} {
			tops := store.RollUp(month, by.key, prices)
			if len(tops) == 0 {
				continue
			}
			fmt.Fprintf(&b, "\nTop %s:", by.name)
			for _, x := range tops[:min(len(tops), usageTopN)] {
				fmt.Fprintf(&b, "\n- %s: %s", x.Key, usageLine(x))
			}
		}
	}
	if mt.Estimated > 0 {
		b.WriteString("\n" + EstimatedNote)
	}
	return b.String()
}

// EstimatedNote ends a /usage answer that counts estimated calls.
const EstimatedNote = "≈ includes estimates: the provider reports no usage for an answer stopped or cut off, a failed call or one still running, so the bot counts the prompt's estimate and what was generated."

func total(rows []store.UsageRow, prices map[string]chat.Price) store.UsageTotal {
	if t := store.RollUp(rows, store.ByAll, prices); len(t) > 0 {
		return t[0]
	}
	return store.UsageTotal{}
}

func usageLine(t store.UsageTotal) string {
	audio := ""
	if t.AudioSeconds > 0 {
		audio = fmt.Sprintf(", %.0f s of audio", t.AudioSeconds)
	}
	if t.Estimated > 0 {
		return fmt.Sprintf("≈%d tokens in, ≈%d out%s, %d model calls (%d estimated), cost ≈%.4f", t.TokensIn, t.TokensOut, audio, t.Calls, t.Estimated, t.Cost)
	}
	return fmt.Sprintf("%d tokens in, %d out%s, %d model calls, cost %.4f", t.TokensIn, t.TokensOut, audio, t.Calls, t.Cost)
}
