// Package storetest opens a store of its own for each test, as net/http/httptest starts a server:
// a migrated SQLite file in the test's t.TempDir(), or a migrated PostgreSQL schema of its own on
// the server BOT_TEST_POSTGRES_DSN names, dropped when the test ends (a test that needs
// PostgreSQL is skipped, with the reason, when the variable is not set). The store is closed when
// the test ends.
package storetest

import (
	"context"
	"testing"

	"relaybot/store"
	"relaybot/store/internal/testdb"
)

// Env names the PostgreSQL server the tests use, as a URL:
// postgres://postgres@127.0.0.1:5432/relaybot_test?sslmode=disable.
const Env = testdb.Env

// The drivers, as store.Options names them.
const (
	SQLite   = store.DriverSQLite
	Postgres = store.DriverPostgres
)

// Open opens and migrates a fresh, empty database of driver (SQLite or Postgres) for the test.
func Open(t testing.TB, driver string) *store.Database {
	t.Helper()
	return OpenWith(t, store.Options{Driver: driver, DSN: DSN(t, driver)})
}

// OpenWith opens and migrates the store opts names (another replica's store on the same DSN,
// a store with its own options), closed when the test ends.
func OpenWith(t testing.TB, opts store.Options) *store.Database {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, opts)
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("migrate the store: %v", err)
	}
	return db
}

// DSN returns a fresh database of driver (SQLite or Postgres): a file path or a schema's URL.
func DSN(t testing.TB, driver string) string {
	t.Helper()
	return testdb.DSN(t, driver)
}

// SQLitePath returns the path of a database file in a directory of the test's own.
func SQLitePath(t testing.TB) string {
	t.Helper()
	return testdb.SQLitePath(t)
}

// PostgresDSN returns the URL of a fresh, empty schema on the server Env names, dropped with all
// it holds when the test ends. Without Env the test is skipped.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	return testdb.PostgresDSN(t)
}

// PostgresDatabaseDSN is PostgresDSN with a fresh database of the test's own in place of a
// schema, for tests that run in parallel with replicas whose leases (session advisory locks)
// belong to the database.
func PostgresDatabaseDSN(t testing.TB) string {
	t.Helper()
	return testdb.PostgresDatabaseDSN(t)
}

// PgvectorEnv names a PostgreSQL server with pgvector available (.ci/pgvector starts one).
const PgvectorEnv = testdb.PgvectorEnv

// OpenPgvector opens and migrates a fresh schema on the server PgvectorEnv names, where vectors
// are pgvector's; without the variable the test is skipped, saying so.
func OpenPgvector(t testing.TB) *store.Database {
	t.Helper()
	return OpenWith(t, store.Options{Driver: Postgres, DSN: testdb.PgvectorDSN(t)})
}

// Drivers runs fn as a subtest per driver; the PostgreSQL one is skipped without Env.
func Drivers(t *testing.T, fn func(t *testing.T, driver string)) {
	t.Helper()
	testdb.Drivers(t, fn)
}
