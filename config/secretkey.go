package config

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// SecretKeyEnv is the environment variable holding the key that encrypts secrets the bot keeps
// in its database (the OAuth tokens of MCP servers with auth = "oauth").
const SecretKeyEnv = "BOT_SECRET_KEY"

// secretKeySize is the key's length once decoded: an AES-256 key.
const secretKeySize = 32

// loadSecretKey reads BOT_SECRET_KEY when a server needs it. Its errors never repeat the value.
func (c *Config) loadSecretKey(lookup func(string) (string, bool)) error {
	first := -1
	for i, s := range c.MCP.Servers {
		if s.Auth == "oauth" {
			first = i
			break
		}
	}
	if first < 0 {
		return nil
	}
	raw, ok := lookup(SecretKeyEnv)
	if !ok || strings.TrimSpace(raw) == "" {
		return fmt.Errorf("mcp.servers[%d].auth = \"oauth\" needs the environment variable %s, the key that encrypts the servers' tokens in the database: 32 random bytes as 64 hex digits or base64 (openssl rand -hex 32); keep it, a new key means logging in again", first, SecretKeyEnv)
	}
	key, err := parseSecretKey(raw)
	if err != nil {
		return fmt.Errorf("environment variable %s: %w", SecretKeyEnv, err)
	}
	c.SecretKey = key
	return nil
}

// parseSecretKey decodes 64 hex digits or the base64 of 32 bytes (standard or URL alphabet,
// padded or not), as `openssl rand -hex 32` or `openssl rand -base64 32` print them.
func parseSecretKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) == 2*secretKeySize {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == secretKeySize {
			return b, nil
		}
	}
	return nil, fmt.Errorf("want %d random bytes as 64 hex digits or base64 (openssl rand -hex 32), got %d characters that are neither", secretKeySize, len(s))
}
