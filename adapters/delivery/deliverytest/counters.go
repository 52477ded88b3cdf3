// Package deliverytest holds what tests of the delivery engine's users need and production
// does not: an Observer that counts the engine's events.
package deliverytest

import (
	"context"
	"sync"

	"relaybot/adapters/delivery"
)

// Counters is a delivery.Observer that counts events by kind; safe for concurrent use. The zero
// value is ready to use.
type Counters struct {
	mu sync.Mutex
	n  map[delivery.EventKind]int64
}

// Observe counts e.
func (c *Counters) Observe(_ context.Context, e delivery.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[delivery.EventKind]int64{}
	}
	c.n[e.Kind]++
}

// Stats is a snapshot of Counters.
type Stats struct {
	Sends, Edits, Files, NotModified, RateLimited, Retries, Fallbacks, Failures, Typing, Drafts int64
	// Interactions are answers to presses and commands (delivery.EventInteraction).
	Interactions int64
}

// Snapshot returns the current counts.
func (c *Counters) Snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{
		Sends:       c.n[delivery.EventSend],
		Edits:       c.n[delivery.EventEdit],
		Files:       c.n[delivery.EventFiles],
		NotModified: c.n[delivery.EventNotModified],
		RateLimited: c.n[delivery.EventRateLimited],
		Retries:     c.n[delivery.EventRetry],
		Fallbacks:   c.n[delivery.EventFallback],
		Failures:    c.n[delivery.EventFailed],
		Typing:      c.n[delivery.EventTyping],
		Drafts:      c.n[delivery.EventDraft],

		Interactions: c.n[delivery.EventInteraction],
	}
}
