package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"relaybot/chat"

	"gorm.io/gorm"
)

// UsageFilter selects the model calls Usage sums. Zero fields do not filter.
type UsageFilter struct {
	Since, Until time.Time // llm_calls.started_at >= Since and < Until
	Platform     string
	ChatID       string
	UserID       string
	// ThreadID keeps the calls of turns in one thread or forum topic of the chat (chat.Ref's
	// ThreadID); calls of no turn (a /compact) are left out then.
	ThreadID string
	// QuotaChatID matches the calls counted toward a chat's quota: its own and its threads'.
	QuotaChatID string
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
	// CachedTokens is the part of TokensIn the provider served from its prompt cache,
	// CacheWriteTokens the part it wrote to it.
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	// Estimated counts the calls whose tokens the bot estimated (the provider reported none: a
	// stopped, cut or failed stream, or a call still running).
	Estimated int64 `json:"estimated"`
	// AudioMs is the audio the row's speech calls transcribed, in milliseconds.
	AudioMs int64 `json:"audio_ms"`
	// Images is how many images the row's image calls delivered.
	Images int64 `json:"images"`
}

// Cost is what the row's tokens, audio and images cost at p, its cached tokens at the cache's
// price.
func (r UsageRow) Cost(p chat.Price) float64 {
	return p.Bill(r.TokensIn, r.CachedTokens, r.CacheWriteTokens, r.TokensOut) + p.AudioCost(r.AudioMs) + p.ImageCost(r.Images)
}

// Usage sums the tokens of the model calls matching f per platform, chat, user and model (the
// user is the one whose message started the turn, or who asked for /compact), ordered by
// platform, chat, user, model. A call still running counts with the tokens it reserved.
func (s *UsageQuery) Usage(ctx context.Context, f UsageFilter) ([]UsageRow, error) {
	rows, err := usageQuery(s.r.WithContext(ctx), f)
	if err != nil {
		return nil, fmt.Errorf("store: usage: %w", err)
	}
	return rows, nil
}

// usageQuery sums the calls matching f on db (a transaction's, for a quota check).
func usageQuery(db *gorm.DB, f UsageFilter) ([]UsageRow, error) {
	q := db.Table("llm_calls").
		Select("platform, chat_id, user_id, model, COUNT(*) AS calls, " +
			"COALESCE(SUM(tokens_in), 0) AS tokens_in, COALESCE(SUM(tokens_out), 0) AS tokens_out, " +
			"COALESCE(SUM(cached_in), 0) AS cached_tokens, COALESCE(SUM(cache_write_in), 0) AS cache_write_tokens, " +
			"COALESCE(SUM(CASE WHEN estimated THEN 1 ELSE 0 END), 0) AS estimated, " +
			"COALESCE(SUM(audio_ms), 0) AS audio_ms, COALESCE(SUM(images), 0) AS images")
	if !f.Since.IsZero() {
		q = q.Where("started_at >= ?", dbTime(f.Since))
	}
	if !f.Until.IsZero() {
		q = q.Where("started_at < ?", dbTime(f.Until))
	}
	for _, e := range []struct{ col, v string }{{"platform", f.Platform}, {"chat_id", f.ChatID}, {"user_id", f.UserID}, {"quota_chat_id", f.QuotaChatID}} {
		if e.v != "" {
			q = q.Where(e.col+" = ?", e.v)
		}
	}
	if f.ThreadID != "" {
		fresh := db.Session(&gorm.Session{NewDB: true})
		convs := fresh.Table("conversations").Select("id").Where("thread_id = ?", f.ThreadID)
		q = q.Where("turn_id IN (?)", fresh.Table("turns").Select("id").Where("conversation_id IN (?)", convs))
	}
	var rows []UsageRow
	err := q.Group("platform, chat_id, user_id, model").
		Order("platform, chat_id, user_id, model").Scan(&rows).Error
	return rows, err
}

// UsageTotal is the sum of usage rows under one key, with their cost.
type UsageTotal struct {
	Key       string `json:"key"`
	Calls     int64  `json:"calls"`
	TokensIn  int64  `json:"tokens_in"`
	TokensOut int64  `json:"tokens_out"`
	// CachedTokens is the part of TokensIn served from the providers' prompt caches (billed at
	// the models' price_cached_in), CacheWriteTokens the part written to them.
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	// Cost is what the providers bill: cached and written prompt tokens at their own prices.
	Cost float64 `json:"cost"`
	// CacheSaved is what the same tokens would have cost with nothing cached, less Cost: what
	// the providers' caches saved, net of what cache writes cost more.
	CacheSaved float64 `json:"cache_saved"`
	// Estimated counts the calls among Calls whose tokens are the bot's estimate.
	Estimated int64 `json:"estimated"`
	// AudioSeconds is the audio transcribed, in seconds.
	AudioSeconds float64 `json:"audio_seconds"`
	// Images is how many images were generated.
	Images int64 `json:"images"`
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
		t.CachedTokens += r.CachedTokens
		t.CacheWriteTokens += r.CacheWriteTokens
		t.Estimated += r.Estimated
		t.AudioSeconds += float64(r.AudioMs) / 1000
		t.Images += r.Images
		p := prices[r.Model]
		cost := r.Cost(p)
		t.Cost += cost
		t.CacheSaved += p.Cost(r.TokensIn, r.TokensOut) + p.AudioCost(r.AudioMs) + p.ImageCost(r.Images) - cost
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
