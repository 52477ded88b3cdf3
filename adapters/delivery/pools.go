package delivery

import (
	"context"
	"time"

	"relaybot/adapters"
)

// pool names which of the engine's bot-wide budgets a request draws on. A platform with a paid
// broadcast (Telegram's allow_paid_broadcast) has two: the paid one, Options.Paid, for the
// requests that carry it (new messages and files), and the free one, Limits.Global, for the
// rest (drafts, edits, deletions, typing). Without Options.Paid both names are one budget.
type pool uint8

// The bot-wide pools.
const (
	poolFree pool = iota // Limits.Global: requests without paid broadcast
	poolPaid             // Options.Paid: the sends that carry paid broadcast
	poolCount
)

// typingPool is where a typing indicator takes its bot-wide place: the paid pool when there is
// one. A platform with a paid broadcast (Telegram) does not count chat actions against its
// free budget, and every turn starts with one: in the free pool they took 18 of its 30 places
// a second at 100 chats, which the drafts and edits need. Without a paid pool it is the one
// pool, which the platform (Discord) counts them against.
const typingPool = poolPaid

// withPaid gives the scheduler a paid pool of rate beside its free one (Limits.Global); a zero
// rate leaves it one pool. Each pool spaces its previews over its own window (bucket.even): a
// free pool of 30 a second that no longer carries the sends has room for a preview every
// 37 ms, where the slack added to every gap would allow one every 86 ms.
func (s *scheduler) withPaid(rate adapters.Rate) *scheduler {
	if rate.N <= 0 || rate.Per <= 0 {
		return s
	}
	s.paidRate = rate
	s.pools[poolPaid] = &bucket{rate: rate, slack: s.slack, even: true}
	s.pools[poolFree].even = true
	return s
}

// split reports whether the scheduler has a paid pool apart from the free one.
func (s *scheduler) split() bool { return s.pools[poolPaid] != s.pools[poolFree] }

// sendPool is the pool of a request that posts a new message or files: the paid one when the
// engine has it (the platform's Messenger marks its sends as paid broadcast), else the only one.
func (e *Engine) sendPool() pool {
	if e.sched.split() {
		return poolPaid
	}
	return poolFree
}

// A preview that starts a new message (a paid send) also waits until the free pool has room for
// a preview, though it takes no place there, and while as many such messages are open (their
// replies not ended) as the free pool takes in one window: the message's later text, its final
// one included, can only come as edits, in the free pool. While that pool is full or committed
// (the finals of many groups' answers at 30 a second), a reply that has shown nothing yet
// waits, and its final text goes out as a new message in the paid pool instead of one more edit
// queued in the free one: at 1,000 group chats, starting every message early made the finals
// wait 30 s (p99), and 100 groups answering at once 2.2 s.

// openMax is how many messages started as previews may be open at once: the free pool's
// budget of one window (this replica's share of it).
func (s *scheduler) openMax() int { return max(s.pools[poolFree].rate.N, 1) }

// opened counts a message the reply is starting as a preview in the paid pool. The count is
// given back when the reply finishes, or when its context ends should it never finish.
func (r *Reply) opened() {
	if r.opens.Add(1) == 1 {
		context.AfterFunc(r.ctx, r.closeOpens)
	}
	s := r.e.sched
	s.mu.Lock()
	s.open++
	s.mu.Unlock()
}

// closeOpens gives back the messages the reply opened; later calls do nothing.
func (r *Reply) closeOpens() {
	n := r.opens.Swap(0)
	if n == 0 {
		return
	}
	s := r.e.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open -= int(n)
	s.dispatchLocked()
}

// poolsReady works out, for each pool, the earliest time a request of the given priority may
// go through it; with one pool both entries are the same.
func (s *scheduler) poolsReady(now time.Time, final bool, at *[poolCount]time.Time) {
	at[poolFree] = s.pools[poolFree].readyAt(now, final)
	if s.split() {
		at[poolPaid] = s.pools[poolPaid].readyAt(now, final)
	} else {
		at[poolPaid] = at[poolFree]
	}
}

// stepPool is the pool of the preview request st: a new message is a send, everything else
// (a draft, an edit) draws on the free pool.
func (r *Reply) stepPool(st step) pool {
	if !st.draft && st.i >= len(r.msgs) {
		return r.e.sendPool()
	}
	return poolFree
}

// post is call for a request that posts a new message or files: in the paid pool when the
// engine has one.
func (r *Reply) post(ctx context.Context, fn func(context.Context) error) error {
	return r.e.do(workContext{Context: ctx, work: r.ctx}, r.chat, ClassMessage, false, &r.took, r.e.sendPool(), fn)
}
