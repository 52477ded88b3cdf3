package agent

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestAModelCallTimesOutATimeoutAfterItsLastData(t *testing.T) {
	for _, c := range []struct {
		name    string
		touches []time.Duration // when data came, from the start
		want    time.Duration   // when the call ends
	}{
		{"no data at all", nil, time.Second},
		{"data once", []time.Duration{300 * time.Millisecond}, 1300 * time.Millisecond},
		{"a stream longer than the timeout", []time.Duration{600 * time.Millisecond, 1200 * time.Millisecond, 1800 * time.Millisecond, 2400 * time.Millisecond}, 3400 * time.Millisecond},
		{"data just before the timeout", []time.Duration{999 * time.Millisecond}, 1999 * time.Millisecond},
		{"many chunks at once", []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}, 1100 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				var ended atomic.Int64 // the timer's goroutine writes it
				dd := startDataDeadline(time.Second, func() { ended.Store(int64(time.Since(start))) })
				defer dd.stop()
				for _, at := range c.touches {
					time.Sleep(at - time.Since(start))
					dd.touch()
				}
				time.Sleep(c.want - time.Since(start) - time.Millisecond)
				synctest.Wait()
				if got := time.Duration(ended.Load()); got != 0 {
					t.Fatalf("the call ended after %s, want %s", got, c.want)
				}
				time.Sleep(time.Millisecond)
				synctest.Wait()
				if got := time.Duration(ended.Load()); got != c.want {
					t.Errorf("the call ended after %s, want %s", got, c.want)
				}
			})
		})
	}
}

func TestAStoppedModelDeadlineNeverEndsTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ended atomic.Bool
		dd := startDataDeadline(time.Second, func() { ended.Store(true) })
		time.Sleep(500 * time.Millisecond)
		dd.touch()
		dd.stop()
		time.Sleep(time.Hour)
		synctest.Wait()
		if ended.Load() {
			t.Error("the call was ended after it finished")
		}
	})
}
