package delivery

import (
	"context"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
)

// Drafts are paced apart from a chat's budgets. A draft (adapters.Drafter) is no message: it
// counts against no budget the platform publishes for sends and edits, and held to them a
// private chat's answer moved once every 1.55 s. A chat's drafts follow the round trip
// instead: the next one goes once the previous one was answered and at least
// Options.DraftInterval after it was made, and only with text that changed (nextStepLocked).
// They still take their place in the bot-wide free pool. A 429 on a draft holds the chat's
// drafts for its retry_after and doubles the chat's interval, up to maxDraftInterval, until
// the scheduler forgets the chat (idle at a sweep); a 429 on a send or an edit in the chat
// holds its drafts too.

// maxDraftInterval is as far as 429s widen a chat's draft interval: about the pace of edits in
// a Telegram private chat (1.55 s), where drafts began.
const maxDraftInterval = 2 * time.Second

// draftBucket is chat's draft pace, made on first use; with s.mu held.
func (s *scheduler) draftBucket(c chat.Ref) *bucket {
	k := chatKey(c)
	b := s.drafts[k]
	if b == nil {
		b = &bucket{rate: adapters.Rate{N: 1, Per: s.draftEvery}, slack: s.slack, paced: true}
		if cb := s.chats[k]; cb != nil {
			b.blockedUntil = cb.blockedUntil
		}
		s.drafts[k] = b
	}
	return b
}

// pacedAt is when the next request of a paced bucket may go, no sooner than t: never while
// the previous one is in flight (its answer's release dispatches again), else rate.Per after
// the previous one was granted.
func (b *bucket) pacedAt(t time.Time) time.Time {
	n := len(b.hist)
	if n == 0 {
		return t
	}
	last := b.hist[n-1]
	if last.inflight {
		return never
	}
	if at := last.granted.Add(b.rate.Per); at.After(t) {
		return at
	}
	return t
}

// acquireDraftFunc is acquireFunc for a draft in chat: paced by the chat's draft bucket and
// the bot-wide free pool, in this process's memory alone (a private chat's answer streams from
// the one replica running its turn).
func (s *scheduler) acquireDraftFunc(ctx context.Context, c chat.Ref, first bool, then func(release func(), err error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		go then(nil, ErrClosed)
		return
	}
	s.enqueueFuncLocked(ctx, &ticket{first: first, pool: poolFree, buckets: []*bucket{s.draftBucket(c), s.pools[poolFree]}, then: then})
}

// blockDrafts holds chat's drafts for d after a 429 on one of them and widens their interval.
func (s *scheduler) blockDrafts(c chat.Ref, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.draftBucket(c)
	if until := time.Now().Add(d); until.After(b.blockedUntil) {
		b.blockedUntil = until
	}
	b.rate.Per = min(max(b.rate.Per*2, s.draftEvery), maxDraftInterval)
	s.dispatchLocked()
}

// DraftInterval reports how far apart chat's drafts go now: Options.DraftInterval, or wider
// after 429s on them.
func (e *Engine) DraftInterval(c chat.Ref) time.Duration {
	s := e.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.drafts[chatKey(c)]; b != nil {
		return b.rate.Per
	}
	return s.draftEvery
}
