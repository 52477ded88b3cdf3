package coord

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// TurnEnder ends the turns a replica taken over left running, within the takeover's transaction
// (the store's turns, *store.Store).
type TurnEnder interface {
	InterruptTurnsOf(ctx context.Context, tx *sql.Tx, instance string) error
}

// TakeOver takes over the work of the replicas whose lease has been expired for longer than
// grace, in one transaction that holds their rows' locks: their running turns end interrupted,
// the messages they were answering and the replies they were streaming are handed to the
// survivors (Ledger.Orphans, Interrupted), their places in the conversations' queues go, and
// their rows are deleted. A replica renewing at the same moment (Member.renew updates its row
// only for its epoch) waits for the lock: either it renewed first and keeps its work, or it finds
// its row gone and registers under a new epoch, refusing everything begun under the old one.
// Rows locked by another survivor are skipped. It reports the replicas taken over.
//
// Once committed, the sessions holding their leases (the Telegram poller, Discord shards and
// the shards' participant lock, each named by holderName after the replica and the epoch taken
// over) are ended (pg_terminate_backend): a paused or cut-off replica's connections look alive
// to PostgreSQL until TCP gives up, and its locks with them, so nobody would poll Telegram or
// connect its shards meanwhile. An error ending them is reported with the replicas taken over.
//
// The replicas' turns are the store's: turns ends them, in the same transaction.
//
// Call it only once this replica has itself been back for grace (Member.LiveFor): after an
// outage every lease has expired, and a live replica needs that long to renew.
func TakeOver(ctx context.Context, db *sql.DB, self string, grace time.Duration, turns TurnEnder) ([]string, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("coord: take over replicas that are gone: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT id, epoch FROM instances
		WHERE expires_at < now() - make_interval(secs => $1) AND id <> $2
		FOR UPDATE SKIP LOCKED`, grace.Seconds(), self)
	if err != nil {
		return nil, fmt.Errorf("coord: take over replicas that are gone: %w", err)
	}
	type gone struct {
		id    string
		epoch int64
	}
	var taken []gone
	for rows.Next() {
		var g gone
		if err := rows.Scan(&g.id, &g.epoch); err != nil {
			rows.Close()
			return nil, fmt.Errorf("coord: take over replicas that are gone: %w", err)
		}
		taken = append(taken, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("coord: take over replicas that are gone: %w", err)
	}
	if len(taken) == 0 {
		return nil, nil
	}
	var ids []string
	for _, g := range taken {
		// The work is renamed rather than kept under the replica's id: should the replica
		// register again under the same id, none of it is its own any more.
		was := fmt.Sprintf("gone:%s:%d", g.id, g.epoch)
		if err := turns.InterruptTurnsOf(ctx, tx, g.id); err != nil {
			return nil, fmt.Errorf("coord: take over the work of %s: %w", g.id, err)
		}
		for _, st := range []struct {
			q    string
			args []any
		}{
			{`UPDATE inbound_ledger SET instance_id = $2 WHERE instance_id = $1 AND NOT done`, []any{g.id, was}},
			{`UPDATE reply_messages SET instance_id = $2 WHERE instance_id = $1`, []any{g.id, was}},
			{`DELETE FROM turn_queue WHERE instance_id = $1`, []any{g.id}},
			{`DELETE FROM instances WHERE id = $1`, []any{g.id}},
		} {
			if _, err := tx.ExecContext(ctx, st.q, st.args...); err != nil {
				return nil, fmt.Errorf("coord: take over the work of %s: %w", g.id, err)
			}
		}
		ids = append(ids, g.id)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("coord: take over replicas that are gone: %w", err)
	}
	var errs []error
	for _, g := range taken {
		if _, err := db.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE application_name = $1 AND pid <> pg_backend_pid()`, holderName(g.id, g.epoch)); err != nil {
			errs = append(errs, fmt.Errorf("coord: end the lease sessions of %s: %w", g.id, err))
		}
	}
	return ids, errors.Join(errs...)
}
