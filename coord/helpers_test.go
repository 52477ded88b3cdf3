package coord

import (
	"database/sql"
	"testing"

	"relaybot/store"
	"relaybot/store/storetest"
)

// pgStore opens a migrated store on a schema of its own on the PostgreSQL server of
// storetest.Env (the test is skipped without it) and returns it with its DSN, for more stores
// on it.
func pgStore(t testing.TB, instance string) (*store.Database, string) {
	t.Helper()
	dsn := storetest.PostgresDSN(t)
	return openPG(t, dsn, instance), dsn
}

func openPG(t testing.TB, dsn, instance string) *store.Database {
	t.Helper()
	return storetest.OpenWith(t, store.Options{Driver: store.DriverPostgres, DSN: dsn, Instance: instance})
}

// storeOf is a replica's part of the database, as cmd/bot hands it over.
func storeOf(st *store.Database) Store { return st.Turns }

func pool(t testing.TB, st *store.Database) *sql.DB {
	t.Helper()
	db, ok := st.Postgres()
	if !ok {
		t.Fatal("store is not on PostgreSQL")
	}
	return db
}
