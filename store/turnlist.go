package store

import (
	"context"
	"fmt"

	"relaybot/chat"
)

// Limits of one page of LatestTurns.
const (
	DefaultTurnPage = 50
	MaxTurnPage     = 500
)

// ListedTurn is a turn with the chat (and thread) its conversation is in, as a list of turns
// across chats shows it.
type ListedTurn struct {
	Turn
	Chat chat.Ref
}

// LatestTurns returns the turns matching f, newest first, each with its chat: at most limit
// (DefaultTurnPage when not positive, MaxTurnPage at most), only those older than the turn
// before when before > 0 (the next page starts after the last turn of this one).
func (s *TurnQuery) LatestTurns(ctx context.Context, f TurnFilter, before int64, limit int) ([]ListedTurn, error) {
	if err := f.validate(); err != nil {
		return nil, fmt.Errorf("store: latest turns: %w", err)
	}
	if limit <= 0 {
		limit = DefaultTurnPage
	}
	limit = min(limit, MaxTurnPage)
	q := f.where(s.r.WithContext(ctx).Model(&turnRow{})).Select(tracedTurnColumns)
	if before > 0 {
		q = q.Where("id < ?", before)
	}
	var rows []turnRow
	if err := q.Order("id DESC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: latest turns: %w", err)
	}
	ids := make([]int64, 0, len(rows))
	for _, r := range rows {
		ids = append(ids, r.ConversationID)
	}
	chats, err := s.ConversationChats(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("store: latest turns: %w", err)
	}
	out := make([]ListedTurn, len(rows))
	for i, r := range rows {
		out[i] = ListedTurn{Turn: r.public(), Chat: chats[r.ConversationID]}
	}
	return out, nil
}

// ConversationChats returns the chat (and thread) of each of the conversations ids names that
// exists, by conversation id.
func (s *TurnQuery) ConversationChats(ctx context.Context, ids []int64) (map[int64]chat.Ref, error) {
	chats := map[int64]chat.Ref{}
	if len(ids) == 0 {
		return chats, nil
	}
	var convs []conversationRow
	if err := s.r.WithContext(ctx).Select("id, platform, chat_id, thread_id").Where("id IN ?", ids).Find(&convs).Error; err != nil {
		return nil, fmt.Errorf("chats of conversations: %w", err)
	}
	for _, c := range convs {
		chats[c.ID] = chat.Ref{Platform: chat.Platform(c.Platform), ChatID: c.ChatID, ThreadID: c.ThreadID}
	}
	return chats, nil
}
