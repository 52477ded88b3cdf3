package discord

import "context"

// taken reports whether this replica answers the message or interaction key: with a Ledger
// (several replicas, each receiving every event on its own gateway connection) only the one that
// records it first does. A failed record answers, as the pipeline answers a message it cannot
// check: twice is better than never.
func (a *Adapter) taken(ctx context.Context, key string) bool {
	if a.opts.Ledger == nil {
		return true
	}
	first, err := a.opts.Ledger.Claim(ctx, "discord", key)
	if err != nil {
		a.log.Warn("discord: inbound ledger unavailable; answering", "key", key, "err", err)
		return true
	}
	return first
}
