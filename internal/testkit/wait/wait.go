// Package wait polls a condition in tests until it holds, with a deadline generous enough for
// a busy 2-core CI machine. A test waits for what a user would see (a message sent, a row
// written), never for a fixed time; when the deadline passes, the failure says what was awaited
// and what was last seen.
//
// Inside a testing/synctest bubble the polling sleeps advance the bubble's fake clock, so the
// deadline is in fake time there; prefer synctest.Wait when everything runs in the bubble.
package wait

import (
	"errors"
	"testing"
	"time"
)

// Deadline is how long Until and For poll before they fail the test.
const Deadline = 30 * time.Second

// interval is the pause between two checks.
const interval = 5 * time.Millisecond

// errNotYet is what For reports for a condition that never held.
var errNotYet = errors.New("the condition never held")

// Until calls check until it returns nil, and fails t (with what was awaited and check's last
// error, which should say what it saw) when Deadline passes first.
func Until(t testing.TB, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(Deadline)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s; last seen: %v", Deadline, what, err)
		}
		time.Sleep(interval)
	}
}

// For calls cond until it returns true, and fails t naming what was awaited when Deadline passes
// first. Use Until when the failure should show what was last seen.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Until(t, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}
