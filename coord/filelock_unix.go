//go:build unix

package coord

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// FileLock is an exclusive lock on a SQLite database file, held by one `bot serve` process.
type FileLock struct {
	f *os.File
}

// LockFile takes the lock of the SQLite database at dbPath: an flock on dbPath+".lock", which
// names the holder (pid, host, start time). A second process gets an error wrapping ErrInUse that
// names the first; SQLite itself would let both write the file and each keep its own idea of
// which turns are running. The kernel drops the lock when the process dies, however it dies.
func LockFile(dbPath string) (*FileLock, error) {
	path := dbPath + ".lock"
	// The first start creates the data folder, private as the store makes it.
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("coord: create folder for lock file %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("coord: open lock file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := strings.TrimSpace(string(holder))
			if who == "" {
				who = "another process"
			}
			return nil, fmt.Errorf("%w: %s is used by %s; SQLite serves one process, use PostgreSQL (storage.driver = \"postgres\") to run more than one replica",
				ErrInUse, dbPath, who)
		}
		return nil, fmt.Errorf("coord: lock %s: %w", path, err)
	}
	host, _ := os.Hostname()
	who := fmt.Sprintf("bot serve pid %d on host %s since %s", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(who+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("coord: write lock file %s: %w", path, err)
	}
	return &FileLock{f: f}, nil
}

// Unlock releases the lock. The file stays, so a waiting process never locks a file that is
// being removed.
func (l *FileLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	if err != nil {
		return fmt.Errorf("coord: unlock: %w", err)
	}
	return nil
}
