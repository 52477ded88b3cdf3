package main

import (
	"io/fs"
	"testing"

	"relaybot/migrations"
)

// latestSchema is the schema version `bot migrate` reaches: the number of shipped migrations.
func latestSchema(t *testing.T) int {
	t.Helper()
	fsys, err := migrations.For("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	files, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	return len(files)
}
