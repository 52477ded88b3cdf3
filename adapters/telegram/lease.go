package telegram

import (
	"context"
)

// runPollingLeased polls while this replica holds the poller lease, when replicas share the bot:
// Telegram answers a second getUpdates caller with 409 Conflict, so exactly one replica polls
// and the others wait to take over. Each term of holding polls from the offset this replica
// knows; updates the server still holds are fetched again by whoever polls next.
func (a *Adapter) runPollingLeased(ctx context.Context, dispatch dispatcher, act actor) error {
	if a.opts.PollLease == nil {
		return a.runPolling(ctx, dispatch, act)
	}
	for {
		a.log.Info("telegram: waiting for the poller lease")
		held, release, err := a.opts.PollLease.Acquire(ctx)
		if err != nil {
			return nil // ctx ended
		}
		a.log.Info("telegram: this replica polls")
		err = a.runPolling(held, dispatch, act)
		release()
		if err != nil || ctx.Err() != nil {
			return err
		}
		a.log.Warn("telegram: poller lease lost; polling stopped until it is held again")
	}
}
