package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"relaybot/chat"
)

// UsageFilter selects the model calls Usage sums. Zero fields do not filter.
type UsageFilter struct {
	Since, Until time.Time // llm_calls.started_at >= Since and < Until
	Platform     string
	ChatID       string
	UserID       string
}

// UsageRow is the tokens of the model calls of one user in one chat with one model.
type UsageRow struct {
	Platform  string `json:"platform"`
	ChatID    string `json:"chat_id"`
	UserID    string `json:"user_id"`
	Model     string `json:"model"`
	Calls     int64  `json:"calls"`
	TokensIn  int64  `json:"tokens_in"`
	TokensOut int64  `json:"tokens_out"`
}

// Cost is what the row's tokens cost at p.
func (r UsageRow) Cost(p chat.Price) float64 { return p.Cost(r.TokensIn, r.TokensOut) }

// Usage sums the tokens of the model calls matching f per platform, chat, user and model (the
// user is the one whose message started the turn), ordered by platform, chat, user, model.
func (s *Store) Usage(ctx context.Context, f UsageFilter) ([]UsageRow, error) {
	q := s.r.WithContext(ctx).Table("llm_calls AS l").
		Select("c.platform AS platform, c.chat_id AS chat_id, t.user_id AS user_id, l.model AS model, " +
			"COUNT(*) AS calls, COALESCE(SUM(l.tokens_in), 0) AS tokens_in, COALESCE(SUM(l.tokens_out), 0) AS tokens_out").
		Joins("JOIN turns t ON t.id = l.turn_id").
		Joins("JOIN conversations c ON c.id = t.conversation_id")
	if !f.Since.IsZero() {
		q = q.Where("l.started_at >= ?", dbTime(f.Since))
	}
	if !f.Until.IsZero() {
		q = q.Where("l.started_at < ?", dbTime(f.Until))
	}
	for _, e := range []struct{ col, v string }{{"c.platform", f.Platform}, {"c.chat_id", f.ChatID}, {"t.user_id", f.UserID}} {
		if e.v != "" {
			q = q.Where(e.col+" = ?", e.v)
		}
	}
	var rows []UsageRow
	err := q.Group("c.platform, c.chat_id, t.user_id, l.model").
		Order("c.platform, c.chat_id, t.user_id, l.model").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: usage: %w", err)
	}
	return rows, nil
}

// UsageTotal is the sum of usage rows under one key, with their cost.
type UsageTotal struct {
	Key       string  `json:"key"`
	Calls     int64   `json:"calls"`
	TokensIn  int64   `json:"tokens_in"`
	TokensOut int64   `json:"tokens_out"`
	Cost      float64 `json:"cost"`
}

// Ways to roll usage up.
const (
	ByUser  = "user"  // "platform:user_id"
	ByChat  = "chat"  // "platform:chat_id"
	ByModel = "model" // the configured model name
	ByAll   = "all"   // one total, key ""
)

// RollUp sums rows per key (ByUser, ByChat, ByModel or ByAll) and prices each row's tokens with
// its model's price (a model without a price costs nothing). Totals come most expensive first,
// then by most tokens, then by key.
func RollUp(rows []UsageRow, by string, prices map[string]chat.Price) []UsageTotal {
	idx := map[string]int{}
	var out []UsageTotal
	for _, r := range rows {
		var key string
		switch by {
		case ByUser:
			key = chat.User{Platform: chat.Platform(r.Platform), ID: r.UserID}.String()
		case ByChat:
			key = chat.Ref{Platform: chat.Platform(r.Platform), ChatID: r.ChatID}.String()
		case ByModel:
			key = r.Model
		}
		i, ok := idx[key]
		if !ok {
			i = len(out)
			idx[key] = i
			out = append(out, UsageTotal{Key: key})
		}
		t := &out[i]
		t.Calls += r.Calls
		t.TokensIn += r.TokensIn
		t.TokensOut += r.TokensOut
		t.Cost += r.Cost(prices[r.Model])
	}
	slices.SortFunc(out, func(a, b UsageTotal) int {
		if c := cmp.Compare(b.Cost, a.Cost); c != 0 {
			return c
		}
		if c := cmp.Compare(b.TokensIn+b.TokensOut, a.TokensIn+a.TokensOut); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return out
}
