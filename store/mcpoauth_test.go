package store

import (
	"context"
	"testing"
	"time"
)

func TestOAuthTokenWritesNameTheVersionTheyRead(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		st := openTest(t, testOptions(t, driver))
		ctx, now := context.Background(), time.Now()
		if sealed, ver, err := st.OAuth.OAuthToken(ctx, "tracker"); err != nil || ver != 0 || sealed != "" {
			t.Fatalf("a server never connected: %q v%d %v", sealed, ver, err)
		}
		for _, step := range []struct {
			read    int64
			sealed  string
			wantOK  bool
			wantVer int64
		}{
			{0, "first", true, 1},
			{0, "a second first login", false, 1}, // another replica stored one meanwhile
			{1, "refreshed", true, 2},
			{1, "a stale refresh", false, 2},
		} {
			ok, err := st.OAuth.SwapOAuthToken(ctx, "tracker", step.read, step.sealed, now)
			if err != nil || ok != step.wantOK {
				t.Fatalf("swap %q over v%d: %v %v, want %v", step.sealed, step.read, ok, err, step.wantOK)
			}
			if _, ver, _ := st.OAuth.OAuthToken(ctx, "tracker"); ver != step.wantVer {
				t.Fatalf("after swapping %q the version is %d, want %d", step.sealed, ver, step.wantVer)
			}
		}
		if sealed, _, _ := st.OAuth.OAuthToken(ctx, "tracker"); sealed != "refreshed" {
			t.Fatalf("the record holds %q, want the last write that named the current version", sealed)
		}
	})
}

func TestAnOAuthStateIsTakenOnceAndNotAfterItExpires(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		st := openTest(t, testOptions(t, driver))
		ctx, now := context.Background(), time.Now()
		if err := st.OAuth.PutOAuthState(ctx, "h1", "tracker", "sealed1", now.Add(time.Minute), now); err != nil {
			t.Fatal(err)
		}
		if err := st.OAuth.PutOAuthState(ctx, "h2", "tracker", "sealed2", now.Add(time.Minute), now); err != nil {
			t.Fatal(err)
		}
		server, sealed, ok, err := st.OAuth.TakeOAuthState(ctx, "h1", now)
		if err != nil || !ok || server != "tracker" || sealed != "sealed1" {
			t.Fatalf("take h1: %q %q %v %v", server, sealed, ok, err)
		}
		if _, _, ok, _ := st.OAuth.TakeOAuthState(ctx, "h1", now); ok {
			t.Fatal("a state was taken twice (a replayed callback would log in again)")
		}
		if _, _, ok, _ := st.OAuth.TakeOAuthState(ctx, "h2", now.Add(2*time.Minute)); ok {
			t.Fatal("an expired state was taken")
		}
		if _, _, ok, _ := st.OAuth.TakeOAuthState(ctx, "h2", now); ok {
			t.Fatal("an expired state survived its taking")
		}
	})
}
