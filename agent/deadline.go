package agent

import (
	"sync"
	"sync/atomic"
	"time"
)

// dataDeadline calls expire once a model call has had no data for d. A chunk only records when
// it came (touch); the timer, armed for d, looks when it fires and waits on for what is left.
// A Timer.Reset for every chunk took the timer heap's lock each time: 1.3% of the bot's CPU at
// 100 chats.
type dataDeadline struct {
	d      time.Duration
	start  time.Time
	last   atomic.Int64 // the latest data, as time since start
	expire func()

	mu      sync.Mutex // guards timer and stopped against the timer's own goroutine
	timer   *time.Timer
	stopped bool
}

func startDataDeadline(d time.Duration, expire func()) *dataDeadline {
	dd := &dataDeadline{d: d, start: time.Now(), expire: expire}
	dd.mu.Lock()
	dd.timer = time.AfterFunc(d, dd.fire)
	dd.mu.Unlock()
	return dd
}

// touch records that data came now.
func (dd *dataDeadline) touch() { dd.last.Store(int64(time.Since(dd.start))) }

func (dd *dataDeadline) fire() {
	dd.mu.Lock()
	defer dd.mu.Unlock()
	if dd.stopped {
		return
	}
	if left := dd.left(time.Since(dd.start)); left > 0 {
		dd.timer.Reset(left)
		return
	}
	dd.stopped = true
	dd.expire()
}

// left is how long the deadline has still to run at now (time since start); 0 when it passed.
func (dd *dataDeadline) left(now time.Duration) time.Duration {
	return max(0, time.Duration(dd.last.Load())+dd.d-now)
}

// stop ends the deadline; expire is not called after it returns.
func (dd *dataDeadline) stop() {
	dd.mu.Lock()
	defer dd.mu.Unlock()
	dd.stopped = true
	dd.timer.Stop()
}
