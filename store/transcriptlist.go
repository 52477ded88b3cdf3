package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"relaybot/chat"
)

// ListedConversation is a conversation as the conversations list shows it.
type ListedConversation struct {
	ID   int64
	Chat chat.Ref
	// UserID is the person a conversation kept per person belongs to; empty for a shared one.
	UserID    string
	Active    bool
	CreatedAt time.Time
	// Turns counts its turns, and Answered, Stopped and Failed those that ended so.
	Turns, Answered, Stopped, Failed int
	// FirstTurnID and LastTurnID are its first and last turn; LastAt is when the last started.
	FirstTurnID, LastTurnID int64
	LastAt                  time.Time
	// MatchTurnID is the newest turn the filter matched: the list's order and its paging key.
	MatchTurnID int64
	// People are the names (or ids, for a nameless person) of who spoke, in order of their
	// first turn, at most maxPeople.
	People []string
	// Opening is the first member message's text, as saved (the caller cuts it).
	Opening string
}

// maxPeople is the most people a listed conversation names.
const maxPeople = 5

// Conversations lists the conversations with a turn matching f, the one with the newest such
// turn first, paged by that turn's id (ListedConversation.MatchTurnID).
func (s *TranscriptQuery) Conversations(ctx context.Context, f ConversationFilter, p Paging) (Page[ListedConversation], error) {
	if err := f.validate(); err != nil {
		return Page[ListedConversation]{}, fmt.Errorf("store: conversations: %w", err)
	}
	base := func() *gorm.DB {
		return f.where(s.r.WithContext(ctx).Table("turns t")).Select("t.conversation_id AS c, MAX(t.id) AS k").
			Group("t.conversation_id")
	}
	var keys []struct{ C, K int64 }
	if err := p.page(base(), "MAX(t.id)", true).Scan(&keys).Error; err != nil {
		return Page[ListedConversation]{}, fmt.Errorf("store: conversations: %w", err)
	}
	page, err := pageOf(keys, p, func(k struct{ C, K int64 }) int64 { return k.K }, func(op string, k int64) (bool, error) {
		var found []struct{ C, K int64 }
		err := base().Having("MAX(t.id) "+op+" ?", k).Limit(1).Scan(&found).Error
		return len(found) > 0, err
	})
	if err != nil {
		return Page[ListedConversation]{}, fmt.Errorf("store: conversations: %w", err)
	}
	out := Page[ListedConversation]{Older: page.Older, Newer: page.Newer}
	ids := make([]int64, len(page.Items))
	for i, k := range page.Items {
		ids[i] = k.C
	}
	byID, err := s.describe(ctx, ids)
	if err != nil {
		return Page[ListedConversation]{}, fmt.Errorf("store: conversations: %w", err)
	}
	for _, k := range page.Items {
		if c, ok := byID[k.C]; ok {
			c.MatchTurnID = k.K
			out.Items = append(out.Items, c)
		}
	}
	return out, nil
}

// describe reads what the list shows of the conversations ids names, by id.
func (s *TranscriptQuery) describe(ctx context.Context, ids []int64) (map[int64]ListedConversation, error) {
	out := make(map[int64]ListedConversation, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	db := s.r.WithContext(ctx)
	var convs []conversationRow
	if err := db.Select("id, platform, chat_id, thread_id, user_id, active, created_at").Where("id IN ?", ids).
		Find(&convs).Error; err != nil {
		return nil, err
	}
	var sums []struct {
		ConversationID                   int64
		Turns, Answered, Stopped, Failed int
		First, Last                      int64
	}
	err := db.Table("turns").Select(`conversation_id, COUNT(*) AS turns,
		SUM(CASE WHEN status IN ? THEN 1 ELSE 0 END) AS answered,
		SUM(CASE WHEN status IN ? THEN 1 ELSE 0 END) AS stopped,
		SUM(CASE WHEN status IN ? THEN 1 ELSE 0 END) AS failed,
		MIN(id) AS first, MAX(id) AS last`,
		OutcomeAnswered.statuses(), OutcomeStopped.statuses(), OutcomeFailed.statuses()).
		Where("conversation_id IN ?", ids).Group("conversation_id").Scan(&sums).Error
	if err != nil {
		return nil, err
	}
	var ends []int64
	for _, sm := range sums {
		ends = append(ends, sm.First, sm.Last)
	}
	var turns []turnRow
	if err := db.Select("id, started_at").Where("id IN ?", ends).Find(&turns).Error; err != nil {
		return nil, err
	}
	started := map[int64]time.Time{}
	for _, t := range turns {
		started[t.ID] = t.StartedAt.UTC()
	}
	var openings []messageRow
	if err := db.Select("turn_id, content").Where("turn_id IN ? AND seq = 0", ends).Find(&openings).Error; err != nil {
		return nil, err
	}
	opening := map[int64]string{}
	for _, m := range openings {
		opening[m.TurnID] = m.Content
	}
	people, err := s.people(ctx, ids)
	if err != nil {
		return nil, err
	}
	for _, c := range convs {
		out[c.ID] = ListedConversation{ID: c.ID, Chat: chat.Ref{Platform: chat.Platform(c.Platform), ChatID: c.ChatID,
			ThreadID: c.ThreadID}, UserID: c.UserID, Active: c.Active, CreatedAt: c.CreatedAt.UTC(), People: people[c.ID]}
	}
	for _, sm := range sums {
		c, ok := out[sm.ConversationID]
		if !ok {
			continue
		}
		c.Turns, c.Answered, c.Stopped, c.Failed = sm.Turns, sm.Answered, sm.Stopped, sm.Failed
		c.FirstTurnID, c.LastTurnID, c.LastAt, c.Opening = sm.First, sm.Last, started[sm.Last], opening[sm.First]
		out[sm.ConversationID] = c
	}
	return out, nil
}

// people names who spoke in each of the conversations ids names, in order of their first turn.
func (s *TranscriptQuery) people(ctx context.Context, ids []int64) (map[int64][]string, error) {
	var rows []struct {
		ConversationID   int64
		UserID, UserName string
		First            int64
	}
	err := s.r.WithContext(ctx).Table("turns").Select("conversation_id, user_id, user_name, MIN(id) AS first").
		Where("conversation_id IN ?", ids).Group("conversation_id, user_id, user_name").
		Order("conversation_id, first").Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	out := map[int64][]string{}
	for _, r := range rows {
		name := r.UserName
		if name == "" {
			name = r.UserID
		}
		if name == "" || len(out[r.ConversationID]) >= maxPeople || slices.Contains(out[r.ConversationID], name) {
			continue
		}
		out[r.ConversationID] = append(out[r.ConversationID], name)
	}
	return out, nil
}
