package store

import (
	"context"
	"fmt"
	"relaybot/chat"
)

// History returns the messages of the last rounds finished user rounds (turns) of a conversation,
// oldest first; rounds <= 0 returns none. The running turn, retried turns and turns the model
// did not answer (a Failure) are not included, as in Rounds. Whole rounds only:
// an assistant tool call whose result is missing is dropped, and so is a tool result whose call is
// missing, so the history handed to a model never holds one without the other.
func (s *MessageQuery) History(ctx context.Context, conversationID int64, rounds int) ([]chat.Message, error) {
	if rounds <= 0 {
		return nil, nil
	}
	last := s.r.Model(&turnRow{}).Select("id").
		Where("conversation_id = ? AND status NOT IN ? AND failure = ''", conversationID, []string{string(TurnRunning), string(TurnRetried)}).
		Order("id DESC").Limit(rounds)
	var rows []messageRow
	err := s.r.WithContext(ctx).Where("turn_id IN (?)", last).Order("turn_id, seq").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: history of conversation %d: %w", conversationID, err)
	}
	out := make([]chat.Message, 0, len(rows))
	for start := 0; start < len(rows); {
		end := start
		for end < len(rows) && rows[end].TurnID == rows[start].TurnID {
			end++
		}
		turn := make([]chat.Message, 0, end-start)
		for _, r := range rows[start:end] {
			m, err := r.public()
			if err != nil {
				return nil, fmt.Errorf("store: history of conversation %d: %w", conversationID, err)
			}
			turn = append(turn, m)
		}
		out = append(out, pairToolMessages(turn)...)
		start = end
	}
	return out, nil
}

// pairToolMessages drops, within one turn, assistant tool calls that have no tool result after
// them and tool results that answer no earlier call. An assistant message left with neither text
// nor calls is dropped too.
func pairToolMessages(msgs []chat.Message) []chat.Message {
	answered := map[string]bool{}
	called := map[string]bool{}
	for _, m := range msgs {
		switch {
		case m.Role == RoleAssistant:
			for _, c := range m.ToolCalls {
				called[c.ID] = true
			}
		case m.Role == RoleTool && called[m.ToolCallID]:
			answered[m.ToolCallID] = true
		}
	}
	out := msgs[:0:0]
	kept := map[string]bool{}
	for _, m := range msgs {
		switch m.Role {
		case RoleAssistant:
			if len(m.ToolCalls) > 0 {
				calls := make([]chat.ToolCall, 0, len(m.ToolCalls))
				for _, c := range m.ToolCalls {
					if answered[c.ID] && !kept[c.ID] {
						kept[c.ID] = true
						calls = append(calls, c)
					}
				}
				m.ToolCalls = calls
				if len(calls) == 0 && m.Content == "" {
					continue
				}
			}
		case RoleTool:
			if !kept[m.ToolCallID] || !answered[m.ToolCallID] {
				continue
			}
			// A second result for the same call is dropped.
			answered[m.ToolCallID] = false
		}
		out = append(out, m)
	}
	return out
}
