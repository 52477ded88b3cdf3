package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"relaybot/audit"
)

// Consents on both dialects: one for the person wins over one for everyone, another person or
// rule or server finds none, an expired one is neither found nor listed, a renewed one replaces
// the old, and a revoked one is gone.
func TestConsentsAreFoundForWhomTheyCover(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		save := func(c audit.Consent) int64 {
			t.Helper()
			c.Platform, c.ChatID, c.Tool, c.Server, c.Rule = "discord", "5", "send_mail", "mail", "tools.policy[0]"
			c.CreatedAt = now
			if c.ExpiresAt.IsZero() {
				c.ExpiresAt = now.Add(time.Hour)
			}
			id, err := s.Consents.SaveConsent(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		everyone := save(audit.Consent{GivenBy: "Chief", GivenByID: "9"})
		ann := save(audit.Consent{UserID: "600", GivenBy: "Ann", GivenByID: "600"})
		save(audit.Consent{UserID: "601", GivenBy: "Bob", GivenByID: "601", ExpiresAt: now.Add(-time.Minute)})
		find := func(user, server, rule string) (audit.Consent, bool) {
			t.Helper()
			c, ok, err := s.Consents.FindConsent(ctx, "discord", "5", user, "send_mail", server, rule, now)
			if err != nil {
				t.Fatal(err)
			}
			return c, ok
		}
		if c, ok := find("600", "mail", "tools.policy[0]"); !ok || c.ID != ann || c.GivenByID != "600" {
			t.Fatalf("Ann's call found %+v, %v; want her own consent", c, ok)
		}
		if c, ok := find("601", "mail", "tools.policy[0]"); !ok || c.ID != everyone {
			t.Fatalf("Bob's call (his own consent expired) found %+v, %v; want the one for everyone", c, ok)
		}
		if _, ok := find("600", "other", "tools.policy[0]"); ok {
			t.Fatal("a consent for one server covered another")
		}
		if _, ok := find("600", "mail", "tools.policy[1]"); ok {
			t.Fatal("a consent for one rule covered another")
		}
		renewed := save(audit.Consent{UserID: "600", GivenBy: "Ann", GivenByID: "600", ExpiresAt: now.Add(2 * time.Hour)})
		list, err := s.Consents.ListConsents(ctx, audit.ConsentFilter{Platform: "discord", ChatID: "5", Now: now})
		if err != nil || len(list) != 2 || list[0].ID != renewed || !list[0].ExpiresAt.Equal(now.Add(2*time.Hour)) || list[1].ID != everyone {
			t.Fatalf("list = %+v, %v; want the renewed consent and the one for everyone", list, err)
		}
		if err := s.Consents.RevokeConsent(ctx, everyone); err != nil {
			t.Fatal(err)
		}
		if err := s.Consents.RevokeConsent(ctx, everyone); !errors.Is(err, audit.ErrConsentNotFound) {
			t.Fatalf("revoke twice: %v, want ErrConsentNotFound", err)
		}
		if _, ok := find("601", "mail", "tools.policy[0]"); ok {
			t.Fatal("a revoked consent still covers calls")
		}
	})
}
