package adapters

import (
	"context"
	"sync"
	"time"
)

// PlaceWait is how long an adapter holds its platform's acknowledgement of a message for the
// message's place in its conversation's order (Placement.Wait); past it the platform hears of
// the message anyway, as it would without a shared turn queue, and the order across replicas
// is no longer promised for the chat's next message.
const PlaceWait = 5 * time.Second

// Placement is an adapter's side of Inbound.Placed: it hands Placed to the Handler with the
// message and acknowledges the message to the platform once Wait returns.
type Placement struct {
	once sync.Once
	done chan struct{}
}

// NewPlacement returns a Placement not placed yet.
func NewPlacement() *Placement { return &Placement{done: make(chan struct{})} }

// Placed marks the message placed and lets Wait return; calls after the first do nothing. It
// never blocks and may be called from any goroutine.
func (p *Placement) Placed() { p.once.Do(func() { close(p.done) }) }

// Wait returns once the message is placed (true), or when limit has passed or ctx ended first
// (false).
func (p *Placement) Wait(ctx context.Context, limit time.Duration) bool {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	// Placed at the last moment still counts.
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
