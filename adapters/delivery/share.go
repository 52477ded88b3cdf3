package delivery

import "relaybot/adapters"

// ShareGlobal divides the bot-wide budgets (Limits.Global, Telegram's free 30 a second, and
// Options.Paid, its paid broadcast) among n replicas delivering for the same bot, so that
// together they stay within each; n <= 1 gives this engine the whole budgets again. Per-chat and
// per-group budgets are not divided. Safe to call at any time: requests waiting are granted at
// once if the new budgets allow.
func (e *Engine) ShareGlobal(n int) { e.sched.shareGlobal(n) }

func (s *scheduler) shareGlobal(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pools[poolFree].rate = shareRate(s.limits.Global, n)
	if s.split() {
		s.pools[poolPaid].rate = shareRate(s.paidRate, n)
	}
	if !s.closed {
		s.dispatchLocked()
	}
}

// shareRate is one of n replicas' share of rate.
func shareRate(rate adapters.Rate, n int) adapters.Rate {
	if n > 1 && rate.N > 0 {
		rate.N = max(1, rate.N/n)
	}
	return rate
}
