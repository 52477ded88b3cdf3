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
