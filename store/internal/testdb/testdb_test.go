package testdb

import (
	"database/sql"
	"net/url"
	"testing"
)

// TestEachTestGetsASchemaOfItsOwnDroppedAfterwards: two tests' schemas do not see each other's
// tables, and a test's schema is gone once it has ended.
func TestEachTestGetsASchemaOfItsOwnDroppedAfterwards(t *testing.T) {
	var schemas []string
	for range 2 {
		t.Run("test", func(t *testing.T) {
			dsn := PostgresDSN(t)
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			schemas = append(schemas, u.Query().Get("search_path"))
			db, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec("CREATE TABLE turns (id INTEGER)"); err != nil {
				t.Fatalf("a fresh schema already holds a table of another test: %v", err)
			}
		})
	}
	if len(schemas) < 2 {
		t.Skip("PostgreSQL not tested")
	}
	if schemas[0] == schemas[1] {
		t.Fatalf("two tests shared schema %s", schemas[0])
	}
	db, err := sql.Open("pgx", PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var left int
	if err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ANY($1)`, schemas).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d schemas of ended tests are still there", left)
	}
}

// TestADatabaseOfItsOwnHasItsOwnAdvisoryLocksAndIsDroppedAfterwards: a session advisory lock
// (what a replica's lease is) held in one test's database does not stop another test's database
// from taking the same key, and the databases are gone once their tests have ended.
func TestADatabaseOfItsOwnHasItsOwnAdvisoryLocksAndIsDroppedAfterwards(t *testing.T) {
	var names []string
	t.Run("tests", func(t *testing.T) {
		const key = 4242
		for i := range 2 {
			dsn := PostgresDatabaseDSN(t)
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, u.Path[1:])
			db, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1) // the lock is the session's: keep the one connection open
			var got bool
			if err := db.QueryRow("SELECT pg_try_advisory_lock($1)", key).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if !got {
				t.Fatalf("database %d could not take advisory lock %d the other database holds", i+1, key)
			}
		}
	})
	if len(names) < 2 {
		t.Skip("PostgreSQL not tested")
	}
	if names[0] == names[1] {
		t.Fatalf("two tests shared database %s", names[0])
	}
	db, err := sql.Open("pgx", PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var left int
	if err := db.QueryRow(`SELECT COUNT(*) FROM pg_database WHERE datname = ANY($1)`, names).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d databases of ended tests are still there", left)
	}
}
