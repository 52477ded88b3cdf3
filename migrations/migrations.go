// Package migrations holds the versioned SQL migrations of the database, embedded in the binary:
// one numbered list, in this folder, and a file in sqlite/ or postgres/ only for a version whose
// SQL differs between the dialects (then both folders have it, and this folder does not). The
// store applies them with goose at `bot migrate` and at `bot serve` start; the applied version is
// recorded in goose's version table.
package migrations

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

//go:embed *.sql sqlite/*.sql postgres/*.sql
var files embed.FS

// For returns the migrations of one dialect, "sqlite" or "postgres": the shared ones and the
// dialect's own, as one flat folder.
func For(dialect string) (fs.FS, error) {
	switch dialect {
	case "sqlite", "postgres":
		return dialectFS{dir: dialect}, nil
	default:
		return nil, fmt.Errorf("migrations: unknown dialect %q (want sqlite or postgres)", dialect)
	}
}

// dialectFS shows the shared migrations and those of one dialect's folder side by side. A version
// present in both would be a duplicate, which goose refuses to run.
type dialectFS struct {
	dir string
}

var _ fs.ReadDirFS = dialectFS{}

// Open opens a migration from the dialect's folder, or else from the shared list.
func (d dialectFS) Open(name string) (fs.File, error) {
	if name == "." || strings.Contains(name, "/") {
		// The list is flat; "." is read through ReadDir.
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	f, err := files.Open(path.Join(d.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return files.Open(name)
	}
	return f, err
}

// ReadDir lists the migrations of the dialect, by name.
func (d dialectFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if name != "." {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	shared, err := files.ReadDir(".")
	if err != nil {
		return nil, err
	}
	own, err := files.ReadDir(d.dir)
	if err != nil {
		return nil, err
	}
	var out []fs.DirEntry
	for _, e := range append(shared, own...) {
		if !e.IsDir() {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}
