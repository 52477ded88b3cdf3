package adapters

import "context"

// Lease is a role exactly one replica of a deployment holds at a time (the Telegram poller, a
// Discord gateway shard): the others wait, and one of them takes over when the holder dies.
//
// The held context Acquire returns ends for one of two reasons, told apart by its cause
// (context.Cause):
//
//   - Lost (any cause but a *GivenUp): the lease's session died, the replica was fenced or
//     taken over, or ctx ended. Another replica may hold the lease already: the holder stops
//     acting on it at once, then calls release.
//   - Given up (a *GivenUp): the replica held more than its share and gave the lease to the
//     others (a replica joined). It is still live and nobody has taken the lease yet: the holder
//     calls release at once, so another replica can take it, and may keep serving what it
//     serves until GivenUp.HandedOver returns, so the role changes hands without a gap.
type Lease interface {
	// Acquire blocks until this replica holds the lease, or ctx ends (then it returns ctx's
	// error). The returned context ends when the lease is lost or given up, or ctx ends;
	// release gives the lease up and must be called once the holder has stopped acting on it
	// (at once when it was given up).
	Acquire(ctx context.Context) (held context.Context, release func(), err error)
}

// HandOff is a Lease whose holder tells the others when it serves the lease, so a replica that
// gave the lease up (a *GivenUp) can stop serving it once the new holder does.
type HandOff interface {
	Lease
	// Serving records that this replica, holding the lease, now serves it (a Discord shard's
	// gateway session is READY). It holds until the lease is released or lost.
	Serving(ctx context.Context) error
}

// GivenUp is the cause of a held context that ended because this replica gave the lease up
// while it was live, not because it lost it. Two replicas serve the role for a moment, so
// whatever they act on must be answered once across replicas (the inbound ledger).
type GivenUp struct {
	// HandedOver blocks until the replica that took the lease over serves it (HandOff.Serving),
	// a hand-off limit passes (then it returns an error saying so), or ctx ends. Call it after
	// release; serve the role meanwhile, stop once it returns.
	HandedOver func(ctx context.Context) error
}

// Error implements error.
func (*GivenUp) Error() string { return "lease given up to another replica" }
