package adapters

import "context"

// Ledger takes each inbound message once for a deployment of several replicas of the bot on one
// database: a platform's retry, or the same message reaching two replicas, starts one turn.
// Without a Ledger an adapter deduplicates in its own memory, which is enough for one process.
type Ledger interface {
	// Claim records the message key (unique per platform and bot) as taken and reports whether
	// this caller took it first. It blocks on the database; on error the caller does not know,
	// and should leave the message for the platform to send again.
	Claim(ctx context.Context, platform, key string) (bool, error)
}
