package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestAdminSessionsLastTheirTimeEndOnLogoutAndAreCapped: a login is found until it expires or is
// ended, from another store on the same database too (another replica); at the cap the session
// closest to expiry makes room.
func TestAdminSessionsLastTheirTimeEndOnLogoutAndAreCapped(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		opts := testOptions(t, driver)
		a := openTest(t, opts)
		b := a
		if driver == DriverPostgres {
			b = openTest(t, opts) // a second replica's store on the same database
		}
		now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
		if err := a.AdminSessions.StartAdminSession(ctx, "h1", AdminSession{CSRF: "c1", ExpiresAt: now.Add(12 * time.Hour)}, now, 3); err != nil {
			t.Fatal(err)
		}
		got, ok, err := b.AdminSessions.AdminSession(ctx, "h1", now.Add(time.Hour))
		if err != nil || !ok || got.CSRF != "c1" || !got.ExpiresAt.Equal(now.Add(12*time.Hour)) {
			t.Fatalf("the session read back: %+v %v %v, want CSRF c1 expiring 12 h after login", got, ok, err)
		}
		if _, ok, _ := b.AdminSessions.AdminSession(ctx, "h1", now.Add(12*time.Hour)); ok {
			t.Error("the session is still valid when its 12 hours are over")
		}
		if _, ok, _ := b.AdminSessions.AdminSession(ctx, "unknown", now); ok {
			t.Error("an unknown cookie has a session")
		}

		// Logout on one replica ends the session for every replica.
		if err := b.AdminSessions.EndAdminSession(ctx, "h1"); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := a.AdminSessions.AdminSession(ctx, "h1", now); ok {
			t.Error("the session outlived its logout")
		}

		// With a cap of 3, the fourth login drops the one closest to expiry.
		for i := range 4 {
			at := now.Add(time.Duration(i) * time.Minute)
			if err := a.AdminSessions.StartAdminSession(ctx, fmt.Sprint("s", i), AdminSession{CSRF: "x", ExpiresAt: at.Add(12 * time.Hour)}, at, 3); err != nil {
				t.Fatal(err)
			}
		}
		var live []string
		for i := range 4 {
			if _, ok, _ := a.AdminSessions.AdminSession(ctx, fmt.Sprint("s", i), now.Add(5*time.Minute)); ok {
				live = append(live, fmt.Sprint("s", i))
			}
		}
		if !slices.Equal(live, []string{"s1", "s2", "s3"}) {
			t.Errorf("live sessions after 4 logins with a cap of 3: %v, want the newest three", live)
		}
		// A login once the others expired clears them out of the table.
		later := now.Add(13 * time.Hour)
		if err := a.AdminSessions.StartAdminSession(ctx, "s9", AdminSession{CSRF: "x", ExpiresAt: later.Add(12 * time.Hour)}, later, 3); err != nil {
			t.Fatal(err)
		}
		if n := count(t, a, "admin_sessions", ""); n != 1 {
			t.Errorf("%d sessions stored after the others expired, want 1", n)
		}
	})
}
