package main

import (
	"io/fs"
	"path"
	"strconv"
	"strings"
	"testing"

	"relaybot/migrations"
)

// latestSchema is the schema version `bot migrate` reaches: the newest shipped migration.
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
	// The newest version, not the count of files: numbers are handed out ahead of merges, so the
	// list may have gaps.
	latest := 0
	for _, f := range files {
		v, _, _ := strings.Cut(path.Base(f), "_")
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("migration %s has no version number", f)
		}
		latest = max(latest, n)
	}
	return latest
}
