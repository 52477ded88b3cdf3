package store

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pgEnv names the PostgreSQL server the PostgreSQL tests use.
const pgEnv = "BOT_TEST_POSTGRES_DSN"

// forEachDriver runs fn as a subtest per driver; the PostgreSQL one is skipped with a note when
// pgEnv is not set.
func forEachDriver(t *testing.T, fn func(t *testing.T, driver string)) {
	t.Helper()
	for _, d := range []string{DriverSQLite, DriverPostgres} {
		t.Run(d, func(t *testing.T) {
			if d == DriverPostgres && os.Getenv(pgEnv) == "" {
				t.Skipf("PostgreSQL not tested: set %s to a database URL (e.g. postgres://postgres@127.0.0.1:5432/relaybot_test?sslmode=disable)", pgEnv)
			}
			fn(t, d)
		})
	}
}

// testOptions returns options for a fresh, empty database of driver. On PostgreSQL each test
// gets its own schema, dropped at the end.
func testOptions(t testing.TB, driver string) Options {
	t.Helper()
	if driver == DriverSQLite {
		return Options{Driver: DriverSQLite, DSN: filepath.Join(t.TempDir(), "bot.db")}
	}
	base := os.Getenv(pgEnv)
	schema := fmt.Sprintf("t_%d", time.Now().UnixNano())
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("open %s: %v", pgEnv, err)
	}
	defer admin.Close()
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer db.Close()
		if _, err := db.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s is not a URL: %v", pgEnv, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return Options{Driver: DriverPostgres, DSN: u.String()}
}

// openTest opens and migrates a store; it is closed when the test ends.
func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
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
