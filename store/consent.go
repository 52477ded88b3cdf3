package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"relaybot/audit"
)

// consentRow is a tool_consents row: the consent itself, under the table's name.
type consentRow audit.Consent

func (consentRow) TableName() string { return "tool_consents" }

const consentColumns = "id, platform, chat_id, user_id, tool, server, rule, given_by, given_by_id, created_at, expires_at"

func (r consentRow) public() audit.Consent {
	c := audit.Consent(r)
	c.CreatedAt, c.ExpiresAt = c.CreatedAt.UTC(), c.ExpiresAt.UTC()
	return c
}

var _ audit.Consents = (*ConsentQuery)(nil)

// SaveConsent implements audit.Consents: a consent replaces the one of the same chat, person,
// tool, server and rule, so a renewed "always" starts a new term instead of adding a row.
func (s *ConsentQuery) SaveConsent(ctx context.Context, c audit.Consent) (int64, error) {
	if c.CreatedAt.IsZero() {
		c.CreatedAt = time.Now()
	}
	row := consentRow(c)
	row.ID, row.CreatedAt, row.ExpiresAt = 0, dbTime(c.CreatedAt), dbTime(c.ExpiresAt)
	err := s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		err := tx.Where("platform = ? AND chat_id = ? AND user_id = ? AND tool = ? AND server = ? AND rule = ?",
			row.Platform, row.ChatID, row.UserID, row.Tool, row.Server, row.Rule).Delete(&consentRow{}).Error
		if err != nil {
			return err
		}
		return tx.Create(&row).Error
	})
	if err != nil {
		return 0, fmt.Errorf("store: save consent for %s in %s:%s: %w", c.Tool, c.Platform, c.ChatID, err)
	}
	return row.ID, nil
}

// FindConsent implements audit.Consents; a consent for the person wins over one for everyone.
func (s *ConsentQuery) FindConsent(ctx context.Context, platform, chatID, userID, tool, server, rule string, now time.Time) (audit.Consent, bool, error) {
	var row consentRow
	err := s.r.WithContext(ctx).Select(consentColumns).
		Where("platform = ? AND chat_id = ? AND tool = ? AND server = ? AND rule = ? AND expires_at > ? AND (user_id = ? OR user_id = '')",
			platform, chatID, tool, server, rule, dbTime(now), userID).
		Order("user_id DESC, id DESC").Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return audit.Consent{}, false, nil
	}
	if err != nil {
		return audit.Consent{}, false, fmt.Errorf("store: find consent for %s in %s:%s: %w", tool, platform, chatID, err)
	}
	return row.public(), true, nil
}

// ListConsents implements audit.Consents.
func (s *ConsentQuery) ListConsents(ctx context.Context, f audit.ConsentFilter) ([]audit.Consent, error) {
	now := f.Now
	if now.IsZero() {
		now = time.Now()
	}
	q := s.r.WithContext(ctx).Select(consentColumns).Where("expires_at > ?", dbTime(now))
	if f.Platform != "" {
		q = q.Where("platform = ?", f.Platform)
	}
	if f.ChatID != "" {
		q = q.Where("chat_id = ?", f.ChatID)
	}
	var rows []consentRow
	if err := q.Order("id DESC").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: list consents: %w", err)
	}
	out := make([]audit.Consent, len(rows))
	for i, r := range rows {
		out[i] = r.public()
	}
	return out, nil
}

// RevokeConsent implements audit.Consents.
func (s *ConsentQuery) RevokeConsent(ctx context.Context, id int64) error {
	res := s.w.WithContext(ctx).Where("id = ?", id).Delete(&consentRow{})
	if res.Error != nil {
		return fmt.Errorf("store: revoke consent %d: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("store: revoke consent %d: %w", id, audit.ErrConsentNotFound)
	}
	return nil
}
