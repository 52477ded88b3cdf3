package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The OAuth logins of remote MCP servers (migration 00015). The store keeps them as opaque
// sealed text: sealing and what is inside belong to the OAuth client (tools/mcp/oauth), so the
// database never sees a token in clear and the store never needs the key.

// oauthTokenRow is a row of mcp_oauth_tokens: a server's sealed login record and its version.
type oauthTokenRow struct {
	Server    string `gorm:"primaryKey"`
	Version   int64
	Sealed    string
	UpdatedMs int64 `gorm:"column:updated_ms"`
}

func (oauthTokenRow) TableName() string { return "mcp_oauth_tokens" }

// oauthStateRow is a row of mcp_oauth_states: a login under way.
type oauthStateRow struct {
	StateHash string `gorm:"primaryKey"`
	Server    string
	Sealed    string
	ExpiresMs int64 `gorm:"column:expires_ms"`
}

func (oauthStateRow) TableName() string { return "mcp_oauth_states" }

// OAuthToken returns the sealed login record of an MCP server and its version; version 0 (and
// "") when the server has none.
func (s *OAuthQuery) OAuthToken(ctx context.Context, server string) (sealed string, version int64, err error) {
	var row oauthTokenRow
	err = s.w.WithContext(ctx).Where("server = ?", server).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("store: OAuth token of %q: %w", server, err)
	}
	return row.Sealed, row.Version, nil
}

// SwapOAuthToken replaces the login record of server with sealed if its version is still
// version (0: the server has no record yet), making it version+1, and reports whether it did.
// false means another replica wrote first: read the record again.
func (s *OAuthQuery) SwapOAuthToken(ctx context.Context, server string, version int64, sealed string, now time.Time) (bool, error) {
	db := s.w.WithContext(ctx)
	var res *gorm.DB
	if version == 0 {
		res = db.Clauses(clause.OnConflict{DoNothing: true}).
			Create(&oauthTokenRow{Server: server, Version: 1, Sealed: sealed, UpdatedMs: now.UnixMilli()})
	} else {
		res = db.Model(&oauthTokenRow{}).Where("server = ? AND version = ?", server, version).
			Updates(map[string]any{"version": gorm.Expr("version + 1"), "sealed": sealed, "updated_ms": now.UnixMilli()})
	}
	if res.Error != nil {
		return false, fmt.Errorf("store: save OAuth token of %q: %w", server, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// PutOAuthState keeps a login under way until expires: the SHA-256 of its state parameter, the
// server it is for and its sealed secrets. Logins that had expired at now are deleted.
func (s *OAuthQuery) PutOAuthState(ctx context.Context, stateHash, server, sealed string, expires, now time.Time) error {
	err := s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("expires_ms <= ?", now.UnixMilli()).Delete(&oauthStateRow{}).Error; err != nil {
			return err
		}
		return tx.Create(&oauthStateRow{StateHash: stateHash, Server: server, Sealed: sealed, ExpiresMs: expires.UnixMilli()}).Error
	})
	if err != nil {
		return fmt.Errorf("store: save OAuth login of %q: %w", server, err)
	}
	return nil
}

// TakeOAuthState deletes the login under way whose state hashes to stateHash and returns it;
// ok is false when there is none or it had expired at now. Of two callbacks with one state (a
// replay), only one gets it.
func (s *OAuthQuery) TakeOAuthState(ctx context.Context, stateHash string, now time.Time) (server, sealed string, ok bool, err error) {
	var row oauthStateRow
	err = s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		err := tx.Where("state_hash = ?", stateHash).Take(&row).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		res := tx.Where("state_hash = ?", stateHash).Delete(&oauthStateRow{})
		if res.Error != nil {
			return res.Error
		}
		ok = res.RowsAffected == 1 && row.ExpiresMs > now.UnixMilli()
		return nil
	})
	if err != nil {
		return "", "", false, fmt.Errorf("store: take OAuth login: %w", err)
	}
	if !ok {
		return "", "", false, nil
	}
	return row.Server, row.Sealed, true, nil
}
