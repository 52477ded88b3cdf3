package toolstest

import (
	"context"
	"slices"
	"sync"
	"time"

	"relaybot/audit"
)

// Consents is an audit.Consents in memory, for tests of the tool manager without a database. It
// is safe for concurrent use. The zero value is ready to use.
type Consents struct {
	mu   sync.Mutex
	next int64
	list []audit.Consent
}

var _ audit.Consents = (*Consents)(nil)

// SaveConsent implements audit.Consents.
func (c *Consents) SaveConsent(_ context.Context, x audit.Consent) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = slices.DeleteFunc(c.list, func(y audit.Consent) bool {
		return y.Platform == x.Platform && y.ChatID == x.ChatID && y.UserID == x.UserID && y.Tool == x.Tool &&
			y.Server == x.Server && y.Rule == x.Rule
	})
	c.next++
	x.ID = c.next
	c.list = append(c.list, x)
	return x.ID, nil
}

// FindConsent implements audit.Consents.
func (c *Consents) FindConsent(_ context.Context, platform, chatID, userID, tool, server, rule string, now time.Time) (audit.Consent, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var found *audit.Consent
	for i := range c.list {
		x := &c.list[i]
		if x.Platform != platform || x.ChatID != chatID || x.Tool != tool || x.Server != server || x.Rule != rule ||
			!x.ExpiresAt.After(now) || x.UserID != "" && x.UserID != userID {
			continue
		}
		if found == nil || x.UserID != "" {
			found = x
		}
	}
	if found == nil {
		return audit.Consent{}, false, nil
	}
	return *found, true, nil
}

// ListConsents implements audit.Consents.
func (c *Consents) ListConsents(_ context.Context, f audit.ConsentFilter) ([]audit.Consent, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := f.Now
	if now.IsZero() {
		now = time.Now()
	}
	var out []audit.Consent
	for i := len(c.list) - 1; i >= 0; i-- {
		x := c.list[i]
		if x.ExpiresAt.After(now) && (f.Platform == "" || x.Platform == f.Platform) && (f.ChatID == "" || x.ChatID == f.ChatID) {
			out = append(out, x)
		}
	}
	return out, nil
}

// RevokeConsent implements audit.Consents.
func (c *Consents) RevokeConsent(_ context.Context, id int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.list)
	c.list = slices.DeleteFunc(c.list, func(x audit.Consent) bool { return x.ID == id })
	if len(c.list) == n {
		return audit.ErrConsentNotFound
	}
	return nil
}
