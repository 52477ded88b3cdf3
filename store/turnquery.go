package store

import (
	"context"
	"fmt"
	"relaybot/chat"
)

// TurnMessages returns every stored message of one turn in the order the turn produced them: the
// user's message, assistant messages with their tool calls, tool results, the final answer.
// Unlike History it keeps a tool call whose result never came (a turn cut short), since the audit
// log shows what happened, not what a model may be sent. A running turn has only its user message
// so far. It returns ErrNotFound (wrapped) when the turn does not exist.
func (s *MessageQuery) TurnMessages(ctx context.Context, turnID int64) ([]chat.Message, error) {
	var rows []messageRow
	if err := s.r.WithContext(ctx).Where("turn_id = ?", turnID).Order("seq").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: messages of turn %d: %w", turnID, err)
	}
	if len(rows) == 0 {
		var n int64
		if err := s.r.WithContext(ctx).Model(&turnRow{}).Where("id = ?", turnID).Count(&n).Error; err != nil {
			return nil, fmt.Errorf("store: messages of turn %d: %w", turnID, err)
		}
		if n == 0 {
			return nil, fmt.Errorf("store: messages of turn %d: %w", turnID, ErrNotFound)
		}
		return []chat.Message{}, nil
	}
	out := make([]chat.Message, 0, len(rows))
	for _, r := range rows {
		m, err := r.public()
		if err != nil {
			return nil, fmt.Errorf("store: messages of turn %d: %w", turnID, err)
		}
		out = append(out, m)
	}
	return out, nil
}
