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

// Journal is a Ledger that also keeps each message until its turn has ended, so that the
// messages a replica was answering when it died are answered by another one.
type Journal interface {
	Ledger
	// ClaimPayload is Claim that keeps payload (the message as the platform sent it) with the
	// claim.
	ClaimPayload(ctx context.Context, platform, key string, payload []byte) (bool, error)
	// Done records that the message's turn has ended.
	Done(ctx context.Context, platform, key string) error
	// Orphans takes over the unanswered messages of platform whose replica is gone, and returns
	// their payloads by key. Each orphan goes to one caller.
	Orphans(ctx context.Context, platform string) (map[string][]byte, error)
}
