package migrations

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"maps"
	"path"
	"slices"
	"testing"
)

// TestDialectsRunTheSameVersionsAndSQLAsTheTwoFolderLayout pins what each dialect runs to what the
// old layout (one full folder per dialect) ran: the same version numbers with the same SQL. goose
// records only the version numbers it applied, so a database migrated by the old layout is at the
// same version with the same schema, and opening it with this code finds nothing to do.
func TestDialectsRunTheSameVersionsAndSQLAsTheTwoFolderLayout(t *testing.T) {
	// SHA-256 of each file of migrations/<dialect>/ before the shared files moved up.
	old := map[string]map[string]string{
		"sqlite": {
			"00001_initial.sql":               "9436274fc96df1ab9969f1062b722b7584e2d8bfe58a26b05858b76d11919902",
			"00002_tool_calls_chat_index.sql": "ed67aef57c8b3684c6e20d1ea369ee6d0bd1e16621a35077db471363437ddf08",
			"00003_turns_inbound_index.sql":   "496575738b89acf8e9a16ed06d9c2e38dc06dcbe49e32174c9fad91fa411f610",
		},
		"postgres": {
			"00001_initial.sql":               "c5f75af1353e165a38e1da0924607d3f2925951eed4a2982ba3166a4b123485a",
			"00002_tool_calls_chat_index.sql": "ed67aef57c8b3684c6e20d1ea369ee6d0bd1e16621a35077db471363437ddf08",
			"00003_turns_inbound_index.sql":   "496575738b89acf8e9a16ed06d9c2e38dc06dcbe49e32174c9fad91fa411f610",
		},
	}
	for dialect, want := range old {
		t.Run(dialect, func(t *testing.T) {
			fsys, err := For(dialect)
			if err != nil {
				t.Fatal(err)
			}
			names, err := fs.Glob(fsys, "*.sql")
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, n := range names {
				b, err := fs.ReadFile(fsys, n)
				if err != nil {
					t.Fatalf("read %s: %v", n, err)
				}
				sum := sha256.Sum256(b)
				got[n] = hex.EncodeToString(sum[:])
			}
			for n, h := range want {
				if got[n] != h {
					t.Errorf("%s of %s differs from what databases migrated by the old layout ran (sha256 %s, want %s)", n, dialect, got[n], h)
				}
			}
			// Versions after 3 are new; the ones before must all be there, and no others.
			for n := range got {
				if _, ok := want[n]; !ok && n < "00004" {
					t.Errorf("%s: unexpected migration %s among the versions of the old layout", dialect, n)
				}
			}
		})
	}
}

// TestADialectFileOnlyWhereTheSQLDiffers keeps the single numbered list honest: a version lives
// either in the shared folder or in both dialect folders, and then with different SQL.
func TestADialectFileOnlyWhereTheSQLDiffers(t *testing.T) {
	list := func(dir string) map[string][]byte {
		t.Helper()
		entries, err := files.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]byte{}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			b, err := files.ReadFile(path.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = b
		}
		return out
	}
	shared, lite, pg := list("."), list("sqlite"), list("postgres")
	if a, b := slices.Sorted(maps.Keys(lite)), slices.Sorted(maps.Keys(pg)); !slices.Equal(a, b) {
		t.Errorf("dialect folders list different versions: sqlite %v, postgres %v", a, b)
	}
	for n, b := range lite {
		if _, ok := shared[n]; ok {
			t.Errorf("%s is both shared and in sqlite/", n)
		}
		if bytes.Equal(b, pg[n]) {
			t.Errorf("%s is the same SQL in both dialects: keep one copy in the shared list", n)
		}
	}
	for _, dialect := range []string{"sqlite", "postgres"} {
		fsys, err := For(dialect)
		if err != nil {
			t.Fatal(err)
		}
		names, err := fs.Glob(fsys, "*.sql")
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != len(shared)+len(lite) {
			t.Errorf("%s sees %v, want the %d shared and %d own migrations", dialect, names, len(shared), len(lite))
		}
	}
}
