package main

import (
	"io/fs"
	"strconv"
	"strings"
	"testing"

	"relaybot/migrations"
)

// latestSchema is the schema version `bot migrate` reaches: the highest number of the shipped
// migrations (numbers are handed out ahead, so the list may have gaps while they land).
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
	latest := 0
	for _, f := range files {
		n, err := strconv.Atoi(strings.SplitN(f, "_", 2)[0])
		if err != nil {
			t.Fatalf("migration %s: no version number: %v", f, err)
		}
		latest = max(latest, n)
	}
	return latest
}
