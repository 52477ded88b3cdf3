package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"strings"
	"sync"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// maxCachedStmts bounds the prepared statements one SQLite connection keeps.
const maxCachedStmts = 256

// sqliteConnector opens SQLite connections that keep their prepared statements. GORM sends the
// same few statements for every turn, and SQLite compiling each anew was about 4% of the bot's
// CPU at 1,000 chats (sqlite3_prepare_v2 in the profile). Arguments still arrive through
// textPool, so the text cleaning is unchanged.
type sqliteConnector struct {
	dsn string
	drv *sqlite3.SQLiteDriver
}

var _ driver.Connector = sqliteConnector{}

// Connect implements driver.Connector.
func (c sqliteConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &stmtCacheConn{SQLiteConn: conn.(*sqlite3.SQLiteConn), stmts: map[string]*cachedStmt{}}, nil
}

// Driver implements driver.Connector.
func (c sqliteConnector) Driver() driver.Driver { return c.drv }

// stmtCacheConn is a SQLite connection that executes a single statement through a prepared
// statement it keeps, keyed by the SQL text. database/sql uses a connection from one goroutine
// at a time; mu guards the cache all the same, since rows are closed by whoever reads them.
type stmtCacheConn struct {
	*sqlite3.SQLiteConn
	mu    sync.Mutex
	stmts map[string]*cachedStmt
	hits  int // statements run from the cache, for tests
	runs  int // statements run, for benchmarks
}

type cachedStmt struct {
	st   *sqlite3.SQLiteStmt
	busy bool // rows of it are open: the statement cannot run again until they close
}

var (
	_ driver.ExecerContext  = (*stmtCacheConn)(nil)
	_ driver.QueryerContext = (*stmtCacheConn)(nil)
)

// cacheable reports whether query can be kept: one statement (multi-statement scripts, like
// migrations, go to SQLite whole), and for Exec none that returns rows, since an Exec leaves a
// statement that returned a row unfinished, holding its transaction open until it is reset.
func cacheable(query string, exec bool) bool {
	if strings.IndexByte(query, ';') >= 0 {
		return false
	}
	if !exec {
		return true
	}
	q := strings.ToUpper(strings.TrimSpace(query))
	return !strings.HasPrefix(q, "SELECT") && !strings.HasPrefix(q, "WITH") &&
		!strings.HasPrefix(q, "PRAGMA") && !strings.Contains(q, "RETURNING")
}

// take returns the kept statement for query, preparing it when it is new, marked busy; nil when
// query is not to be kept or its statement is busy (the caller then lets SQLite prepare anew).
func (c *stmtCacheConn) take(ctx context.Context, query string, exec bool) (*cachedStmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs++
	if !cacheable(query, exec) {
		return nil, nil
	}
	if cs := c.stmts[query]; cs != nil {
		if cs.busy {
			return nil, nil
		}
		cs.busy = true
		c.hits++
		return cs, nil
	}
	if len(c.stmts) >= maxCachedStmts {
		return nil, nil
	}
	st, err := c.SQLiteConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	cs := &cachedStmt{st: st.(*sqlite3.SQLiteStmt), busy: true}
	c.stmts[query] = cs
	return cs, nil
}

func (c *stmtCacheConn) release(cs *cachedStmt) {
	c.mu.Lock()
	cs.busy = false
	c.mu.Unlock()
}

// ExecContext implements driver.ExecerContext.
func (c *stmtCacheConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	cs, err := c.take(ctx, query, true)
	if err != nil {
		return nil, err
	}
	if cs == nil {
		return c.SQLiteConn.ExecContext(ctx, query, args)
	}
	defer c.release(cs)
	return cs.st.ExecContext(ctx, args)
}

// QueryContext implements driver.QueryerContext. The statement is busy until its rows close
// (closing them resets it).
func (c *stmtCacheConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	cs, err := c.take(ctx, query, false)
	if err != nil {
		return nil, err
	}
	if cs == nil {
		return c.SQLiteConn.QueryContext(ctx, query, args)
	}
	rows, err := cs.st.QueryContext(ctx, args)
	if err != nil {
		c.release(cs)
		return nil, err
	}
	return &cachedRows{SQLiteRows: rows.(*sqlite3.SQLiteRows), release: func() { c.release(cs) }}, nil
}

// Close implements driver.Conn: the kept statements are finalized before the connection.
func (c *stmtCacheConn) Close() error {
	c.mu.Lock()
	var errs []error
	for q, cs := range c.stmts {
		errs = append(errs, cs.st.Close())
		delete(c.stmts, q)
	}
	c.mu.Unlock()
	return errors.Join(append(errs, c.SQLiteConn.Close())...)
}

// cachedRows are the rows of a kept statement; closing them frees the statement for its next run.
// The SQLite rows are embedded as they are, so database/sql still finds their column types.
type cachedRows struct {
	*sqlite3.SQLiteRows
	once    sync.Once
	release func()
}

// Close implements driver.Rows.
func (r *cachedRows) Close() error {
	err := r.SQLiteRows.Close()
	r.once.Do(r.release)
	return err
}
