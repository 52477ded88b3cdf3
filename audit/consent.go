package audit

import (
	"context"
	"errors"
	"time"
)

// Consent is a remembered "always allow" answer to an approval question: calls to Tool on
// Server that the policy rule Rule asks about, in one chat, run without asking again until
// ExpiresAt. UserID is whose calls it covers (the person the giver answered for); empty, it
// covers everyone in the chat, which only an approver who may answer for others can give.
type Consent struct {
	ID       int64
	Platform string
	ChatID   string
	// UserID is the one person the consent covers; empty: everyone in the chat.
	UserID string
	Tool   string
	Server string
	// Rule is the label of the policy rule that asked (tools.Decision.Rule): a consent holds for
	// that rule only, so a changed policy asks again.
	Rule string
	// GivenBy and GivenByID name who gave it (display name, platform id).
	GivenBy   string
	GivenByID string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// ForEveryone reports whether c covers every member of its chat.
func (c Consent) ForEveryone() bool { return c.UserID == "" }

// ConsentFilter selects consents to list: empty fields match everything. Expired consents are
// never listed.
type ConsentFilter struct {
	Platform string
	ChatID   string
	// Now is the time against which ExpiresAt is judged; zero means time.Now().
	Now time.Time
}

// ErrConsentNotFound is returned when a consent to revoke does not exist (or has expired).
var ErrConsentNotFound = errors.New("consent not found")

// Consents keeps "always allow" answers where every replica sees them (the store).
type Consents interface {
	// SaveConsent keeps c (replacing a live consent of the same chat, person, tool, server and
	// rule) and returns its id.
	SaveConsent(ctx context.Context, c Consent) (int64, error)
	// FindConsent returns the live consent that covers a call by userID in the chat to tool on
	// server under rule (one for that person, else one for everyone), and false when none does.
	FindConsent(ctx context.Context, platform, chatID, userID, tool, server, rule string, now time.Time) (Consent, bool, error)
	// ListConsents returns the live consents f selects, newest first.
	ListConsents(ctx context.Context, f ConsentFilter) ([]Consent, error)
	// RevokeConsent deletes consent id; ErrConsentNotFound when there is none.
	RevokeConsent(ctx context.Context, id int64) error
}
