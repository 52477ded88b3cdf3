// Package store keeps conversations, turns, messages, the tool-call audit log and LLM calls in
// SQLite (the default) or PostgreSQL through GORM. Schema changes come only from the versioned SQL
// migrations of package migrations.
//
// On SQLite the store opens two pools on the same file: one writer connection that every write goes
// through, and a pool of read-only readers; with WAL and a busy timeout, many concurrent turns never
// see "database is locked". Audit rows go through one writer goroutine that commits them in batches
// (group commit), so many chats calling tools at once share a commit and a slow disk stalls nobody
// else's stream.
//
// A program that links the store on glibc caps the C heap at two malloc arenas when it is
// loaded (unless MALLOC_ARENA_MAX or a glibc.malloc tunable is set): SQLite is its C code, and
// with glibc's arena per thread every thread that ever ran a query kept its own share of what the
// queries grew.
package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	sqlite3 "github.com/mattn/go-sqlite3"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Drivers the store supports.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// Options configure Open.
type Options struct {
	// Driver is "sqlite" (the default when empty) or "postgres".
	Driver string
	// DSN is a file path for SQLite (its folder is created) and a URL or key=value string for
	// PostgreSQL.
	DSN string
	// Logger receives background failures (retention sweeps); nil discards them.
	Logger *slog.Logger
	// Readers is the size of the SQLite reader pool (0 means 4), or of the PostgreSQL connection
	// pool (0 means 16).
	Readers int
	// BusyTimeout is how long a SQLite connection waits for a lock; 0 means 10s.
	BusyTimeout time.Duration
	// AuditBatch caps the audit rows committed in one transaction; 0 means 256.
	AuditBatch int
	// Instance is the id of this replica (package coord registers it in the instances table):
	// the turns this store starts carry it, so recovery elsewhere leaves them alone while this
	// replica's lease lives. Empty for a single process.
	Instance string
}

// ErrClosed is returned by writes after Close.
var ErrClosed = errors.New("store: closed")

// ErrNotFound is returned when a row asked for by id does not exist.
var ErrNotFound = errors.New("store: not found")

// conn is what every query type shares: the connections, the writers that batch the turn and
// audit writes, and the store's settings.
type conn struct {
	driver   string
	instance string
	// process names this process in the rows that outlive it only if it dies (MCP tasks in
	// flight): the instance, or for a single process an id of its own.
	process string
	log     *slog.Logger
	// w is the writer: on SQLite a single connection; on PostgreSQL the same pool as r.
	w, r       *gorm.DB
	wsql, rsql *sql.DB
	audit      *auditWriter
	attempt    writerAttempt // the writers' bound on one transaction
	turns      *groupWriter  // StartTurn, FinishTurn and new conversations, committed together
	started    startedTurns
	ids        turnIDs // SQLite: the turn ids reserved for NewTurnID
	closeOnce  sync.Once
	closeErr   error
}

// Open opens the database and starts the audit writer. It does not migrate: call Migrate.
func Open(ctx context.Context, opts Options) (*Database, error) {
	if opts.Driver == "" {
		opts.Driver = DriverSQLite
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Readers <= 0 {
		opts.Readers = 4
		if opts.Driver == DriverPostgres {
			opts.Readers = 16
		}
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 10 * time.Second
	}
	if opts.AuditBatch <= 0 {
		opts.AuditBatch = 256
	}
	if strings.TrimSpace(opts.DSN) == "" {
		return nil, fmt.Errorf("store: open %s: empty dsn", opts.Driver)
	}
	s := &conn{driver: opts.Driver, log: opts.Logger, instance: opts.Instance, process: opts.Instance}
	if s.process == "" {
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand never fails on the platforms Go supports
		s.process = "process-" + hex.EncodeToString(b[:])
	}
	var err error
	switch opts.Driver {
	case DriverSQLite:
		err = s.openSQLite(ctx, opts)
	case DriverPostgres:
		err = s.openPostgres(ctx, opts)
	default:
		return nil, fmt.Errorf("store: unknown driver %q (want sqlite or postgres)", opts.Driver)
	}
	if err != nil {
		return nil, err
	}
	if s.driver == DriverPostgres {
		s.attempt = writerAttempt(WriteAttempt)
	}
	s.audit = newAuditWriter(s, opts.AuditBatch)
	s.turns = newGroupWriter(s.w, turnBatch, s.attempt)
	return newDatabase(s), nil
}

// turnBatch caps the turn writes committed in one transaction.
const turnBatch = 64

// gormConfig returns a fresh config for each gorm.Open, which fills in defaults on the value it
// is given: a shared package-level value would be written by concurrent Opens.
func gormConfig() *gorm.Config {
	return &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		TranslateError:         true,
	}
}

// The SQLite connections' page caches, in KiB (SQLite's default is 2 MiB each). A cache is C
// memory that stays at its high-water mark. The writer's keeps the pages the writes touch (under
// load it grew by 1.3 MB in 30 s, most of it index pages touched once); the hot ones, the tables'
// and indexes' last pages and their parents, fit in a fraction of it. A reader's cache starts
// empty whenever another connection committed since its last read, which under load is every
// read, so it holds one query's pages; when the bot is quiet it would otherwise keep up to 2
// MiB of an old database each. A page not cached is read again from the operating system's
// cache of the file.
const (
	sqliteWriterCacheKiB = 512
	sqliteReaderCacheKiB = 256
)

func (s *conn) openSQLite(ctx context.Context, opts Options) error {
	path := opts.DSN
	if path == ":memory:" || strings.Contains(path, "mode=memory") {
		return fmt.Errorf("store: open sqlite: an in-memory database cannot be shared by the writer and the readers; give a file path")
	}
	path = strings.TrimPrefix(path, "file:")
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if err := createPrivate(path); err != nil {
		return err
	}
	dsn := func(readonly bool) string {
		q := url.Values{}
		q.Set("_journal_mode", "WAL")
		q.Set("_busy_timeout", fmt.Sprint(opts.BusyTimeout.Milliseconds()))
		q.Set("_foreign_keys", "on")
		q.Set("_loc", "UTC")
		// FULL: a commit survives a power cut too, not only a crash of the process.
		q.Set("_synchronous", "FULL")
		// A deleted row's bytes are overwritten, not left in free space: a forgotten memory
		// or a retention delete leaves no copy in the file (decision 047).
		q.Set("_secure_delete", "on")
		if readonly {
			q.Set("_query_only", "true")
			q.Set("_cache_size", fmt.Sprint(-sqliteReaderCacheKiB))
		} else {
			q.Set("_cache_size", fmt.Sprint(-sqliteWriterCacheKiB))
			// BEGIN IMMEDIATE takes the write lock up front instead of failing on upgrade.
			q.Set("_txlock", "immediate")
		}
		return "file:" + path + "?" + q.Encode()
	}
	wsql := sql.OpenDB(sqliteConnector{dsn: dsn(false), drv: &sqlite3.SQLiteDriver{}})
	wsql.SetMaxOpenConns(1)
	wsql.SetMaxIdleConns(1)
	wsql.SetConnMaxLifetime(0)
	wsql.SetConnMaxIdleTime(0)
	// The writer connection is opened first so that it creates the file and switches it to WAL
	// before a read-only connection looks at it.
	if err := wsql.PingContext(ctx); err != nil {
		wsql.Close()
		return fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	rsql := sql.OpenDB(sqliteConnector{dsn: dsn(true), drv: &sqlite3.SQLiteDriver{}})
	rsql.SetMaxOpenConns(opts.Readers)
	rsql.SetMaxIdleConns(opts.Readers)
	w, err := gorm.Open(sqlite.New(sqlite.Config{Conn: textPool{wsql}}), gormConfig())
	if err != nil {
		wsql.Close()
		rsql.Close()
		return fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	r, err := gorm.Open(sqlite.New(sqlite.Config{Conn: textPool{rsql}}), gormConfig())
	if err != nil {
		wsql.Close()
		rsql.Close()
		return fmt.Errorf("store: open sqlite %s for reading: %w", path, err)
	}
	s.w, s.r, s.wsql, s.rsql = w, r, wsql, rsql
	return nil
}

// createPrivate creates the SQLite database file 0600, and its folder 0700 when the store creates
// it, whatever the process umask: the file holds every conversation. SQLite gives the -wal and
// -shm files the mode of the database file. An existing file or folder is left as it is.
func createPrivate(path string) error {
	if dir := filepath.Dir(path); dir != "." {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return fmt.Errorf("store: create folder for sqlite database %s: %w", path, err)
			}
			if err := os.Chmod(dir, 0o700); err != nil {
				return fmt.Errorf("store: create folder for sqlite database %s: %w", path, err)
			}
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: create sqlite database %s: %w", path, err)
	}
	// An empty file is an empty database to SQLite.
	err = f.Chmod(0o600)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: create sqlite database %s: %w", path, err)
	}
	return nil
}

func (s *conn) openPostgres(ctx context.Context, opts Options) error {
	db, err := sql.Open("pgx", opts.DSN)
	if err != nil {
		return fmt.Errorf("store: open postgres: %w", redactDSN(err, opts.DSN))
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return fmt.Errorf("store: connect to postgres: %w", redactDSN(err, opts.DSN))
	}
	db.SetMaxOpenConns(opts.Readers)
	db.SetMaxIdleConns(opts.Readers)
	g, err := gorm.Open(postgres.New(postgres.Config{Conn: textPool{db}}), gormConfig())
	if err != nil {
		db.Close()
		return fmt.Errorf("store: open postgres: %w", redactDSN(err, opts.DSN))
	}
	s.w, s.r, s.wsql, s.rsql = g, g, db, db
	return nil
}

// redactDSN keeps a password in the DSN out of an error message.
func redactDSN(err error, dsn string) error {
	u, perr := url.Parse(dsn)
	if perr != nil || u.User == nil {
		return err
	}
	pw, ok := u.User.Password()
	if !ok || pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), pw, "xxxxx"))
}

// Postgres returns the PostgreSQL connection pool, and false on SQLite. Package coord keeps the
// replicas' leases, locks and signals over it; nothing else should write through it.
func (s *Database) Postgres() (*sql.DB, bool) {
	if s.driver != DriverPostgres {
		return nil, false
	}
	return s.wsql, true
}

// Pools returns the connection pools for the packages that own tables of their own beside the
// store's (retrieval, memory): w writes (on SQLite the store's single writer connection, so
// their writes queue with the store's), r reads.
func (s *Database) Pools() (w, r *sql.DB) { return s.wsql, s.rsql }

// Driver reports the driver in use: "sqlite" or "postgres".
func (s *Database) Driver() string { return s.driver }

// Close stops accepting audit writes, writes every audit row already handed in, and closes the
// database. It is safe to call more than once.
func (s *Database) Close() error {
	s.closeOnce.Do(func() {
		s.turns.close()
		s.audit.close()
		var errs []error
		if err := s.wsql.Close(); err != nil {
			errs = append(errs, fmt.Errorf("store: close writer: %w", err))
		}
		if s.rsql != s.wsql {
			if err := s.rsql.Close(); err != nil {
				errs = append(errs, fmt.Errorf("store: close readers: %w", err))
			}
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// now is the store's clock: UTC, microseconds (what both databases keep).
func now() time.Time { return dbTime(time.Now()) }

// dbTime converts t to what the database keeps: UTC, truncated to the microsecond.
func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
