package store

import (
	"context"
	"errors"
	"fmt"
	"relaybot/chat"
	"slices"
	"time"

	"gorm.io/gorm"
)

// Round is one finished user round (turn) of a conversation: the user's message and everything
// the turn added, paired as History pairs them.
type Round struct {
	TurnID    int64
	StartedAt time.Time
	// UserID is who sent the round's message (a group's rounds are several people's).
	UserID   string
	Messages []chat.Message
}

// MaxRounds bounds the rounds Rounds reads at once.
const MaxRounds = 1000

// Rounds returns the finished rounds of a conversation after turn afterTurnID (0: from the
// start), oldest first: the newest limit of them (limit <= 0 or above MaxRounds: MaxRounds). The
// running turn, retried turns (TurnRetried) and turns the model did not answer (a Failure) are
// left out: a message the provider refused is never sent again, and the next message is never
// joined to one that failed.
func (s *MessageQuery) Rounds(ctx context.Context, conversationID, afterTurnID int64, limit int) ([]Round, error) {
	return s.rounds(ctx, conversationID, afterTurnID, limit, roundTurnsQuery)
}

// rounds is Rounds with the query that picks the turns: roundTurnsQuery (the model's history),
// or shownTurnsQuery (what the user saw, unanswered messages included).
func (s *MessageQuery) rounds(ctx context.Context, conversationID, afterTurnID int64, limit int, turnsQuery string) ([]Round, error) {
	if limit <= 0 || limit > MaxRounds {
		limit = MaxRounds
	}
	out, ids, err := s.roundTurns(ctx, conversationID, afterTurnID, limit, turnsQuery)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	at := make(map[int64]int, len(out))
	for i, r := range out {
		at[r.TurnID] = i
	}
	err = s.roundMessages(ctx, conversationID, ids, func(turnID int64, m chat.Message) {
		i := at[turnID]
		out[i].Messages = append(out[i].Messages, m)
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Messages = pairToolMessages(out[i].Messages)
	}
	return out, nil
}

// Every turn reads its history with these two statements; they are plain, and scanned into
// plain values, because GORM's scanning (a struct per row built by reflection, its slice grown
// by reflection) allocated more than the rows themselves: 50 KB a turn of a 10-round history.
const (
	roundTurnsQuery = `SELECT id, started_at, user_id FROM turns WHERE conversation_id = ? AND id > ?
	AND status NOT IN (?, ?) AND failure = '' ORDER BY id DESC LIMIT ?`
	// shownTurnsQuery is roundTurnsQuery with the turns the model did not answer: the user sent
	// them and saw them fail.
	shownTurnsQuery = `SELECT id, started_at, user_id FROM turns WHERE conversation_id = ? AND id > ?
	AND status NOT IN (?, ?) ORDER BY id DESC LIMIT ?`
	roundMessagesQuery = `SELECT id, turn_id, role, content, name, reasoning, tool_calls, tool_call_id, images,
	extra, reasoning_field FROM messages WHERE turn_id IN ? ORDER BY turn_id, seq`
)

// scan reads a row of roundMessagesQuery.
func (r *messageRow) scan(row scanner) error {
	return row.Scan(&r.ID, &r.TurnID, &r.Role, &r.Content, &r.Name, &r.Reasoning, &r.ToolCalls,
		&r.ToolCallID, &r.Images, &r.Extra, &r.ReasoningField)
}

// roundTurns returns the rounds (without messages) that turnsQuery picks, oldest first, and
// their turn ids.
func (s *conn) roundTurns(ctx context.Context, conversationID, afterTurnID int64, limit int, turnsQuery string) ([]Round, []int64, error) {
	rows, err := s.r.WithContext(ctx).Raw(turnsQuery, conversationID, afterTurnID,
		string(TurnRunning), string(TurnRetried), limit).Rows()
	if err != nil {
		return nil, nil, fmt.Errorf("store: rounds of conversation %d: %w", conversationID, err)
	}
	defer rows.Close()
	var out []Round
	for rows.Next() {
		var r Round
		if err := rows.Scan(&r.TurnID, &r.StartedAt, &r.UserID); err != nil {
			return nil, nil, fmt.Errorf("store: rounds of conversation %d: %w", conversationID, err)
		}
		r.StartedAt = r.StartedAt.UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("store: rounds of conversation %d: %w", conversationID, err)
	}
	slices.Reverse(out)
	ids := make([]int64, len(out))
	for i, r := range out {
		ids[i] = r.TurnID
	}
	return out, ids, nil
}

// roundMessages hands each message of the turns ids to add, in order.
func (s *conn) roundMessages(ctx context.Context, conversationID int64, ids []int64, add func(turnID int64, m chat.Message)) error {
	rows, err := s.r.WithContext(ctx).Raw(roundMessagesQuery, ids).Rows()
	if err != nil {
		return fmt.Errorf("store: rounds of conversation %d: %w", conversationID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var r messageRow
		if err := r.scan(rows); err != nil {
			return fmt.Errorf("store: rounds of conversation %d: %w", conversationID, err)
		}
		m, err := r.public()
		if err != nil {
			return fmt.Errorf("store: rounds of conversation %d: %w", conversationID, err)
		}
		add(r.TurnID, m)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: rounds of conversation %d: %w", conversationID, err)
	}
	return nil
}

// SaveSummary records the summary of a conversation's rounds up to and including turn
// throughTurnID. A summary never moves back: an older one (a compaction that raced a newer one)
// is not saved.
func (s *ConversationQuery) SaveSummary(ctx context.Context, conversationID int64, summary string, throughTurnID int64) error {
	err := s.w.WithContext(ctx).Model(&conversationRow{}).
		Where("id = ? AND summary_turn_id <= ?", conversationID, throughTurnID).
		Updates(map[string]any{"summary": validText(summary), "summary_turn_id": throughTurnID}).Error
	if err != nil {
		return fmt.Errorf("store: summary of conversation %d: %w", conversationID, err)
	}
	return nil
}

// SetConversationModel records the model picked for a conversation ("" for the configured order).
func (s *ConversationQuery) SetConversationModel(ctx context.Context, conversationID int64, model string) error {
	return s.setConversation(ctx, conversationID, "model", validText(model))
}

// SetConversationSystemPrompt records the system prompt of a conversation ("" for the configured
// one).
func (s *ConversationQuery) SetConversationSystemPrompt(ctx context.Context, conversationID int64, prompt string) error {
	return s.setConversation(ctx, conversationID, "system_prompt", validText(prompt))
}

func (s *conn) setConversation(ctx context.Context, conversationID int64, column string, value any) error {
	res := s.w.WithContext(ctx).Model(&conversationRow{}).Where("id = ?", conversationID).Update(column, value)
	if res.Error != nil {
		return fmt.Errorf("store: set %s of conversation %d: %w", column, conversationID, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("store: set %s of conversation %d: %w", column, conversationID, gorm.ErrRecordNotFound)
	}
	return nil
}

// ErrNothingToRetry is returned by RetryLastTurn when the conversation has no finished turn with
// a user message.
var ErrNothingToRetry = errors.New("store: no earlier message to answer again")

// Retried is the turn RetryLastTurn took out of history: its user message and who sent it.
type Retried struct {
	Message  chat.Message
	UserID   string
	UserName string
}

// RetryLastTurn takes the newest finished turn of a conversation out of its history (its status
// becomes TurnRetried; its rows stay for the audit trail) and returns its user message, to be
// answered again. With userID set it is the newest turn that user started (their last message,
// whoever spoke after it); empty, the newest turn of anyone.
func (s *TurnQuery) RetryLastTurn(ctx context.Context, conversationID int64, userID string) (Retried, error) {
	var out Retried
	err := s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var t turnRow
		q := tx.Where("conversation_id = ? AND status NOT IN ?", conversationID, []string{string(TurnRunning), string(TurnRetried)})
		if userID != "" {
			q = q.Where("user_id = ?", userID)
		}
		err := q.Order("id DESC").Take(&t).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return ErrNothingToRetry
		}
		if err != nil {
			return err
		}
		var row messageRow
		err = tx.Where("turn_id = ? AND role = ?", t.ID, RoleUser).Order("seq").Take(&row).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return ErrNothingToRetry
		}
		if err != nil {
			return err
		}
		if out.Message, err = row.public(); err != nil {
			return err
		}
		out.UserID, out.UserName = t.UserID, t.UserName
		return tx.Model(&turnRow{}).Where("id = ?", t.ID).Update("status", TurnRetried).Error
	})
	if err != nil {
		return Retried{}, fmt.Errorf("store: retry the last turn of conversation %d: %w", conversationID, err)
	}
	return out, nil
}

// SupersedeTurn takes a turn that a crash or a dead replica cut (interrupted, or still running
// on a replica that is gone) out of the conversation's history, because its message is about to
// be answered again by a new turn: its status becomes TurnRetried and its rows stay for the
// audit trail. It reports whether the turn was changed; a turn that ended otherwise is left as
// it is.
func (s *TurnQuery) SupersedeTurn(ctx context.Context, turnID int64) (bool, error) {
	res := s.w.WithContext(ctx).Model(&turnRow{}).
		Where("id = ? AND status IN ?", turnID, []string{string(TurnInterrupted), string(TurnRunning)}).
		Update("status", TurnRetried)
	if res.Error != nil {
		return false, fmt.Errorf("store: supersede turn %d: %w", turnID, res.Error)
	}
	return res.RowsAffected == 1, nil
}
