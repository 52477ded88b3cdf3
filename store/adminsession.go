package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// AdminSession is one admin login as the admin_sessions table keeps it: the CSRF token its forms
// carry and when it ends. The table is keyed by the SHA-256 of the session cookie, never the
// cookie, so reading the database does not log anyone in.
type AdminSession struct {
	CSRF      string
	ExpiresAt time.Time
}

type adminSessionRow struct {
	IDHash    string `gorm:"primaryKey"`
	CSRF      string `gorm:"column:csrf"`
	CreatedAt time.Time
	ExpiresAt time.Time
}

func (adminSessionRow) TableName() string { return "admin_sessions" }

// StartAdminSession stores a login whose cookie hashes to idHash. In the same transaction it
// deletes the sessions expired at now and, when keep or more would remain, those closest to
// expiry, so that at most keep sessions exist (keep <= 0: no cap). Replicas logging in at the same
// moment may together pass the cap by a few until the next login.
func (s *AdminSessionQuery) StartAdminSession(ctx context.Context, idHash string, ss AdminSession, now time.Time, keep int) error {
	now = dbTime(now)
	row := adminSessionRow{IDHash: idHash, CSRF: ss.CSRF, CreatedAt: now, ExpiresAt: dbTime(ss.ExpiresAt)}
	err := s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("expires_at <= ?", now).Delete(&adminSessionRow{}).Error; err != nil {
			return err
		}
		if keep > 0 {
			newest := tx.Model(&adminSessionRow{}).Select("id_hash").Order("expires_at DESC, id_hash").Limit(keep - 1)
			if err := tx.Where("id_hash NOT IN (?)", newest).Delete(&adminSessionRow{}).Error; err != nil {
				return err
			}
		}
		return tx.Create(&row).Error
	})
	if err != nil {
		return fmt.Errorf("store: start admin session: %w", err)
	}
	return nil
}

// AdminSession returns the login whose cookie hashes to idHash, and false when there is none or
// it had expired at now.
func (s *AdminSessionQuery) AdminSession(ctx context.Context, idHash string, now time.Time) (AdminSession, bool, error) {
	var row adminSessionRow
	err := s.r.WithContext(ctx).Where("id_hash = ? AND expires_at > ?", idHash, dbTime(now)).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return AdminSession{}, false, nil
	}
	if err != nil {
		return AdminSession{}, false, fmt.Errorf("store: admin session: %w", err)
	}
	return AdminSession{CSRF: row.CSRF, ExpiresAt: row.ExpiresAt.UTC()}, true, nil
}

// EndAdminSession deletes the login whose cookie hashes to idHash (a logout): from then on no
// replica accepts its cookie. Ending an unknown session is not an error.
func (s *AdminSessionQuery) EndAdminSession(ctx context.Context, idHash string) error {
	if err := s.w.WithContext(ctx).Where("id_hash = ?", idHash).Delete(&adminSessionRow{}).Error; err != nil {
		return fmt.Errorf("store: end admin session: %w", err)
	}
	return nil
}
