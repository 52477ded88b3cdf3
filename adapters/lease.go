package adapters

import "context"

// Lease is a role exactly one replica of a deployment holds at a time (the Telegram poller): the
// others wait, and one of them takes over when the holder dies.
type Lease interface {
	// Acquire blocks until this replica holds the lease, or ctx ends (then it returns ctx's
	// error). The returned context ends when the lease is lost or ctx ends; release gives the
	// lease up and must be called once the holder has stopped acting on it.
	Acquire(ctx context.Context) (held context.Context, release func(), err error)
}
