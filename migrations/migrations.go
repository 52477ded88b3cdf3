// Package migrations holds the versioned SQL migrations of the database, one folder per dialect,
// embedded in the binary. The store applies them with goose at `bot migrate` and at `bot serve`
// start; the applied version is recorded in goose's version table.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
)

//go:embed sqlite/*.sql postgres/*.sql
var files embed.FS

// For returns the migrations of one dialect: "sqlite" or "postgres".
func For(dialect string) (fs.FS, error) {
	switch dialect {
	case "sqlite", "postgres":
		return fs.Sub(files, dialect)
	default:
		return nil, fmt.Errorf("migrations: unknown dialect %q (want sqlite or postgres)", dialect)
	}
}
