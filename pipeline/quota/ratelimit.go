package quota

import (
	"sync"
	"time"
)

// RateLimiter is a fixed-window counter per key (a user): at most limit events per window.
// Windows start at a key's first event, so a quiet user gets a full window.
type RateLimiter struct {
	limit  int
	window time.Duration

	mu      sync.Mutex
	windows map[string]*rateWindow
	sweep   time.Time // when expired windows were last removed
}

type rateWindow struct {
	start    time.Time
	count    int
	notified bool // the user was told about this window's limit
}

// NewRateLimiter returns a limiter of limit events per window (limit 0: no limit).
func NewRateLimiter(limit int, window time.Duration) *RateLimiter {
	return &RateLimiter{limit: limit, window: window, windows: map[string]*rateWindow{}}
}

// Allow counts one event of key at now. It returns whether the event is within the limit and,
// when it is not, whether this is the first refusal of the window (the one the user is told of:
// later refusals in the same window stay quiet so a flood is not answered by a flood).
func (r *RateLimiter) Allow(key string, now time.Time) (ok, first bool) {
	if r == nil || r.limit <= 0 {
		return true, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.sweep) >= r.window {
		for k, w := range r.windows {
			if now.Sub(w.start) >= r.window {
				delete(r.windows, k)
			}
		}
		r.sweep = now
	}
	w := r.windows[key]
	if w == nil || now.Sub(w.start) >= r.window {
		w = &rateWindow{start: now}
		r.windows[key] = w
	}
	if w.count < r.limit {
		w.count++
		return true, false
	}
	first = !w.notified
	w.notified = true
	return false, first
}
