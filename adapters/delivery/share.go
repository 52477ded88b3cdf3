package delivery

// ShareGlobal divides the bot-wide budget (Limits.Global, Telegram's 30 a second) among n
// replicas delivering for the same bot, so that together they stay within it; n <= 1 gives this
// engine the whole budget again. Per-chat and per-group budgets are not divided. Safe to call at
// any time: requests waiting are granted at once if the new budget allows.
func (e *Engine) ShareGlobal(n int) { e.sched.shareGlobal(n) }

func (s *scheduler) shareGlobal(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rate := s.limits.Global
	if n > 1 && rate.N > 0 {
		rate.N = max(1, rate.N/n)
	}
	s.global.rate = rate
	if !s.closed {
		s.dispatchLocked()
	}
}
