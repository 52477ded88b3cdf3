package oauth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// KeySize is the length of the key (BOT_SECRET_KEY once decoded): an AES-256 key.
const KeySize = 32

// sealer encrypts records with AES-256-GCM; each sealing has a fresh random nonce, and the
// server's name is authenticated with it, so one server's record cannot be swapped for another's.
type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (*sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("oauth: the key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("oauth: key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("oauth: key: %w", err)
	}
	return &sealer{aead: aead}, nil
}

// errUnseal is what a record sealed under another key (or tampered with) gives.
var errUnseal = errors.New("a stored OAuth record cannot be decrypted: was BOT_SECRET_KEY changed? Connect the server again")

func (s *sealer) seal(label string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("oauth: encode record: %w", err)
	}
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	out := s.aead.Seal(nonce, nonce, plain, []byte(label))
	return base64.StdEncoding.EncodeToString(out), nil
}

func (s *sealer) open(label, sealed string, v any) error {
	raw, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return errUnseal
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(label))
	if err != nil {
		return errUnseal
	}
	if err := json.Unmarshal(plain, v); err != nil {
		return fmt.Errorf("oauth: decode record: %w", err)
	}
	return nil
}

// client is how the bot authenticates at an authorization server's token endpoint.
type client struct {
	TokenEndpoint string `json:"token_endpoint"`
	ID            string `json:"client_id"`
	Secret        string `json:"client_secret,omitempty"`
	// AuthMethod is "client_secret_basic", "client_secret_post" or "none".
	AuthMethod string `json:"auth_method"`
	// Resource is the RFC 8707 resource indicator sent with every token request.
	Resource string `json:"resource"`
}

// record is a server's login, as sealed in mcp_oauth_tokens.
type record struct {
	Client  client    `json:"client"`
	Access  string    `json:"access_token"`
	Type    string    `json:"token_type,omitempty"`
	Refresh string    `json:"refresh_token,omitempty"`
	Expires time.Time `json:"expires,omitzero"`
	Scope   string    `json:"scope,omitempty"`
	// NeedsLogin says why the token can no longer be used or refreshed; "" while it can.
	NeedsLogin string `json:"needs_login,omitempty"`
	// ClaimedUntil is set while a replica refreshes the token.
	ClaimedUntil time.Time `json:"claimed_until,omitzero"`
}

// pending is a login under way, as sealed in mcp_oauth_states.
type pending struct {
	Client      client `json:"client"`
	Verifier    string `json:"verifier"`
	RedirectURI string `json:"redirect_uri"`
	// Issuer is the authorization server the admin was sent to; IssuerAnswers says its
	// metadata promises the iss parameter in its answer (RFC 9207).
	Issuer        string `json:"issuer"`
	IssuerAnswers bool   `json:"issuer_answers,omitempty"`
}
