package telegram

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The offset file holds whole updates: users' messages. Only the bot's own user may read it,
// whatever umask the bot was started with and whatever an earlier version left behind.
func TestOffsetFileIsOwnerOnlyWhateverTheUmask(t *testing.T) {
	tests := []struct {
		name     string
		umask    int
		leftover os.FileMode // mode of an offset file and a .tmp file left by an earlier run; 0: none
	}{
		{"permissive umask", 0, 0},
		{"usual umask", 0o022, 0},
		{"umask without owner write", 0o277, 0},
		{"files an earlier version left world-readable", 0o022, 0o644},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state", "offset")
			if tt.leftover != 0 {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				for _, p := range []string{path, path + ".tmp"} {
					if err := os.WriteFile(p, []byte("42\n"), tt.leftover); err != nil {
						t.Fatal(err)
					}
					if err := os.Chmod(p, tt.leftover); err != nil {
						t.Fatal(err)
					}
				}
			}
			old := syscall.Umask(tt.umask) // process-wide: this test is not parallel
			defer syscall.Umask(old)
			j, _, err := loadJournal(path, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if err := j.open(); err != nil {
				t.Fatalf("offset file not opened under umask %#o: %v", tt.umask, err)
			}
			defer j.close()
			if err := j.take([]int64{43}, []json.RawMessage{json.RawMessage(`{"update_id":43}`)}, 44); err != nil {
				t.Fatalf("offset file not written under umask %#o: %v", tt.umask, err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Fatalf("offset file has mode %v under umask %#o, want -rw------- (users' messages readable by others)", fi.Mode().Perm(), tt.umask)
			}
		})
	}
}
