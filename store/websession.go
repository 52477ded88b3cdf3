package store

import (
	"context"
	"errors"
	"fmt"
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
func (s *Store) SaveWebSession(ctx context.Context, secretHash, chatID string) error {
	err := s.w.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).
		Create(&webSessionRow{SecretHash: secretHash, ChatID: chatID}).Error
	if err != nil {
		return fmt.Errorf("store: save web session: %w", err)
	}
	return nil
}

// WebSession returns the chat id of the web chat session whose cookie hashes to secretHash, and
// false when there is none.
func (s *Store) WebSession(ctx context.Context, secretHash string) (string, bool, error) {
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

// ChatConversation is one conversation of a chat, for a list of earlier conversations.
type ChatConversation struct {
	ID        int64
	Active    bool
	CreatedAt time.Time
	// Preview is the start of its first user message; empty when it has none.
	Preview string
	// Turns counts its turns.
	Turns int
}

// previewChars is the length of a ChatConversation's Preview.
const previewChars = 80

// ChatConversations returns the conversations of a chat (every thread and user), newest first,
// at most limit of them (limit <= 0: 100).
func (s *Store) ChatConversations(ctx context.Context, platform, chatID string, limit int) ([]ChatConversation, error) {
	if limit <= 0 {
		limit = 100
	}
	var convs []conversationRow
	err := s.r.WithContext(ctx).Where("platform = ? AND chat_id = ?", platform, chatID).
		Order("id DESC").Limit(limit).Find(&convs).Error
	if err != nil {
		return nil, fmt.Errorf("store: conversations of %s:%s: %w", platform, chatID, err)
	}
	out := make([]ChatConversation, 0, len(convs))
	for _, c := range convs {
		cc := ChatConversation{ID: c.ID, Active: c.Active, CreatedAt: c.CreatedAt.UTC()}
		var n int64
		if err := s.r.WithContext(ctx).Model(&turnRow{}).Where("conversation_id = ?", c.ID).Count(&n).Error; err != nil {
			return nil, fmt.Errorf("store: conversations of %s:%s: %w", platform, chatID, err)
		}
		cc.Turns = int(n)
		var first messageRow
		err := s.r.WithContext(ctx).Where("conversation_id = ? AND role = ?", c.ID, RoleUser).Order("id").Take(&first).Error
		switch {
		case err == nil:
			cc.Preview = first.Content
			if r := []rune(cc.Preview); len(r) > previewChars {
				cc.Preview = string(r[:previewChars]) + "…"
			}
		case !errors.Is(err, gorm.ErrRecordNotFound):
			return nil, fmt.Errorf("store: conversations of %s:%s: %w", platform, chatID, err)
		}
		out = append(out, cc)
	}
	return out, nil
}
