package pipeline

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"relaybot/adapters"
)

// Reasons a turn is cancelled, given as the cause of its context.
var (
	// ErrStopped: the user sent /stop (or pressed Stop).
	ErrStopped = errors.New("stopped by the user")
	// ErrInterrupted: a newer message in the conversation replaced the turn (busy = "interrupt").
	ErrInterrupted = errors.New("interrupted by a newer message")
	// ErrShutdown: the server is shutting down and the grace period is over.
	ErrShutdown = errors.New("server shutting down")
)

// errBusy: the conversation's queue is full.
var errBusy = errors.New("conversation queue is full")

// errClosed: the pipeline takes no new messages.
var errClosed = errors.New("pipeline is shutting down")

// queuedTurn is one message waiting for, or holding, its conversation's turn.
type queuedTurn struct {
	in    adapters.Inbound
	ready chan struct{} // closed when the queued turn may run, or is dropped
	// dropped is set (under the queue's lock, before ready closes) when the queued turn must not
	// run: a newer message superseded it, or the server shut down before its turn came.
	dropped error
	cancel  context.CancelCauseFunc // set while running
	// stopped is the cause of a /stop that came after the queued turn was let run but before its turn
	// began (it waited for a free slot); started cancels the turn with it at once.
	stopped error
}

// session is the state of one conversation: the running turn and the ones waiting, in order.
// A session is settling for a moment after its first message arrives, so that messages sent
// just before it, still on their way on other goroutines, can take their place ahead of it.
type session struct {
	running  *queuedTurn
	waiting  []*queuedTurn
	settling bool
}

// turnQueue runs one turn at a time per conversation.
type turnQueue struct {
	queueSize int
	interrupt bool
	settle    time.Duration

	mu       sync.Mutex
	sessions map[string]*session
}

func newTurnQueue(queueSize int, interrupt bool, settle time.Duration) *turnQueue {
	return &turnQueue{queueSize: queueSize, interrupt: interrupt, settle: settle, sessions: map[string]*session{}}
}

// enqueue adds a message to its conversation. The queued turn is ready at once (or after the settle
// delay) when nothing runs; otherwise it waits in the order the messages were sent (by message
// time and id, so that messages handed over on racing goroutines still run in the order the user
// sent them). With interrupt, the running turn is cancelled and earlier waiting messages are
// dropped. busy reports that the message waits behind a running turn.
func (s *turnQueue) enqueue(key string, in adapters.Inbound) (t *queuedTurn, busy bool, err error) {
	t = &queuedTurn{in: in, ready: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[key]
	if ss == nil {
		ss = &session{}
		s.sessions[key] = ss
	}
	if ss.running == nil && len(ss.waiting) == 0 {
		if s.settle <= 0 {
			ss.running = t
			close(t.ready)
			return t, false, nil
		}
		ss.settling = true
		ss.waiting = append(ss.waiting, t)
		time.AfterFunc(s.settle, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			ss.settling = false
			if ss.running == nil {
				s.promote(ss)
			}
			if ss.running == nil && len(ss.waiting) == 0 && s.sessions[key] == ss {
				delete(s.sessions, key)
			}
		})
		return t, false, nil
	}
	if s.interrupt {
		if ss.running != nil && ss.running.cancel != nil {
			ss.running.cancel(ErrInterrupted)
		}
		s.insert(ss, t)
		// Only the latest message is answered; the ones it supersedes are dropped.
		last := ss.waiting[len(ss.waiting)-1]
		for _, w := range ss.waiting[:len(ss.waiting)-1] {
			w.dropped = ErrInterrupted
			close(w.ready)
		}
		ss.waiting = append(ss.waiting[:0], last)
		return t, ss.running != nil, nil
	}
	room := s.queueSize
	if ss.settling {
		room++ // one of the settling messages runs as soon as the session settles
	}
	if len(ss.waiting) >= room {
		return nil, true, errBusy
	}
	s.insert(ss, t)
	return t, ss.running != nil, nil
}

// insert puts t among the waiting turns in the order the messages were sent.
func (s *turnQueue) insert(ss *session, t *queuedTurn) {
	i := len(ss.waiting)
	for i > 0 && before(t.in, ss.waiting[i-1].in) {
		i--
	}
	ss.waiting = append(ss.waiting, nil)
	copy(ss.waiting[i+1:], ss.waiting[i:])
	ss.waiting[i] = t
}

// promote lets the first waiting turn run. The caller holds s.mu.
func (s *turnQueue) promote(ss *session) {
	if len(ss.waiting) == 0 {
		return
	}
	next := ss.waiting[0]
	ss.waiting = ss.waiting[1:]
	ss.running = next
	close(next.ready)
}

// before reports whether a was sent before b in the same chat.
func before(a, b adapters.Inbound) bool {
	if !a.Time.IsZero() && !b.Time.IsZero() && !a.Time.Equal(b.Time) {
		return a.Time.Before(b.Time)
	}
	ai, aerr := strconv.ParseInt(a.MessageID, 10, 64)
	bi, berr := strconv.ParseInt(b.MessageID, 10, 64)
	if aerr == nil && berr == nil {
		return ai < bi
	}
	return false
}

// started records the cancel function of a queued turn that begins its turn. With interrupt, a newer
// message that arrived while the queued turn was becoming ready cancels the turn at once.
func (s *turnQueue) started(key string, t *queuedTurn, cancel context.CancelCauseFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.cancel = cancel
	if t.stopped != nil {
		cancel(t.stopped)
		return
	}
	ss := s.sessions[key]
	if s.interrupt && ss != nil && len(ss.waiting) > 0 {
		// A newer message arrived while this one was becoming ready.
		cancel(ErrInterrupted)
	}
}

// leave removes a queued turn from its conversation, whether it ran, gave up waiting or was dropped,
// and lets the next waiting turn run.
func (s *turnQueue) leave(key string, t *queuedTurn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[key]
	if ss == nil {
		return
	}
	if ss.running == t {
		ss.running = nil
		if !ss.settling {
			s.promote(ss)
		}
	} else {
		for i, w := range ss.waiting {
			if w == t {
				ss.waiting = append(ss.waiting[:i], ss.waiting[i+1:]...)
				break
			}
		}
	}
	if ss.running == nil && len(ss.waiting) == 0 && !ss.settling {
		delete(s.sessions, key)
	}
}

// stop cancels the running turn of a conversation with cause when may allows it for the message
// that started the turn. It reports whether a turn ran, and whether it was cancelled.
func (s *turnQueue) stop(key string, cause error, may func(started adapters.Inbound) bool) (running, stopped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[key]
	if ss == nil || ss.running == nil {
		return false, false
	}
	if may != nil && !may(ss.running.in) {
		return true, false
	}
	if ss.running.cancel == nil {
		// Let run but not begun yet (waiting for a free slot): the turn is cancelled as it begins.
		ss.running.stopped = cause
		return true, true
	}
	ss.running.cancel(cause)
	return true, true
}

// cancelAll cancels every running turn and drops every waiting turn, with cause.
func (s *turnQueue) cancelAll(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.sessions {
		if ss.running != nil && ss.running.cancel != nil {
			ss.running.cancel(cause)
		}
		for _, w := range ss.waiting {
			w.dropped = cause
			close(w.ready)
		}
		ss.waiting = nil
	}
}

// depth returns the number of waiting messages across conversations, for metrics and tests.
func (s *turnQueue) depth() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ss := range s.sessions {
		n += len(ss.waiting)
	}
	return n
}
