package delivery

import (
	"context"
	"errors"
	"log/slog"
	"relaybot/chat"
	"time"
)

// SharedChats shares each chat's own budgets (Limits.PerChat and Limits.PerGroup) with the other
// replicas of the bot that deliver to the same chat, so that together they stay within them.
// Chats are named "platform:chat id". Its methods may block on a database; the engine calls
// them without holding its locks, and per request only for chats another replica delivers to.
//
// A chat one replica delivers to alone is paced in its memory, as by a single process: it
// Enters the chat on the first request after a quiet spell (learning the requests other
// replicas made there lately) and Publishes its own requests when it leaves the chat after
// Options.ShareLinger without any. When another replica enters the chat meanwhile, this one
// finds it among the Contended chats (asked every Options.ShareCheck), Publishes its requests
// and from then on Reserves every request of the chat, as the newcomer does.
type SharedChats interface {
	// Enter records that this replica delivers to chat. It returns how long ago each recent
	// request of any replica in the chat was (negative: reserved ahead), and whether another
	// replica delivers to the chat too; then this one shares it from the start.
	Enter(ctx context.Context, chat string) (ago []time.Duration, shared bool, err error)
	// Contended lists the chats this replica entered and paces alone that another replica
	// delivers to as well.
	Contended(ctx context.Context) ([]string, error)
	// Publish hands over the requests this replica made in chat on its own (how long ago each
	// was); then it shares the chat, or with leave no longer delivers to it.
	Publish(ctx context.Context, chat string, ago []time.Duration, leave bool) error
	// Reserve takes the next request's place in a shared chat, not before notBefore from now,
	// and returns how long to wait for it. It may wait for another replica to hand over first.
	Reserve(ctx context.Context, chat string, group bool, notBefore time.Duration) (time.Duration, error)
}

// errShared fails a ticket waiting on a chat's own buckets when the chat becomes shared: its
// request is reserved with the other replicas instead.
var errShared = errors.New("delivery: chat now shared with other replicas")

// chatShare is one chat entered with SharedChats; fields under the scheduler's mu.
type chatShare struct {
	shared bool
	// ready is nil when the chat is settled; otherwise it is closed once entering, handing
	// over or leaving is done, and requests wait for it.
	ready chan struct{}
	users int       // requests between acquire and release
	last  time.Time // when the last one was released
	// handover is this replica's history still to hand over (a Publish failed): non-nil until
	// the other replicas have it.
	handover []time.Duration
}

// chatShares are the chats an Engine delivers to with SharedChats.
type chatShares struct {
	s       *scheduler
	sc      SharedChats
	log     *slog.Logger
	isGroup func(chat.Ref) bool
	linger  time.Duration
	done    <-chan struct{} // the engine's
	chats   map[string]*chatShare
	stray   bool // an Enter failed: the database may list this replica in a chat it did not enter
}

// shareTimeout bounds one SharedChats call; a call that runs out leaves the chat paced alone.
const shareTimeout = 10 * time.Second

// acquire is scheduler.acquire for an engine with SharedChats.
func (c *chatShares) acquire(ctx context.Context, chat chat.Ref, final bool, p pool) (func(), error) {
	k := chatKey(chat)
	for {
		cs, err := c.enter(ctx, k, chat)
		if err != nil {
			return nil, err
		}
		if cs == nil {
			return c.s.acquireLocal(ctx, chat, final, false, p)
		}
		shared := cs.shared
		if shared {
			if err := c.reserve(ctx, k, chat); err != nil {
				if ctx.Err() != nil || errors.Is(err, ErrClosed) {
					c.release(cs)
					return nil, err
				}
				c.log.Warn("no place reserved with the other replicas; pacing the chat alone", "chat", k, "err", err)
				shared = false
			}
		}
		rel, err := c.s.acquireLocal(ctx, chat, final, shared, p)
		if err != nil {
			c.release(cs)
			if errors.Is(err, errShared) {
				continue
			}
			return nil, err
		}
		return func() {
			rel()
			c.release(cs)
		}, nil
	}
}

func (c *chatShares) release(cs *chatShare) {
	c.s.mu.Lock()
	cs.users--
	cs.last = time.Now()
	c.s.mu.Unlock()
}

// enter returns chat k as entered, entering it first if needed; nil when entering failed (the
// chat is then paced alone for this request).
func (c *chatShares) enter(ctx context.Context, k string, chat chat.Ref) (*chatShare, error) {
	s := c.s
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, ErrClosed
		}
		cs := c.chats[k]
		if cs != nil && cs.ready == nil {
			cs.users++
			s.mu.Unlock()
			return cs, nil
		}
		if cs != nil {
			ch := cs.ready
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		cs = &chatShare{ready: make(chan struct{})}
		c.chats[k] = cs
		s.mu.Unlock()

		// Not cut short by the reply: an Enter that lands unread would leave this replica
		// listed in the chat.
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shareTimeout)
		ago, shared, err := c.sc.Enter(ectx, k)
		cancel()
		s.mu.Lock()
		ch := cs.ready
		cs.ready = nil
		if err != nil {
			delete(c.chats, k)
			c.stray = true
			s.mu.Unlock()
			close(ch)
			c.log.Warn("chat budget not shared with the other replicas; pacing it alone", "chat", k, "err", err)
			return nil, nil
		}
		cs.shared = shared
		if !shared {
			c.seedLocked(k, chat, ago)
		}
		cs.users++
		s.mu.Unlock()
		close(ch)
		return cs, nil
	}
}

// seedLocked puts the requests other replicas made in the chat lately into its buckets.
func (c *chatShares) seedLocked(k string, chat chat.Ref, ago []time.Duration) {
	if len(ago) == 0 {
		return
	}
	s := c.s
	now := time.Now()
	bs := []*bucket{s.chatBucket(chat)}
	if s.limits.PerGroup.N > 0 && c.isGroup != nil && c.isGroup(chat) {
		bs = s.bucketsFor(chat, false, poolFree)
	}
	for _, b := range bs {
		if b == s.pools[poolFree] {
			continue
		}
		for _, a := range ago {
			at := now.Add(-a)
			b.hist = append(b.hist, &slot{granted: at, done: at})
		}
	}
}

// historyLocked is how long ago each request this replica made in chat k within its longest
// window was answered (0 for one in flight).
func (c *chatShares) historyLocked(k string, now time.Time) []time.Duration {
	s := c.s
	b := s.groups[k]
	if b == nil {
		b = s.chats[k]
	}
	out := []time.Duration{}
	if b == nil {
		return out
	}
	b.trim(now)
	for _, sl := range b.hist {
		if sl.inflight {
			out = append(out, 0)
		} else {
			out = append(out, now.Sub(sl.done))
		}
	}
	return out
}

// reserve waits for this replica's next place in shared chat k.
func (c *chatShares) reserve(ctx context.Context, k string, chat chat.Ref) error {
	c.s.mu.Lock()
	var notBefore time.Duration
	if b := c.s.chats[k]; b != nil {
		notBefore = max(time.Until(b.blockedUntil), 0)
	}
	c.s.mu.Unlock()
	wait, err := c.sc.Reserve(ctx, k, c.isGroup != nil && c.isGroup(chat), notBefore)
	if err != nil || wait <= 0 {
		return err
	}
	return sleepUntilDone(ctx, c.done, wait)
}

// watch hands chats over to shared pacing when another replica enters them and leaves the
// chats that went quiet, every interval until the engine closes; then it leaves them all.
func (c *chatShares) watch(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			ctx, cancel := context.WithTimeout(context.Background(), shareTimeout)
			c.tick(ctx, true)
			cancel()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), shareTimeout)
		c.tick(ctx, false)
		cancel()
	}
}

func (c *chatShares) tick(ctx context.Context, all bool) {
	s := c.s
	now := time.Now()
	var quiet []string
	s.mu.Lock()
	ask := c.stray
	for k, cs := range c.chats {
		if cs.ready != nil {
			continue
		}
		if !cs.shared || cs.handover != nil {
			ask = true
		}
		if cs.users == 0 && (all || now.Sub(cs.last) >= c.linger) {
			quiet = append(quiet, k)
		}
	}
	s.mu.Unlock()
	for _, k := range quiet {
		c.leave(ctx, k)
	}
	if !ask || all {
		return
	}
	keys, err := c.sc.Contended(ctx)
	if err != nil {
		c.log.Warn("cannot tell which chats other replicas deliver to", "err", err)
		return
	}
	s.mu.Lock()
	c.stray = false
	s.mu.Unlock()
	for _, k := range keys {
		c.share(ctx, k)
	}
}

// leave hands quiet chat k's history over and stops delivering to it.
func (c *chatShares) leave(ctx context.Context, k string) {
	s := c.s
	s.mu.Lock()
	cs := c.chats[k]
	if cs == nil || cs.ready != nil || cs.users > 0 {
		s.mu.Unlock()
		return
	}
	cs.ready = make(chan struct{})
	ago := cs.handover
	if !cs.shared {
		ago = c.historyLocked(k, time.Now())
	}
	s.mu.Unlock()
	err := c.sc.Publish(ctx, k, ago, true)
	s.mu.Lock()
	ch := cs.ready
	cs.ready = nil
	if err == nil {
		// The history is the deployment's now: entering again starts from it.
		delete(c.chats, k)
		delete(s.chats, k)
		delete(s.groups, k)
	}
	s.mu.Unlock()
	close(ch)
	if err != nil {
		c.log.Warn("chat budget not handed over; trying again", "chat", k, "err", err)
	}
}

// share makes chat k, which another replica now delivers to as well, shared: this replica's
// history goes to the others and its requests are reserved with theirs from now on.
func (c *chatShares) share(ctx context.Context, k string) {
	s := c.s
	s.mu.Lock()
	cs := c.chats[k]
	if cs == nil {
		// Listed from an Enter this replica never heard back from.
		s.mu.Unlock()
		if err := c.sc.Publish(ctx, k, nil, true); err != nil {
			c.log.Warn("stray chat delivery not cleared", "chat", k, "err", err)
		}
		return
	}
	if cs.ready != nil {
		s.mu.Unlock()
		return
	}
	if !cs.shared {
		cs.shared = true
		cs.handover = c.historyLocked(k, time.Now())
		s.regateLocked(k)
	}
	cs.ready = make(chan struct{})
	ago := cs.handover
	s.mu.Unlock()
	err := c.sc.Publish(ctx, k, ago, false)
	s.mu.Lock()
	if err == nil {
		cs.handover = nil
	}
	ch := cs.ready
	cs.ready = nil
	s.mu.Unlock()
	close(ch)
	if err != nil {
		c.log.Warn("chat budget not handed over to the replicas sharing it; trying again", "chat", k, "err", err)
		return
	}
	c.log.Debug("chat budget shared with other replicas", "chat", k)
}

// regateLocked sends the requests waiting on chat k's own buckets back to be reserved with
// the other replicas.
func (s *scheduler) regateLocked(k string) {
	for i := 0; i < len(s.waiting); {
		t := s.waiting[i]
		if t.key != k || t.shared {
			i++
			continue
		}
		s.removeLocked(t)
		t.err = errShared
		close(t.granted)
	}
}
