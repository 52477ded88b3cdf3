package store

import (
	"context"
	"fmt"
	"relaybot/internal/testkit/storetest"
	"strings"
	"testing"
)

// forEachDriver runs fn as a subtest per driver; the PostgreSQL one is skipped with a note when
// storetest.Env is not set.
func forEachDriver(t *testing.T, fn func(t *testing.T, driver string)) {
	t.Helper()
	storetest.Drivers(t, fn)
}

// testOptions returns options for a fresh, empty database of driver. On PostgreSQL each test
// gets its own schema, dropped at the end.
func testOptions(t testing.TB, driver string) Options {
	t.Helper()
	return Options{Driver: driver, DSN: storetest.DSN(t, driver)}
}

// openTest opens and migrates a store; it is closed when the test ends.
func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	return storetest.Open(t, func(ctx context.Context) (*Store, error) { return Open(ctx, opts) })
}

func newStore(t testing.TB, driver string) *Store {
	t.Helper()
	return openTest(t, testOptions(t, driver))
}

// count returns the rows of table matching where.
func count(t testing.TB, s *Store, table, where string, args ...any) int {
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
func (s *Store) rebind(q string) string {
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
