package store

import (
	"context"
	"fmt"
	"relaybot/store/internal/testdb"
	"strings"
	"testing"
)

// forEachDriver runs fn as a subtest per driver; the PostgreSQL one is skipped with a note when
// testdb.Env is not set.
func forEachDriver(t *testing.T, fn func(t *testing.T, driver string)) {
	t.Helper()
	testdb.Drivers(t, fn)
}

// testOptions returns options for a fresh, empty database of driver. On PostgreSQL each test
// gets its own schema, dropped at the end.
func testOptions(t testing.TB, driver string) Options {
	t.Helper()
	return Options{Driver: driver, DSN: testdb.DSN(t, driver)}
}

// openTest opens and migrates a store; it is closed when the test ends.
func openTest(t testing.TB, opts Options) *Database {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, opts)
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate the store: %v", err)
	}
	return s
}

func newStore(t testing.TB, driver string) *Database {
	t.Helper()
	return openTest(t, testOptions(t, driver))
}

// count returns the rows of table matching where.
func count(t testing.TB, s *Database, table, where string, args ...any) int {
	t.Helper()
	q := "SELECT COUNT(*) FROM " + table
	if where != "" {
		q += " WHERE " + where
	}
	var n int
	if err := s.rsql.QueryRow(s.rebind(q), args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func errContains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

// rebind turns ? placeholders into $n for PostgreSQL.
func (s *Database) rebind(q string) string {
	if s.driver != DriverPostgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}
