package store

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"gorm.io/gorm"
)

// validText returns s as text both databases accept: invalid UTF-8 becomes U+FFFD and NUL bytes
// are removed (PostgreSQL refuses both in a text column, and in a query parameter). Text that is
// already valid is returned as is, without copying.
func validText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

// validArgs returns args with validText applied to every string (of any string type); args itself when nothing
// changes, else a copy (the caller's slice is left alone).
func validArgs(args []any) []any {
	out := args
	for i, a := range args {
		s, ok := a.(string)
		if !ok {
			// Named string types (an audit status or source) are text too.
			v := reflect.ValueOf(a)
			if v.Kind() != reflect.String {
				continue
			}
			s = v.String()
		}
		if v := validText(s); v != s {
			if &out[0] == &args[0] {
				out = append([]any(nil), args...)
			}
			out[i] = v
		}
	}
	return out
}

// textPool is the connection pool GORM talks to: every statement of the store, writes and reads,
// passes through it, so it is the one place where text becomes valid for both dialects. A page
// with a NUL byte fetched by a tool, or a model answer with broken UTF-8, is stored (cleaned)
// instead of failing the write and, with it, the turn.
type textPool struct {
	db *sql.DB
}

var (
	_ gorm.ConnPool         = textPool{}
	_ gorm.ConnPoolBeginner = textPool{}
	_ gorm.GetDBConnector   = textPool{}
)

// PrepareContext implements gorm.ConnPool. The store does not prepare statements (arguments of a
// prepared statement would bypass validArgs); it is here because the interface asks for it.
func (p textPool) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return nil, fmt.Errorf("store: prepared statements are not used: %q", query)
}

// ExecContext implements gorm.ConnPool.
func (p textPool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return p.db.ExecContext(ctx, query, validArgs(args)...)
}

// QueryContext implements gorm.ConnPool.
func (p textPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return p.db.QueryContext(ctx, query, validArgs(args)...)
}

// QueryRowContext implements gorm.ConnPool.
func (p textPool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return p.db.QueryRowContext(ctx, query, validArgs(args)...)
}

// BeginTx implements gorm.ConnPoolBeginner: a transaction's statements pass through validArgs too.
func (p textPool) BeginTx(ctx context.Context, opts *sql.TxOptions) (gorm.ConnPool, error) {
	tx, err := p.db.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &textTx{tx: tx}, nil
}

// GetDBConn implements gorm.GetDBConnector.
func (p textPool) GetDBConn() (*sql.DB, error) { return p.db, nil }

// Ping lets GORM check the connection at Open, as it does with a *sql.DB.
func (p textPool) Ping() error { return p.db.Ping() }

// textTx is a transaction of textPool.
type textTx struct {
	tx *sql.Tx
}

var _ gorm.TxCommitter = (*textTx)(nil)

// PrepareContext implements gorm.ConnPool; see textPool.PrepareContext.
func (t *textTx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return nil, fmt.Errorf("store: prepared statements are not used: %q", query)
}

// ExecContext implements gorm.ConnPool.
func (t *textTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, query, validArgs(args)...)
}

// QueryContext implements gorm.ConnPool.
func (t *textTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, query, validArgs(args)...)
}

// QueryRowContext implements gorm.ConnPool.
func (t *textTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, query, validArgs(args)...)
}

// Commit implements gorm.TxCommitter.
func (t *textTx) Commit() error { return t.tx.Commit() }

// Rollback implements gorm.TxCommitter.
func (t *textTx) Rollback() error { return t.tx.Rollback() }
