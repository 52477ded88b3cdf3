//go:build !unix

package coord

// FileLock would hold a SQLite database file for one process; systems without flock get no
// guard, and a second process there is not detected.
type FileLock struct{}

// LockFile takes no lock on systems without flock.
func LockFile(dbPath string) (*FileLock, error) { return &FileLock{}, nil }

// Unlock does nothing on systems without flock.
func (l *FileLock) Unlock() error { return nil }
