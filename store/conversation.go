package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"relaybot/chat"
	"time"

	"gorm.io/gorm"
)

// Conversation is one conversation row. Only one conversation per chat.Key is active at a time.
type Conversation struct {
	ID        int64
	Platform  string
	ChatID    string
	ThreadID  string
	UserID    string
	Active    bool
	CreatedAt time.Time
	// Model is the configured model picked for this conversation (/model); empty: the
	// configured order.
	Model string
	// SystemPrompt replaces the configured system prompt in this conversation (/system); empty:
	// the configured one.
	SystemPrompt string
	// Summary is the model's summary of the rounds up to and including turn SummaryTurnID
	// (compaction); those rounds stay stored whole but are no longer sent to the model.
	Summary       string
	SummaryTurnID int64
}

type conversationRow struct {
	ID            int64 `gorm:"primaryKey"`
	Platform      string
	ChatID        string
	ThreadID      string
	UserID        string
	Active        bool
	CreatedAt     time.Time
	Model         string
	SystemPrompt  string
	Summary       string
	SummaryTurnID int64
}

func (conversationRow) TableName() string { return "conversations" }

func (c conversationRow) public() Conversation {
	return Conversation{ID: c.ID, Platform: c.Platform, ChatID: c.ChatID, ThreadID: c.ThreadID,
		UserID: c.UserID, Active: c.Active, CreatedAt: c.CreatedAt.UTC(), Model: c.Model,
		SystemPrompt: c.SystemPrompt, Summary: c.Summary, SummaryTurnID: c.SummaryTurnID}
}

func validateKey(k chat.Key) error {
	if k.Platform == "" || k.ChatID == "" {
		return fmt.Errorf("store: conversation key needs a platform and a chat id, got %+v", k)
	}
	return nil
}

// Conversation returns the active conversation of key, creating it when there is none.
func (s *ConversationQuery) Conversation(ctx context.Context, key chat.Key) (Conversation, error) {
	if err := validateKey(key); err != nil {
		return Conversation{}, err
	}
	c, err := s.activeConversation(ctx, s.r, key)
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		return Conversation{}, fmt.Errorf("store: conversation %+v: %w", key, err)
	}
	err = s.turns.do(ctx, func(tx *gorm.DB) error {
		var ierr error
		c, ierr = s.activeConversation(ctx, tx, key)
		if ierr == nil {
			return nil
		}
		if !errors.Is(ierr, gorm.ErrRecordNotFound) {
			return ierr
		}
		c, ierr = insertConversation(ctx, tx, key)
		return ierr
	})
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		// Another server created it at the same moment (PostgreSQL): use theirs.
		c, err = s.activeConversation(ctx, s.w, key)
	}
	if err != nil {
		return Conversation{}, fmt.Errorf("store: conversation %+v: %w", key, err)
	}
	return c, nil
}

// ResetConversation starts a new active conversation for key; the old one is kept, inactive. The
// new one keeps the old one's model and system prompt (the chat's choices), not its summary.
func (s *ConversationQuery) ResetConversation(ctx context.Context, key chat.Key) (Conversation, error) {
	if err := validateKey(key); err != nil {
		return Conversation{}, err
	}
	var c Conversation
	err := s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// The chat's choices (/model, /system) carry over; its history and summary do not.
		old, err := s.activeConversation(ctx, tx, key)
		if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
			return err
		}
		if err := tx.Model(&conversationRow{}).
			Where("platform = ? AND chat_id = ? AND thread_id = ? AND user_id = ? AND active = ?",
				key.Platform, key.ChatID, key.ThreadID, key.UserID, true).
			Update("active", false).Error; err != nil {
			return err
		}
		c, err = insertConversation(ctx, tx, key)
		if err != nil || (old.Model == "" && old.SystemPrompt == "") {
			return err
		}
		c.Model, c.SystemPrompt = old.Model, old.SystemPrompt
		return tx.Model(&conversationRow{}).Where("id = ?", c.ID).
			Updates(map[string]any{"model": c.Model, "system_prompt": c.SystemPrompt}).Error
	})
	if err != nil {
		return Conversation{}, fmt.Errorf("store: reset conversation %+v: %w", key, err)
	}
	return c, nil
}

func (s *conn) activeConversation(ctx context.Context, db *gorm.DB, key chat.Key) (Conversation, error) {
	var c conversationRow
	err := c.scan(db.WithContext(ctx).Raw(activeConversationQuery, key.Platform, key.ChatID, key.ThreadID, key.UserID, true).Row())
	if errors.Is(err, sql.ErrNoRows) {
		return Conversation{}, gorm.ErrRecordNotFound
	}
	if err != nil {
		return Conversation{}, err
	}
	return c.public(), nil
}

// scan reads a row of activeConversationQuery.
func (c *conversationRow) scan(row scanner) error {
	return row.Scan(&c.ID, &c.Platform, &c.ChatID, &c.ThreadID, &c.UserID, &c.Active, &c.CreatedAt,
		&c.Model, &c.SystemPrompt, &c.Summary, &c.SummaryTurnID)
}

// activeConversationQuery finds the conversation of every turn: a plain statement for the
// reason Rounds' are, with its columns named (a prepared "SELECT *" breaks on PostgreSQL once
// a migration adds a column, see turnColumns).
const activeConversationQuery = `SELECT id, platform, chat_id, thread_id, user_id, active, created_at, model,
	system_prompt, summary, summary_turn_id FROM conversations
	WHERE platform = ? AND chat_id = ? AND thread_id = ? AND user_id = ? AND active = ? LIMIT 1`

func insertConversation(ctx context.Context, tx *gorm.DB, key chat.Key) (Conversation, error) {
	row := conversationRow{Platform: string(key.Platform), ChatID: key.ChatID, ThreadID: key.ThreadID,
		UserID: key.UserID, Active: true, CreatedAt: now()}
	if err := tx.WithContext(ctx).Create(&row).Error; err != nil {
		return Conversation{}, err
	}
	return row.public(), nil
}
