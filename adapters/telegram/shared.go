package telegram

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"relaybot/adapters"
)

// ledgerKey names update id of this bot in the deployment's ledger.
func (a *Adapter) ledgerKey(id int64) string {
	return strconv.FormatInt(a.self.ID, 10) + ":" + strconv.FormatInt(id, 10)
}

// claimShared records update id (raw as Telegram sent it) in the Ledger and reports whether this
// replica took it first; the payload is kept when the Ledger is a Journal, for a survivor to
// answer should this replica die mid-turn.
func (a *Adapter) claimShared(ctx context.Context, id int64, raw []byte) (bool, error) {
	if j, ok := a.opts.Ledger.(adapters.Journal); ok {
		return j.ClaimPayload(ctx, "telegram", a.ledgerKey(id), raw)
	}
	return a.opts.Ledger.Claim(ctx, "telegram", a.ledgerKey(id))
}

// takeShared reports whether this poller answers update id: always without a Ledger; with one,
// unless another replica took it before (a poller that died after fetching it: its orphan is
// answered through the Journal). A Ledger that cannot be reached answers it: twice is better than
// never.
func (a *Adapter) takeShared(ctx context.Context, id int64, raw []byte) bool {
	if a.opts.Ledger == nil {
		return true
	}
	first, err := a.claimShared(ctx, id, raw)
	if err != nil {
		a.log.Warn("telegram: inbound ledger unavailable; answering", "update", id, "err", err)
		return true
	}
	return first
}

// doneShared records in the Journal that update id's turn has ended.
func (a *Adapter) doneShared(id int64) {
	j, ok := a.opts.Ledger.(adapters.Journal)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := j.Done(ctx, "telegram", a.ledgerKey(id)); err != nil {
		a.log.Warn("telegram: inbound ledger not updated; a survivor may answer this update again", "update", id, "err", err)
	}
}

// adoptOrphans, with a Journal, hands over again the updates that replicas which died took and
// did not finish (marked redelivered: the pipeline answers one whose turn never ended; counted
// as handed over at least as many times as survivors took it over, so the second adoption gets
// a notice). It stops with ctx; wg waits for it.
func (a *Adapter) adoptOrphans(ctx context.Context, wg *sync.WaitGroup, dispatch dispatcher) {
	prefix := strconv.FormatInt(a.self.ID, 10) + ":"
	adapters.AdoptOrphans(ctx, wg, a.opts.Ledger, "telegram", a.log, func(key string, raw []byte, adoptions int) {
		var u update
		if !strings.HasPrefix(key, prefix) || json.Unmarshal(raw, &u) != nil || u.Message == nil {
			return
		}
		a.log.Info("telegram: answering an update a replica that died did not finish", "update", u.UpdateID)
		a.take([]int64{u.UpdateID}, []json.RawMessage{raw}, 0)
		dispatch(u.UpdateID, u.Message, adoptions, nil)
	})
}

// dropLocal forgets update id in this replica's offset file only: the update is another
// replica's, and the shared Journal must not record it done.
func (a *Adapter) dropLocal(id int64) {
	if a.journal == nil {
		return
	}
	if err := a.journal.done(id); err != nil {
		a.log.Warn("telegram: offset file not updated; a restart may hand this update over again", "update", id, "err", err)
	}
}
