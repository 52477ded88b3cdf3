package delivery

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
)

// ErrClosed is returned for deliveries still waiting when the Engine is closed.
var ErrClosed = errors.New("delivery engine closed")

// bucket is one budget: at most rate.N requests in any window of rate.Per (plus slack), with
// previews also spaced rate.Per/(rate.N-1) apart and never taking the last slot of a window,
// which stays free for final messages. A 429 blocks the bucket until blockedUntil.
//
// A request's place in the window starts when it is granted but only ends one window after its
// answer came back: the platform counts it when it arrives, which can be any moment in between,
// so a slow request never lets the next one through early.
type bucket struct {
	rate         adapters.Rate
	slack        time.Duration
	hist         []*slot // requests in the current window, in grant order
	blockedUntil time.Time
	waiters      int
	// even spreads the previews over the window widened by slack, (Per+slack)/(N-kept) apart,
	// instead of Per/(N-kept)+slack: a bot-wide pool beside a paid one (pools.go).
	even bool
	// paced: a chat's drafts (drafts.go). No window: a request waits for the previous one's
	// answer and goes no sooner than rate.Per after it was granted; a 429 widens rate.Per.
	paced bool
}

// slot is one granted request in a bucket's window.
type slot struct {
	granted  time.Time
	done     time.Time // zero while the request is in flight
	inflight bool
	// aside: a request taken only when a place was free (a typing indicator); it fills its
	// place in the window but does not space the previews.
	aside bool
}

func (b *bucket) trim(now time.Time) {
	win := b.rate.Per + b.slack
	keep := b.hist[:0]
	for _, sl := range b.hist {
		if sl.inflight || now.Sub(sl.done) < win {
			keep = append(keep, sl)
		}
	}
	for i := len(keep); i < len(b.hist); i++ {
		b.hist[i] = nil
	}
	b.hist = keep
}

// never is a time later than any real wake-up: the bucket waits for a request to come back.
var never = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// readyAt returns the earliest time a request of the given priority may go through this bucket.
func (b *bucket) readyAt(now time.Time, final bool) time.Time {
	t := now
	if b.blockedUntil.After(t) {
		t = b.blockedUntil
	}
	if b.rate.N <= 0 || b.rate.Per <= 0 {
		return t
	}
	b.trim(now)
	if b.paced {
		return b.pacedAt(t)
	}
	win := b.rate.Per + b.slack
	need := 1
	if !final {
		need += b.kept() // keep places of every window for finals
	}
	allowed := b.rate.N - need // requests that may already be in the window
	if over := len(b.hist) - allowed; over > 0 {
		// The over-th window entry to expire decides; requests in flight have not started to.
		var buf [64]time.Time
		ends := buf[:0]
		for _, sl := range b.hist {
			if !sl.inflight {
				ends = append(ends, sl.done.Add(win))
			}
		}
		if len(ends) < over {
			return never
		}
		slices.SortFunc(ends, time.Time.Compare)
		if at := ends[over-1]; at.After(t) {
			t = at
		}
	}
	if !final {
		// Previews share the window's places but the one kept for finals: spaced evenly over
		// them, the text moves at a steady pace instead of two quick steps and a long stall
		// while the window drains.
		gap := b.rate.Per/time.Duration(max(b.rate.N-b.kept(), 1)) + b.slack
		if b.even {
			gap = (b.rate.Per + b.slack) / time.Duration(max(b.rate.N-b.kept(), 1))
		}
		for i := len(b.hist) - 1; i >= 0; i-- {
			if b.hist[i].aside {
				continue
			}
			if at := b.hist[i].granted.Add(gap); at.After(t) {
				t = at
			}
			break
		}
	}
	return t
}

// kept is how many places of every window previews leave to finals: one, and two where a
// window holds five or more (a Discord channel, a Telegram group). A final whose live part
// outgrew its message takes two requests (the part finished, the next one posted); with one
// place kept the second waited for the window to drain (0.4-0.7 s on Discord at 5 ms a chunk).
// A window of two or three keeps one: two would leave previews one place or none.
func (b *bucket) kept() int {
	switch {
	case b.rate.N >= 5:
		return 2
	case b.rate.N >= 2:
		return 1
	}
	return 0
}

func (b *bucket) take(now time.Time) *slot {
	if b.rate.N <= 0 || b.rate.Per <= 0 {
		return nil
	}
	sl := &slot{granted: now, inflight: true}
	b.hist = append(b.hist, sl)
	return sl
}

// idle reports whether the bucket holds no state worth keeping.
func (b *bucket) idle(now time.Time) bool {
	b.trim(now)
	return len(b.hist) == 0 && b.waiters == 0 && !b.blockedUntil.After(now)
}

// ticket is one request for a platform call slot.
type ticket struct {
	final bool
	// first: a preview that shows a reply's first words (the reply shows nothing yet); it goes
	// before the other previews.
	first bool
	pool  pool // the bot-wide pool it draws on
	// key is the ticket's chat; shared: the chat's own budgets are reserved with the other
	// replicas (sharedchat.go), so the ticket waits on the global bucket only.
	key     string
	shared  bool
	seq     uint64
	buckets []*bucket
	granted chan struct{} // closed when granted (nil for a ticket with then)
	// then, when set, is called instead of closing granted, on a goroutine of its own: with
	// the release func once granted, or with the error that ended the wait (acquireFunc).
	then    func(release func(), err error)
	stopCtx func() bool // stops the ticket's context watch (acquireFunc)
	err     error       // set before granted is closed when the engine closes
	done    bool
	slots   []*slot // the window places taken when granted
}

// scheduler hands out call slots across every reply of an Engine, finals first, then previews in
// arrival order, each only when all of its buckets allow it.
type scheduler struct {
	limits  adapters.Limits
	isGroup func(chat.Ref) bool
	slack   time.Duration

	mu sync.Mutex
	// pools are the bot-wide budgets, free and paid (pools.go); one bucket under both names
	// without a paid pool.
	pools    [poolCount]*bucket
	paidRate adapters.Rate // the paid pool's own rate, before ShareGlobal divides it
	open     int           // messages started as previews in the paid pool, of replies not ended
	chats    map[string]*bucket
	groups   map[string]*bucket
	drafts   map[string]*bucket // each chat's draft pace (drafts.go)
	// draftEvery is the shortest time between two drafts in a chat (Options.DraftInterval).
	draftEvery time.Duration
	waiting    []*ticket
	seq        uint64
	timer      *time.Timer
	timerAt    time.Time
	closed     bool
	sweeps     int
	// shares are the chats entered with SharedChats (nil without it), under mu.
	shares *chatShares
}

func newScheduler(limits adapters.Limits, isGroup func(chat.Ref) bool, slack time.Duration) *scheduler {
	s := &scheduler{
		limits:  limits,
		isGroup: isGroup,
		slack:   slack,
		chats:   map[string]*bucket{},
		groups:  map[string]*bucket{},
		drafts:  map[string]*bucket{},
	}
	global := &bucket{rate: limits.Global, slack: slack}
	s.pools = [poolCount]*bucket{global, global}
	return s
}

func chatKey(c chat.Ref) string { return c.Chat().String() }

func (s *scheduler) chatBucket(c chat.Ref) *bucket {
	k := chatKey(c)
	b := s.chats[k]
	if b == nil {
		b = &bucket{rate: s.limits.PerChat, slack: s.slack}
		s.chats[k] = b
	}
	return b
}

func (s *scheduler) bucketsFor(c chat.Ref, shared bool, p pool) []*bucket {
	if shared {
		return []*bucket{s.pools[p]}
	}
	bs := []*bucket{s.chatBucket(c), s.pools[p]}
	if s.limits.PerGroup.N > 0 && s.isGroup != nil && s.isGroup(c) {
		k := chatKey(c)
		g := s.groups[k]
		if g == nil {
			g = &bucket{rate: s.limits.PerGroup, slack: s.slack}
			s.groups[k] = g
		}
		bs = append(bs, g)
	}
	return bs
}

// acquire waits for a call slot in chat at final or preview priority, in bot-wide pool p. It
// returns ctx's error, ErrClosed, or, once the slot is granted, a release func to call when
// the request's answer has come back (or it failed).
func (s *scheduler) acquire(ctx context.Context, chat chat.Ref, final bool, p pool) (func(), error) {
	if s.shares == nil {
		return s.acquireLocal(ctx, chat, final, false, p)
	}
	return s.shares.acquire(ctx, chat, final, p)
}

// acquireLocal is acquire on this process's buckets: all of them, or only the global one when
// the chat's own budgets are shared (already reserved) or the request draws on none of a
// chat's (ClassBotWide).
func (s *scheduler) acquireLocal(ctx context.Context, chat chat.Ref, final, shared bool, p pool) (func(), error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.seq++
	t := &ticket{final: final, pool: p, shared: shared, seq: s.seq, buckets: s.bucketsFor(chat, shared, p), granted: make(chan struct{})}
	if s.shares != nil {
		t.key = chatKey(chat)
	}
	for _, b := range t.buckets {
		b.waiters++
	}
	s.waiting = append(s.waiting, t)
	s.dispatchLocked()
	s.mu.Unlock()

	select {
	case <-t.granted:
		if t.err != nil {
			return nil, t.err
		}
		return func() { s.release(t) }, nil
	case <-ctx.Done():
		s.mu.Lock()
		if t.done && t.err != nil {
			s.mu.Unlock()
			return nil, t.err
		}
		granted := t.done
		if !granted {
			s.removeLocked(t)
		}
		s.mu.Unlock()
		if granted {
			s.release(t) // granted meanwhile: the place is given back unused
		}
		return nil, ctx.Err()
	}
}

// acquireFunc is acquire without a goroutine waiting for the slot: then runs on a goroutine of
// its own, with the release func once the slot is granted, or with ctx's error or ErrClosed.
// then runs exactly once. With chats shared among replicas it waits as acquire does, on a
// goroutine.
func (s *scheduler) acquireFunc(ctx context.Context, chat chat.Ref, final, first bool, p pool, then func(release func(), err error)) {
	s.mu.Lock()
	if s.shares != nil || s.closed {
		s.mu.Unlock()
		go func() { then(s.acquire(ctx, chat, final, p)) }()
		return
	}
	s.enqueueFuncLocked(ctx, &ticket{final: final, first: first, pool: p, buckets: s.bucketsFor(chat, false, p), then: then})
	s.mu.Unlock()
}

// enqueueFuncLocked puts ticket t, whose then is set, in the queue and watches ctx for it; with
// s.mu held.
func (s *scheduler) enqueueFuncLocked(ctx context.Context, t *ticket) {
	s.seq++
	t.seq = s.seq
	then := t.then
	for _, b := range t.buckets {
		b.waiters++
	}
	s.waiting = append(s.waiting, t)
	t.stopCtx = context.AfterFunc(ctx, func() {
		s.mu.Lock()
		waiting := !t.done
		if waiting {
			s.removeLocked(t)
		}
		s.mu.Unlock()
		if waiting {
			then(nil, ctx.Err())
		}
	})
	s.dispatchLocked()
}

// grantLocked tells t's owner that the wait is over (t.err set when refused); with s.mu held.
func (s *scheduler) grantLocked(t *ticket) {
	if t.then == nil {
		close(t.granted)
		return
	}
	t.stopCtx()
	if t.err != nil {
		go t.then(nil, t.err)
		return
	}
	go t.then(func() { s.release(t) }, nil)
}

// release marks the request's window places as answered now.
func (s *scheduler) release(t *ticket) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, sl := range t.slots {
		sl.inflight = false
		sl.done = now
	}
	t.slots = nil
	s.dispatchLocked()
}

func (s *scheduler) removeLocked(t *ticket) {
	for i, w := range s.waiting {
		if w == t {
			s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
			break
		}
	}
	t.done = true
	for _, b := range t.buckets {
		b.waiters--
	}
}

// block stops every request in chat's scope (or all of pool p, when global) until d from now.
func (s *scheduler) block(chat chat.Ref, global bool, d time.Duration, p pool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	until := time.Now().Add(d)
	b := s.pools[p]
	if !global {
		b = s.chatBucket(chat)
		if d := s.drafts[chatKey(chat)]; d != nil && until.After(d.blockedUntil) {
			d.blockedUntil = until // the chat's drafts wait too
		}
	}
	if until.After(b.blockedUntil) {
		b.blockedUntil = until
	}
	s.dispatchLocked()
}

// tryGlobal takes a place in the bot-wide window for a request that is worth sending only now
// (a typing indicator: the platform counts it against the bot's global limit, as Discord does),
// at preview priority in typingPool, without waiting: ok is false when the window has no
// place for it.
func (s *scheduler) tryGlobal() (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	g := s.pools[typingPool]
	if s.closed || g.readyAt(now, false).After(now) {
		return nil, false
	}
	sl := g.take(now)
	if sl == nil {
		return func() {}, true // no global limit
	}
	sl.aside = true
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		sl.inflight = false
		sl.done = time.Now()
		s.dispatchLocked()
	}, true
}

// blocked reports whether a 429 currently holds chat's scope or typingPool.
func (s *scheduler) blocked(chat chat.Ref) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.pools[typingPool].blockedUntil.After(now) {
		return true
	}
	b := s.chats[chatKey(chat)]
	return b != nil && b.blockedUntil.After(now)
}

// dispatchLocked grants every waiting ticket whose buckets allow it, finals first within each
// pool, and arms the timer for the earliest moment the next one may go.
func (s *scheduler) dispatchLocked() {
	if s.closed {
		return
	}
	now := time.Now()
	var next time.Time
	later := func(at time.Time) {
		if at != never && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	var gAt [poolCount]time.Time
	// Finals first, then the first preview of a reply that shows nothing yet (its first words),
	// then the other previews, each in arrival order: a pool busy with the drafts of answers
	// under way still shows a new answer's first words next.
	for _, tier := range [...]struct{ final, first bool }{{true, false}, {false, true}, {false, false}} {
		pass := tier.final
		// Every ticket goes through one bot-wide pool: work out the pools' readiness once per
		// grant, not once per waiting ticket, and stop the pass when every pool is closed.
		s.poolsReady(now, pass, &gAt)
		for i := 0; i < len(s.waiting); {
			t := s.waiting[i]
			if t.final != pass || !pass && t.first != tier.first {
				i++
				continue
			}
			g, held := s.poolAtLocked(t, &gAt)
			if held {
				i++ // until a reply with an open message ends (closeOpen)
				continue
			}
			if g.After(now) {
				later(g)
				if gAt[poolFree].After(now) && gAt[poolPaid].After(now) {
					break
				}
				i++
				continue
			}
			if at := s.chatReadyAt(t, now); at.After(now) {
				later(at)
				i++
				continue
			}
			s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
			s.takeLocked(t, now)
			s.poolsReady(now, pass, &gAt)
		}
	}
	s.sweepLocked(now)
	s.armLocked(now, next)
}

// poolAtLocked is when ticket t's bot-wide pool has room (gAt: each pool's); held says the
// ticket waits for an open message to end instead. A message started as a preview in the paid
// pool waits for the free pool too, which is to carry its edits (see pools.go).
func (s *scheduler) poolAtLocked(t *ticket, gAt *[poolCount]time.Time) (at time.Time, held bool) {
	at = gAt[t.pool]
	if t.pool == poolPaid && !t.final && s.split() {
		if gAt[poolFree].After(at) {
			at = gAt[poolFree]
		}
		if s.open >= s.openMax() {
			return at, true
		}
	}
	return at, false
}

// chatReadyAt is when ticket t's buckets other than its bot-wide pool (the chat's, the group's)
// have room.
func (s *scheduler) chatReadyAt(t *ticket, now time.Time) time.Time {
	global := s.pools[t.pool]
	at := now
	for _, b := range t.buckets {
		if b == global {
			continue
		}
		if r := b.readyAt(now, t.final); r.After(at) {
			at = r
		}
	}
	return at
}

// takeLocked grants ticket t, taken off the waiting list: a slot from each of its buckets.
func (s *scheduler) takeLocked(t *ticket, now time.Time) {
	for _, b := range t.buckets {
		if sl := b.take(now); sl != nil {
			t.slots = append(t.slots, sl)
		}
		b.waiters--
	}
	t.done = true
	s.grantLocked(t)
}

// armLocked sets the wake-up for next (zero: none), unless an earlier one is armed already.
func (s *scheduler) armLocked(now, next time.Time) {
	if next.IsZero() {
		return
	}
	if s.timer != nil && !s.timerAt.IsZero() && !s.timerAt.After(next) && s.timerAt.After(now) {
		return // an earlier wake-up is already armed
	}
	d := next.Sub(now)
	s.timerAt = next
	if s.timer == nil {
		s.timer = time.AfterFunc(d, s.wake)
	} else {
		s.timer.Reset(d)
	}
}

func (s *scheduler) wake() {
	s.mu.Lock()
	s.timerAt = time.Time{}
	s.dispatchLocked()
	s.mu.Unlock()
}

// sweepLocked forgets idle per-chat buckets now and then so the maps do not grow without bound.
func (s *scheduler) sweepLocked(now time.Time) {
	s.sweeps++
	if s.sweeps%1024 != 0 {
		return
	}
	for k, b := range s.chats {
		if b.idle(now) {
			delete(s.chats, k)
		}
	}
	for k, b := range s.groups {
		if b.idle(now) {
			delete(s.groups, k)
		}
	}
	for k, b := range s.drafts {
		if b.idle(now) {
			delete(s.drafts, k) // a widened pace is forgotten with it
		}
	}
}

func (s *scheduler) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	for _, t := range s.waiting {
		t.err = ErrClosed
		t.done = true
		s.grantLocked(t)
	}
	s.waiting = nil
}
