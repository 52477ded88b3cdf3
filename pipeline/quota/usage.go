package quota

import (
	"context"
	"fmt"
	"strings"
	"time"

	"relaybot/adapters"
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

// Report is the /usage answer: the tokens and cost of in's sender today and this month (UTC) on
// this platform, or with all everyone's, with the month's top users, chats and models.
func (g *Guard) Report(ctx context.Context, in adapters.Inbound, all bool) (string, error) {
	now := g.opts.Now()
	f := store.UsageFilter{Since: monthStart(now)}
	if !all {
		f.Platform, f.UserID = string(in.Chat.Platform), in.UserID
	}
	month, err := g.opts.Usage.Usage(ctx, f)
	if err != nil {
		return "", fmt.Errorf("usage this month: %w", err)
	}
	f.Since = dayStart(now)
	day, err := g.opts.Usage.Usage(ctx, f)
	if err != nil {
		return "", fmt.Errorf("usage today: %w", err)
	}
	return formatUsage(day, month, all, g.opts.Prices), nil
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
	if mt.CachedTokens > 0 {
		b.WriteString("\n" + CachedNote)
	}
	if mt.Estimated > 0 {
		b.WriteString("\n" + EstimatedNote)
	}
	return b.String()
}

// CachedNote explains the cached tokens of a /usage answer.
const CachedNote = "Cached tokens are prompt tokens the provider served from its prompt cache; they are part of the tokens in and cost what the provider bills for them."

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
	if t.Images > 0 {
		audio += fmt.Sprintf(", %d images", t.Images)
	}
	cached, saved := "", ""
	if t.CachedTokens > 0 {
		cached = fmt.Sprintf(" (%d cached)", t.CachedTokens)
	}
	if t.CacheSaved > 0.00005 {
		saved = fmt.Sprintf(" (%.4f saved by the cache)", t.CacheSaved)
	}
	if t.Estimated > 0 {
		return fmt.Sprintf("≈%d tokens in%s, ≈%d out%s, %d model calls (%d estimated), cost ≈%.4f%s", t.TokensIn, cached, t.TokensOut, audio, t.Calls, t.Estimated, t.Cost, saved)
	}
	return fmt.Sprintf("%d tokens in%s, %d out%s, %d model calls, cost %.4f%s", t.TokensIn, cached, t.TokensOut, audio, t.Calls, t.Cost, saved)
}
