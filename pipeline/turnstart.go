package pipeline

import (
	"sync"

	"relaybot/store"
)

// turnStart is the start of a turn whose id was taken ahead (Turns.NewTurnID), until it is written.
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
