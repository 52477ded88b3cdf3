// Package pgtest gives tests a fresh PostgreSQL schema of the server BOT_TEST_POSTGRES_DSN
// names, or skips them when it is not set.
package pgtest

import (
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// Env names the PostgreSQL database the tests use.
const Env = "BOT_TEST_POSTGRES_DSN"

// SchemaDSN returns the DSN of a fresh schema in the database of Env (its search_path set to
// it), dropped when the test ends; the test is skipped when Env is not set.
func SchemaDSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv(Env)
	if base == "" {
		t.Skipf("PostgreSQL not tested: set %s", Env)
	}
	schema := fmt.Sprintf("t_%d", time.Now().UnixNano())
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		db.Close()
	})
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s is not a URL: %v", Env, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
