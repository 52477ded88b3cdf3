package store

import (
	"context"
	"fmt"
	"relaybot/chat"
	"time"

	"gorm.io/gorm"
)

// TurnFilter selects turns. Zero fields do not filter.
type TurnFilter struct {
	Since, Until time.Time // started_at >= Since and < Until
	// Status is TurnRunning, TurnOK, TurnError, TurnCancelled or TurnInterrupted.
	Status chat.Status
	// Chat keeps the turns of conversations in one chat: its empty fields do not filter, so
	// {Platform: "telegram"} is every Telegram chat and a Ref without ThreadID every thread and
	// user of the chat.
	Chat chat.Ref
}

func (f TurnFilter) validate() error {
	if f.Status != "" && !f.Status.Valid() {
		return fmt.Errorf("unknown turn status %q (want one of %v)", f.Status, chat.Statuses)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return fmt.Errorf("since %s is not before until %s", f.Since.Format(time.RFC3339), f.Until.Format(time.RFC3339))
	}
	return nil
}

func (f TurnFilter) where(db *gorm.DB) *gorm.DB {
	if !f.Since.IsZero() {
		db = db.Where("started_at >= ?", dbTime(f.Since))
	}
	if !f.Until.IsZero() {
		db = db.Where("started_at < ?", dbTime(f.Until))
	}
	if f.Status != "" {
		db = db.Where("status = ?", f.Status)
	}
	if f.Chat != (chat.Ref{}) {
		convs := db.Session(&gorm.Session{NewDB: true}).Table("conversations").Select("id")
		for _, e := range []struct{ col, v string }{{"platform", string(f.Chat.Platform)},
			{"chat_id", f.Chat.ChatID}, {"thread_id", f.Chat.ThreadID}} {
			if e.v != "" {
				convs = convs.Where(e.col+" = ?", e.v)
			}
		}
		db = db.Where("conversation_id IN (?)", convs)
	}
	return db
}

// CountTurns returns how many turns match f.
func (s *TurnQuery) CountTurns(ctx context.Context, f TurnFilter) (int, error) {
	if err := f.validate(); err != nil {
		return 0, fmt.Errorf("store: count turns: %w", err)
	}
	var n int64
	if err := f.where(s.r.WithContext(ctx).Model(&turnRow{})).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("store: count turns: %w", err)
	}
	return int(n), nil
}

// TurnStatusCounts returns how many turns match f, by status; statuses with no turn are absent.
func (s *TurnQuery) TurnStatusCounts(ctx context.Context, f TurnFilter) (map[string]int, error) {
	if err := f.validate(); err != nil {
		return nil, fmt.Errorf("store: count turns by status: %w", err)
	}
	var rows []struct {
		Status string
		N      int64
	}
	err := f.where(s.r.WithContext(ctx).Model(&turnRow{})).Select("status, COUNT(*) AS n").
		Group("status").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: count turns by status: %w", err)
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.Status] = int(r.N)
	}
	return out, nil
}
