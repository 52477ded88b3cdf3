package coord

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"relaybot/store"
)

const pgEnv = "BOT_TEST_POSTGRES_DSN"

// pgStore opens a migrated store on a schema of its own in the PostgreSQL database named by
// pgEnv (the test is skipped without it) and returns it with its DSN, for more stores on it.
func pgStore(t testing.TB, instance string) (*store.Store, string) {
	t.Helper()
	base := os.Getenv(pgEnv)
	if base == "" {
		t.Skipf("PostgreSQL not tested: set %s", pgEnv)
	}
	schema := fmt.Sprintf("coord_%d", time.Now().UnixNano())
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", base)
		if err != nil {
			return
		}
		defer db.Close()
		if _, err := db.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return openPG(t, u.String(), instance), u.String()
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
