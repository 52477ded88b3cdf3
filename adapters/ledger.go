package adapters

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// OrphanEvery is how often a replica looks for the unanswered messages of replicas that died.
const OrphanEvery = 2 * time.Second

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
	// their payloads by key, and by key how many times a caller of the deployment has taken each
	// over, this time included (1 the first time). Each orphan goes to one caller.
	Orphans(ctx context.Context, platform string) (payloads map[string][]byte, adoptions map[string]int, err error)
}

// AdoptOrphans, when ledger is a Journal, takes over every OrphanEvery the messages of platform
// that replicas which died took and did not finish, and hands each to adopt (key and payload as
// claimed; adoptions, how many times a survivor took it over, this time included, is what the
// adapter passes on as Inbound.Redeliveries), until ctx ends; wg waits for the goroutine it
// starts. A failed look is logged and tried again at the next tick. Without a Journal it does
// nothing.
func AdoptOrphans(ctx context.Context, wg *sync.WaitGroup, ledger Ledger, platform string, log *slog.Logger, adopt func(key string, payload []byte, adoptions int)) {
	j, ok := ledger.(Journal)
	if !ok {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(OrphanEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			orphans, adoptions, err := j.Orphans(ctx, platform)
			if err != nil {
				if ctx.Err() == nil {
					log.Warn(platform+": messages of replicas that are gone not checked", "err", err)
				}
				continue
			}
			for key, payload := range orphans {
				adopt(key, payload, max(adoptions[key], 1))
			}
		}
	}()
}
