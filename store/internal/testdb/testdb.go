// Package testdb gives each test a database of its own: a SQLite file in the test's
// t.TempDir(), or a PostgreSQL schema of its own on the server BOT_TEST_POSTGRES_DSN names,
// dropped when the test ends (a test that needs PostgreSQL is skipped, with the reason, when the
// variable is not set). It does not import package store, so store's own tests use it; other
// packages use package store/storetest, which opens a store on it.
package testdb

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// Env names the PostgreSQL server the tests use, as a URL:
// postgres://postgres@127.0.0.1:5432/relaybot_test?sslmode=disable.
const Env = "BOT_TEST_POSTGRES_DSN"

// The drivers, as store.Options names them.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// SQLitePath returns the path of a database file in a directory of the test's own.
func SQLitePath(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "bot.db")
}

// PgvectorEnv names a PostgreSQL server that has pgvector (.ci/pgvector starts one), for the
// tests of vectors compared by pgvector.
const PgvectorEnv = "BOT_TEST_PGVECTOR_DSN"

// PostgresDSN returns the URL of a fresh, empty schema on the server Env names, dropped with all
// it holds when the test ends. Without Env the test is skipped.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	if os.Getenv(Env) == "" {
		t.Skipf("PostgreSQL not tested: set %s to a database URL (e.g. postgres://postgres@127.0.0.1:5432/relaybot_test?sslmode=disable)", Env)
	}
	return schemaOn(t, Env)
}

// PgvectorDSN is PostgresDSN on the server PgvectorEnv names; without it the test is skipped.
func PgvectorDSN(t testing.TB) string {
	t.Helper()
	if os.Getenv(PgvectorEnv) == "" {
		t.Skipf("pgvector not tested: set %s to the URL of a PostgreSQL database with the pgvector extension available (.ci/pgvector start prints one)", PgvectorEnv)
	}
	return schemaOn(t, PgvectorEnv)
}

// PostgresDatabaseDSN is PostgresDSN with a database of the test's own in place of a schema:
// for tests that run beside each other while their replicas take session advisory locks (the
// coord leases), which are the database's, not a schema's.
func PostgresDatabaseDSN(t testing.TB) string {
	t.Helper()
	if os.Getenv(Env) == "" {
		t.Skipf("PostgreSQL not tested: set %s to a database URL (e.g. postgres://postgres@127.0.0.1:5432/relaybot_test?sslmode=disable)", Env)
	}
	base := os.Getenv(Env)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s is not a URL: %v", Env, err)
	}
	name := "test_" + randomTail(t)
	exec(t, base, "CREATE DATABASE "+name)
	t.Cleanup(func() { exec(t, base, "DROP DATABASE "+name+" WITH (FORCE)") })
	u.Path = "/" + name
	return u.String()
}

// randomTail is 12 random hex digits, for the names of a test's schema or database.
func randomTail(t testing.TB) string {
	t.Helper()
	tail := make([]byte, 6)
	if _, err := rand.Read(tail); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(tail)
}

// schemaOn makes a fresh schema on the server the variable env names and returns its URL.
func schemaOn(t testing.TB, env string) string {
	t.Helper()
	base := os.Getenv(env)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s is not a URL: %v", env, err)
	}
	schema := "test_" + randomTail(t)
	exec(t, base, "CREATE SCHEMA "+schema)
	t.Cleanup(func() { exec(t, base, "DROP SCHEMA "+schema+" CASCADE") })
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// exec runs one statement on the server at dsn, on a connection of its own.
func exec(t testing.TB, dsn, statement string) {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatalf("%s: %v", statement, err)
	}
	defer db.Close()
	if _, err := db.Exec(statement); err != nil {
		t.Errorf("%s: %v", statement, err)
	}
}

// DSN returns a fresh database of driver (SQLite or Postgres): a file path or a schema's URL.
func DSN(t testing.TB, driver string) string {
	t.Helper()
	switch driver {
	case SQLite:
		return SQLitePath(t)
	case Postgres:
		return PostgresDSN(t)
	}
	t.Fatalf("storetest: no driver %q", driver)
	return ""
}

// Drivers runs fn as a subtest per driver; the PostgreSQL one is skipped without Env.
func Drivers(t *testing.T, fn func(t *testing.T, driver string)) {
	t.Helper()
	for _, d := range []string{SQLite, Postgres} {
		t.Run(d, func(t *testing.T) {
			if d == Postgres && os.Getenv(Env) == "" {
				t.Skipf("PostgreSQL not tested: set %s to a database URL", Env)
			}
			fn(t, d)
		})
	}
}
