package store

import (
	"context"
	"errors"
	"fmt"
	"relaybot/chat"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

type webSessionRow struct {
	SecretHash string `gorm:"primaryKey"`
	ChatID     string
}

func (webSessionRow) TableName() string { return "web_sessions" }

// SaveWebSession records that the web chat session whose cookie hashes to secretHash keeps its
// conversations under chatID. Saving a known session again changes nothing.
func (s *WebChatQuery) SaveWebSession(ctx context.Context, secretHash, chatID string) error {
	err := s.w.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).
		Create(&webSessionRow{SecretHash: secretHash, ChatID: chatID}).Error
	if err != nil {
		return fmt.Errorf("store: save web session: %w", err)
	}
	return nil
}

// WebSession returns the chat id of the web chat session whose cookie hashes to secretHash, and
// false when there is none.
func (s *WebChatQuery) WebSession(ctx context.Context, secretHash string) (string, bool, error) {
	var row webSessionRow
	err := s.r.WithContext(ctx).Where("secret_hash = ?", secretHash).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("store: web session: %w", err)
	}
	return row.ChatID, true, nil
}

// previewChars is the length of a chat.Summary's Preview.
const previewChars = 80

// ChatConversations returns the conversations of the chat of ref (every thread and user), newest
// first, at most limit of them (limit <= 0: 100).
func (s *WebChatQuery) ChatConversations(ctx context.Context, ref chat.Ref, limit int) ([]chat.Summary, error) {
	if limit <= 0 {
		limit = 100
	}
	// One query: a list of earlier conversations must not cost two queries per conversation.
	// Plain SQL: GORM has no way to say the two correlated subqueries in the select list.
	var rows []struct {
		ID        int64
		Active    bool
		CreatedAt time.Time
		Turns     int
		Preview   string
	}
	err := s.r.WithContext(ctx).Raw(`SELECT c.id, c.active, c.created_at,
		(SELECT COUNT(*) FROM turns t WHERE t.conversation_id = c.id) AS turns,
		COALESCE((SELECT m.content FROM messages m WHERE m.conversation_id = c.id AND m.role = ?
			ORDER BY m.id LIMIT 1), '') AS preview
		FROM conversations c WHERE c.platform = ? AND c.chat_id = ? ORDER BY c.id DESC LIMIT ?`,
		RoleUser, string(ref.Platform), ref.ChatID, limit).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: conversations of %s: %w", ref.Chat(), err)
	}
	out := make([]chat.Summary, 0, len(rows))
	for _, r := range rows {
		cc := chat.Summary{ID: r.ID, Active: r.Active, CreatedAt: r.CreatedAt.UTC(), Turns: r.Turns, Preview: r.Preview}
		if p := []rune(cc.Preview); len(p) > previewChars {
			cc.Preview = string(p[:previewChars]) + "…"
		}
		out = append(out, cc)
	}
	return out, nil
}

// Transcript returns what the user of a conversation saw of its newest limit rounds, oldest
// first: their messages and the answers shown (assistant text without tool calls). A message the
// model did not answer is there: it left the model's history, not the user's screen.
func (s *WebChatQuery) Transcript(ctx context.Context, conversationID int64, limit int) ([]chat.Line, error) {
	rounds, err := (&MessageQuery{s.conn}).rounds(ctx, conversationID, 0, limit, shownTurnsQuery)
	if err != nil {
		return nil, err
	}
	var out []chat.Line
	for _, r := range rounds {
		for _, m := range r.Messages {
			switch {
			case m.Role == RoleUser:
				out = append(out, chat.Line{FromUser: true, Text: m.Content})
			case m.Role == RoleAssistant && len(m.ToolCalls) == 0 && strings.TrimSpace(m.Content) != "":
				out = append(out, chat.Line{Text: m.Content})
			}
		}
	}
	return out, nil
}
