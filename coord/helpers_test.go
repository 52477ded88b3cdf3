package coord

import (
	"context"
	"database/sql"
	"testing"

	"relaybot/internal/testkit/storetest"
	"relaybot/store"
)

// pgStore opens a migrated store on a schema of its own on the PostgreSQL server of
// storetest.Env (the test is skipped without it) and returns it with its DSN, for more stores
// on it.
func pgStore(t testing.TB, instance string) (*store.Store, string) {
	t.Helper()
	dsn := storetest.PostgresDSN(t)
	return openPG(t, dsn, instance), dsn
}

func openPG(t testing.TB, dsn, instance string) *store.Store {
	t.Helper()
	return storetest.Open(t, func(ctx context.Context) (*store.Store, error) {
		return store.Open(ctx, store.Options{Driver: store.DriverPostgres, DSN: dsn, Instance: instance})
	})
}

func pool(t testing.TB, st *store.Store) *sql.DB {
	t.Helper()
	db, ok := st.Postgres()
	if !ok {
		t.Fatal("store is not on PostgreSQL")
	}
	return db
}
