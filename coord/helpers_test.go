package coord

import (
	"context"
	"database/sql"
	"testing"

	"relaybot/internal/testkit/pgtest"
	"relaybot/store"
)

const pgEnv = "BOT_TEST_POSTGRES_DSN"

// pgStore opens a migrated store on a schema of its own in the PostgreSQL database named by
// pgEnv (the test is skipped without it) and returns it with its DSN, for more stores on it.
func pgStore(t testing.TB, instance string) (*store.Store, string) {
	t.Helper()
	dsn := pgtest.SchemaDSN(t)
	return openPG(t, dsn, instance), dsn
}

func openPG(t testing.TB, dsn, instance string) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{Driver: store.DriverPostgres, DSN: dsn, Instance: instance})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

func pool(t testing.TB, st *store.Store) *sql.DB {
	t.Helper()
	db, ok := st.Postgres()
	if !ok {
		t.Fatal("store is not on PostgreSQL")
	}
	return db
}
