package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"relaybot/chat"
	"time"

	"gorm.io/gorm"
)

// Timeline is what a turn's timeline is drawn from: the turn, its model calls in order and the
// platform requests of its reply. Its tool calls are the audit log's (audit.Filter.TurnID).
type Timeline struct {
	Turn Turn
	// Chat is the chat (and thread) of the turn's conversation.
	Chat       chat.Ref
	LLMCalls   []chat.ModelCall
	Deliveries []Delivery
}

// TurnTimeline returns the timeline of one turn; an error wrapping ErrNotFound when there is
// no such turn. A running turn has no model calls or deliveries yet: they are saved at its end.
func (s *TimelineQuery) TurnTimeline(ctx context.Context, id int64) (Timeline, error) {
	var row turnRow
	err := s.r.WithContext(ctx).Select(tracedTurnColumns+", deliveries").Take(&row, id).Error
	if err == gorm.ErrRecordNotFound {
		return Timeline{}, fmt.Errorf("store: timeline of turn %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Timeline{}, fmt.Errorf("store: timeline of turn %d: %w", id, err)
	}
	tl := Timeline{Turn: row.public()}
	var conv conversationRow
	if err := s.r.WithContext(ctx).Select("id, platform, chat_id, thread_id").Take(&conv, row.ConversationID).Error; err != nil {
		return Timeline{}, fmt.Errorf("store: timeline of turn %d: its conversation: %w", id, err)
	}
	tl.Chat = chat.Ref{Platform: chat.Platform(conv.Platform), ChatID: conv.ChatID, ThreadID: conv.ThreadID}
	if row.Deliveries != "" {
		if err := json.Unmarshal([]byte(row.Deliveries), &tl.Deliveries); err != nil {
			return Timeline{}, fmt.Errorf("store: timeline of turn %d: deliveries: %w", id, err)
		}
	}
	var calls []llmCallRow
	if err := s.r.WithContext(ctx).Where("turn_id = ?", id).Order("seq").Find(&calls).Error; err != nil {
		return Timeline{}, fmt.Errorf("store: timeline of turn %d: model calls: %w", id, err)
	}
	for _, c := range calls {
		call := chat.ModelCall{Round: c.Round, Model: c.Model, Candidate: c.Candidate,
			FallbackReason: c.FallbackReason, Status: c.Status,
			TimeToFirstToken: time.Duration(c.TTFTMs) * time.Millisecond,
			Duration:         time.Duration(c.DurationMs) * time.Millisecond,
			TokensIn:         c.TokensIn, TokensOut: c.TokensOut, CachedIn: c.CachedIn, CacheWriteIn: c.CacheWriteIn,
			StartedAt: c.StartedAt.UTC()}
		if c.Error != "" {
			call.Err = errors.New(c.Error)
		}
		tl.LLMCalls = append(tl.LLMCalls, call)
	}
	return tl, nil
}

// deliveriesJSON is the deliveries column of a turn: at most MaxDeliveries, the first ones and
// the last, as JSON; empty for none.
func deliveriesJSON(ds []Delivery) (string, error) {
	if len(ds) == 0 {
		return "", nil
	}
	if len(ds) > MaxDeliveries {
		ds = append(ds[:MaxDeliveries-1:MaxDeliveries-1], ds[len(ds)-1])
	}
	for i := range ds {
		ds[i].At = ds[i].At.UTC()
	}
	b, err := json.Marshal(ds)
	if err != nil {
		return "", fmt.Errorf("deliveries: %w", err)
	}
	return string(b), nil
}

// ChatTurns returns the newest turns of the chat of ref (every thread and user of it), newest
// first, at most limit (50 when limit is not positive).
func (s *TurnQuery) ChatTurns(ctx context.Context, ref chat.Ref, limit int) ([]Turn, error) {
	if limit <= 0 {
		limit = 50
	}
	convs := s.r.WithContext(ctx).Table("conversations").Select("id").
		Where("platform = ? AND chat_id = ?", string(ref.Platform), ref.ChatID)
	var rows []turnRow
	err := s.r.WithContext(ctx).Table("turns").Select(tracedTurnColumns).
		Where("conversation_id IN (?)", convs).Order("id DESC").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: turns of %s: %w", ref.Chat(), err)
	}
	out := make([]Turn, len(rows))
	for i, r := range rows {
		out[i] = r.public()
	}
	return out, nil
}

// replyTimes are what the overview charts of a turn's reply, taken from its deliveries when the
// turn ends: when it first showed text, when its final text was delivered (nil when it did not),
// and the 429s it waited out.
type replyTimes struct {
	firstText, final *time.Time
	waits            int
	waitedMS         int64
}

// replyTimesOf reads a reply's times from its deliveries, in order: the first send, draft or
// edit showed text; the last request carrying the final text delivered it.
func replyTimesOf(ds []Delivery) replyTimes {
	var rt replyTimes
	for _, d := range ds {
		switch d.Kind {
		case "send", "draft", "edit", "files", "not_modified":
			if rt.firstText == nil && d.Kind != "files" && d.Kind != "not_modified" {
				t := dbTime(d.At)
				rt.firstText = &t
			}
			if d.Final {
				t := dbTime(d.At)
				rt.final = &t
			}
		case "rate_limited":
			rt.waits++
			rt.waitedMS += d.WaitMS
		}
	}
	return rt
}
