package web

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"relaybot/store"
)

// openStore opens a migrated SQLite store in a temporary folder, closed when the test ends.
func openStore(t *testing.T) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{DSN: filepath.Join(t.TempDir(), "bot.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

// twoReplicas serves two web chats, each made with the options opts returns (a replica's own
// relay, for one), as two replicas of one bot behind their own listeners, closed when the test
// ends.
func twoReplicas(t *testing.T, opts func() Options) [2]*httptest.Server {
	t.Helper()
	var srvs [2]*httptest.Server
	for i := range srvs {
		c, err := New(opts())
		if err != nil {
			t.Fatal(err)
		}
		srvs[i] = httptest.NewServer(c.Handler())
		t.Cleanup(func() {
			srvs[i].Close()
			c.Close()
		})
	}
	return srvs
}
