package pipeline

import (
	"context"
	"sync"

	"relaybot/store"
)

// TurnIDs gives a turn its id before its row is written (store.Store). With it and a
// CallLedger, a turn's start (its row and the user's message) rides in its first model call's
// reservation, one commit for both instead of two; the message is still saved before the model
// is called, and a turn that makes no call (stopped before it) has its start written alone.
type TurnIDs interface {
	NewTurnID(ctx context.Context) (int64, error)
}

// turnStart is the start of a turn whose id was taken ahead (TurnIDs), until it is written.
// The turn's writes use it one at a time (the runner's meter, then the turn after the run); its
// lock keeps a write of it from overlapping another all the same.
type turnStart struct {
	mu      sync.Mutex
	start   store.TurnStart
	written bool
	// alone writes the start in a write of its own, with the turn's retries (turn.saving).
	alone func(store.TurnStart) error
}

// With runs write with the start to carry (nil once it is written); write reports whether its
// write saved the start.
func (s *turnStart) With(write func(start *store.TurnStart) (saved bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written {
		write(nil)
		return
	}
	st := s.start
	s.written = write(&st)
}

// Ensure writes the start alone unless a write saved it already.
func (s *turnStart) Ensure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written {
		return nil
	}
	if err := s.alone(s.start); err != nil {
		return err
	}
	s.written = true
	return nil
}
