package store

import (
	"database/sql/driver"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// Transient reports whether err is the database being away before the statement reached it (a
// connection refused or lost before anything was sent, a server shutting down or starting up),
// so that trying the write again cannot make it land twice. A refusal (a turn already ended, a
// constraint) is not transient, and neither is a connection lost mid-statement: the write may
// have committed.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe):
		// 57P01-57P03: the server shutting down, crashed, or not yet accepting connections;
		// the transaction it ended did not commit.
		return pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	case errors.As(err, &ce), errors.Is(err, driver.ErrBadConn):
		return true
	}
	return pgconn.SafeToRetry(err)
}
