package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestTransientRetriesOnlyWritesThatCannotHaveLanded tells apart the errors of a database that is
// away before a statement reached it (tried again) from refusals and from errors after which the
// write may have committed (never tried again: it could land twice).
func TestTransientRetriesOnlyWritesThatCannotHaveLanded(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"refused connection", fmt.Errorf("start turn: %w", &pgconn.ConnectError{}), true},
		{"bad pooled connection", fmt.Errorf("finish: %w", driver.ErrBadConn), true},
		{"server shutting down", &pgconn.PgError{Code: "57P01"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"turn already ended", errors.New("store: turn 3 is already interrupted"), false},
		{"deadline mid-statement", context.DeadlineExceeded, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Transient(tc.err); got != tc.want {
				t.Errorf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
