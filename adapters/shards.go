package adapters

import "context"

// Shards hands a bot's gateway shards out among the replicas of a deployment (Discord's
// sharding): each shard is held by one replica at a time, the replicas spread them, and the
// shards of a replica that dies pass to the others.
type Shards interface {
	// Join takes part in sharing count shards until ctx ends and returns the lease of each
	// shard, by shard id. It blocks on the coordinating database; the leases' Acquire blocks
	// until this replica may hold that shard.
	Join(ctx context.Context, count int) ([]Lease, error)
}
