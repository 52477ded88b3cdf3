package store

import (
	"context"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestRetryTriesAWriteAgainOnlyWhenThatIsSafe: a write the database was away for is tried again
// with back-off until it lands; an idempotent one also after a lost connection or a try that ran
// out of time; a refusal, or a non-idempotent write whose outcome is unknown, is tried once; and
// no write is tried past its bound.
func TestRetryTriesAWriteAgainOnlyWhenThatIsSafe(t *testing.T) {
	away := &pgconn.PgError{Code: "57P01"}
	hang := errors.New("hang") // the try blocks until its deadline
	cases := []struct {
		name       string
		idempotent bool
		fails      []error // what the tries return before one lands
		bound      time.Duration
		wantTries  int
		wantErr    bool
		wantTook   time.Duration // on the bubble's clock
	}{
		{"away then back", false, []error{away, away, away}, time.Minute, 4, false, 200*time.Millisecond + 400*time.Millisecond + 800*time.Millisecond},
		{"refused", true, []error{&pgconn.PgError{Code: "23505"}}, time.Minute, 1, true, 0},
		{"connection lost mid-statement, not idempotent", false, []error{io.ErrUnexpectedEOF}, time.Minute, 1, true, 0},
		{"connection lost mid-statement, idempotent", true, []error{io.ErrUnexpectedEOF}, time.Minute, 2, false, 200 * time.Millisecond},
		{"try ran out of time, not idempotent", false, []error{hang}, time.Minute, 1, true, 10 * time.Second},
		{"try ran out of time, idempotent", true, []error{hang}, time.Minute, 2, false, 10*time.Second + 200*time.Millisecond},
		{"away past the bound", false, []error{away, away, away, away, away, away, away, away, away, away}, 8 * time.Second, 6, true, 8 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), tc.bound)
				defer cancel()
				tries := 0
				start := time.Now()
				err := Retry(ctx, Write{What: "a test write", Idempotent: tc.idempotent}, func(ctx context.Context) error {
					tries++
					if tries > len(tc.fails) {
						return nil
					}
					if f := tc.fails[tries-1]; f != hang {
						return f
					}
					<-ctx.Done()
					return ctx.Err()
				})
				took := time.Since(start)
				if tries != tc.wantTries || (err != nil) != tc.wantErr || took != tc.wantTook {
					t.Fatalf("%d tries, err %v, took %s; want %d tries, an error %v, %s", tries, err, took, tc.wantTries, tc.wantErr, tc.wantTook)
				}
			})
		})
	}
}

// TestBoundKeepsTheLaterDeadlineAndOutlivesCancellation: a write bounded by a cancelled turn's
// context still runs, until the turn's deadline or the least time given, whichever is later.
func TestBoundKeepsTheLaterDeadlineAndOutlivesCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		turn, cancel := context.WithTimeout(context.Background(), time.Minute)
		cancel()
		for _, tc := range []struct {
			least, want time.Duration
		}{{10 * time.Second, time.Minute}, {2 * time.Minute, 2 * time.Minute}} {
			ctx, stop := Bound(turn, tc.least)
			d, ok := ctx.Deadline()
			if ctx.Err() != nil || !ok || time.Until(d) != tc.want {
				t.Errorf("Bound(cancelled turn, %s): err %v, deadline in %s; want alive until %s", tc.least, ctx.Err(), time.Until(d), tc.want)
			}
			stop()
		}
		ctx, stop := Bound(context.Background(), 5*time.Second)
		defer stop()
		if d, ok := ctx.Deadline(); !ok || time.Until(d) != 5*time.Second {
			t.Errorf("Bound without a deadline: %s, want 5s", time.Until(d))
		}
	})
}
