package store

import (
	"database/sql"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// TestSQLiteOnManyThreadsKeepsTwoMallocArenas runs queries on eight OS threads at once, as a
// busy bot's scheduler does over time: with an arena per thread (glibc's default, or
// MALLOC_ARENA_MAX=8), each keeps its own high-water mark of SQLite's page caches and
// statements in the process's memory.
func TestSQLiteOnManyThreadsKeepsTwoMallocArenas(t *testing.T) {
	s := newStore(t, DriverSQLite)
	before := mallocArenas()
	if before < 0 {
		t.Skip("the C library does not report its malloc arenas")
	}
	if os.Getenv("MALLOC_ARENA_MAX") != "" || strings.Contains(os.Getenv("GLIBC_TUNABLES"), "glibc.malloc.arena_") {
		t.Skip("the environment sets the malloc arenas")
	}
	const threads = 8
	var (
		ran  sync.WaitGroup
		done = make(chan struct{})
		errs = make(chan error, threads)
	)
	for i := range threads {
		ran.Add(1)
		go func() {
			// A locked goroutine has an OS thread of its own until it unlocks: the eight queries
			// run on eight threads, each allocating (the statement is new to every connection).
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var n int
			errs <- s.rsql.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM turns WHERE id > %d", i)).Scan(&n)
			ran.Done()
			<-done
		}()
	}
	ran.Wait()
	after := mallocArenas()
	close(done)
	for range threads {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("malloc arenas: %d before, %d after", before, after)
	if limit := max(before, mallocArenaCap); after > limit {
		t.Errorf("after queries on %d threads the C heap has %d malloc arenas (%d before): want at most %d, each holding what its thread's queries grew", threads, after, before, limit)
	}
}

// TestSQLiteConnectionsCapTheirPageCaches checks the page caches that every SQLite connection
// keeps at its high-water mark: SQLite's default is 2 MiB each, five connections in all.
func TestSQLiteConnectionsCapTheirPageCaches(t *testing.T) {
	s := newStore(t, DriverSQLite)
	for _, c := range []struct {
		name string
		db   *sql.DB
		kib  int
	}{
		{"writer", s.wsql, sqliteWriterCacheKiB},
		{"reader", s.rsql, sqliteReaderCacheKiB},
	} {
		var n int
		if err := c.db.QueryRow("PRAGMA cache_size").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != -c.kib {
			t.Errorf("the %s's page cache holds up to %d (negative: KiB, positive: pages), want %d KiB", c.name, n, c.kib)
		}
	}
}
