package wait

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// recorder is a testing.TB whose Fatalf records the message and ends the calling goroutine,
// as the real one does.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestUntilReturnsOnceTheCheckPasses(t *testing.T) {
	var calls atomic.Int32
	Until(t, "the third call", func() error {
		if calls.Add(1) < 3 {
			return errors.New("not the third call")
		}
		return nil
	})
	if got := calls.Load(); got != 3 {
		t.Fatalf("check called %d times, want 3", got)
	}
}

func TestUntilReportsWhatWasLastSeenWhenTheDeadlinePasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{TB: t}
		done := make(chan struct{})
		n := 0
		go func() {
			defer close(done)
			Until(r, "the reply", func() error {
				n++
				return fmt.Errorf("%d messages", n)
			})
		}()
		<-done
		if !strings.Contains(r.msg, "the reply") || !strings.Contains(r.msg, fmt.Sprintf("last seen: %d messages", n)) {
			t.Fatalf("failure %q does not name what was awaited and the last error (%d messages)", r.msg, n)
		}
	})
}

func TestForNamesTheConditionThatNeverHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			For(r, "the typing indicator", func() bool { return false })
		}()
		<-done
		if !strings.Contains(r.msg, "the typing indicator") {
			t.Fatalf("failure %q does not name what was awaited", r.msg)
		}
	})
}

// heldIn blocks until release closes: a function a test's goroutine waits in.
func heldIn(release <-chan struct{}) { <-release }

func TestInsideSeesAGoroutineWaitingInAFunctionAndOnlyThere(t *testing.T) {
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		heldIn(release)
	}()
	For(t, "the goroutine to wait in heldIn", func() bool { return Inside("wait.heldIn", "TestInsideSees") })
	if Inside("wait.heldIn", "no.suchFunction") {
		t.Error("Inside matched a goroutine that is not in every frame asked")
	}
	close(release)
	<-done
	if Inside("wait.heldIn") {
		t.Error("Inside still sees the goroutine after it returned")
	}
}
