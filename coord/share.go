package coord

import (
	"log/slog"
	"sync"
)

// share divides the platforms' bot-wide budgets (Telegram's 30 a second) among the live
// replicas, so that together they draw no more 429s than one process. The heartbeat tells it
// how many replicas are live while the adapters are being built and handing it their engines.
type share struct {
	log *slog.Logger

	mu      sync.Mutex
	n       int
	engines []Engine
}

// add divides e's budget by the replicas known so far, and by later counts.
func (s *share) add(e Engine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.engines = append(s.engines, e)
	if s.n > 1 {
		e.ShareGlobal(s.n)
	}
}

// set records that n replicas are live; a change is logged, so an operator (or a test) sees
// when a replica that joined or left was counted.
func (s *share) set(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n == s.n {
		return
	}
	s.n = n
	for _, e := range s.engines {
		e.ShareGlobal(n)
	}
	s.log.Info("platform budgets shared among the live replicas", "replicas", n)
}
