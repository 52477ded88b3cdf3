package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// The OAuth logins of remote MCP servers (migration 00015). The store keeps them as opaque
// sealed text: sealing and what is inside belong to the OAuth client (tools/mcp/oauth), so the
// database never sees a token in clear and the store never needs the key.

// OAuthToken returns the sealed login record of an MCP server and its version; version 0 (and
// "") when the server has none.
func (s *OAuthQuery) OAuthToken(ctx context.Context, server string) (sealed string, version int64, err error) {
	var row struct {
		Version int64
		Sealed  string
	}
	err = s.w.WithContext(ctx).Raw(`SELECT version, sealed FROM mcp_oauth_tokens WHERE server = ?`, server).Take(&row).Error
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
		res = db.Exec(`INSERT INTO mcp_oauth_tokens (server, version, sealed, updated_ms) VALUES (?, 1, ?, ?)
			ON CONFLICT (server) DO NOTHING`, server, sealed, now.UnixMilli())
	} else {
		res = db.Exec(`UPDATE mcp_oauth_tokens SET version = version + 1, sealed = ?, updated_ms = ?
			WHERE server = ? AND version = ?`, sealed, now.UnixMilli(), server, version)
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
		if err := tx.Exec(`DELETE FROM mcp_oauth_states WHERE expires_ms <= ?`, now.UnixMilli()).Error; err != nil {
			return err
		}
		return tx.Exec(`INSERT INTO mcp_oauth_states (state_hash, server, sealed, expires_ms) VALUES (?, ?, ?, ?)`,
			stateHash, server, sealed, expires.UnixMilli()).Error
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
	var row struct {
		Server    string
		Sealed    string
		ExpiresMs int64
	}
	err = s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		err := tx.Raw(`SELECT server, sealed, expires_ms FROM mcp_oauth_states WHERE state_hash = ?`, stateHash).Take(&row).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		res := tx.Exec(`DELETE FROM mcp_oauth_states WHERE state_hash = ?`, stateHash)
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
