package coord

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"relaybot/store"
)

// Ledger is the deployment's record of inbound messages taken (table inbound_ledger): each
// message key is taken by one replica, once. It implements adapters.Ledger.
type Ledger struct {
	db       *sql.DB
	instance string
	member   *Member      // nil: not fenced (tests of the ledger alone)
	log      *slog.Logger // nil: failed tries of Done are not logged
}

// NewLedger returns the ledger over db, recording instance as the taker.
func NewLedger(db *sql.DB, instance string) *Ledger {
	return &Ledger{db: db, instance: instance}
}

// fenced returns the ledger taking messages only while m's lease is confirmed.
func (l *Ledger) fenced(m *Member) *Ledger {
	return &Ledger{db: l.db, instance: l.instance, member: m, log: l.log}
}

// epoch is the registration a message is taken under; 0 when not fenced.
func (l *Ledger) epoch() int64 {
	if l.member == nil {
		return 0
	}
	return l.member.Epoch()
}

// Claim records key of platform as taken by this replica and reports whether it was the first
// to take it. The unique key decides between replicas racing for the same message.
func (l *Ledger) Claim(ctx context.Context, platform, key string) (bool, error) {
	return l.ClaimPayload(ctx, platform, key, nil)
}

// ClaimPayload is Claim keeping payload, so a survivor can answer the message should this replica
// die before its turn ends (Orphans).
//
// A replica takes no message while it is fenced: Claim waits for its lease to be confirmed (or
// ctx to end), and the insert lands only while its registration is the one it holds.
func (l *Ledger) ClaimPayload(ctx context.Context, platform, key string, payload []byte) (bool, error) {
	if l.member != nil {
		if err := l.member.Fence(ctx); err != nil {
			return false, fmt.Errorf("coord: take %s message %s: %w", platform, key, err)
		}
	}
	// Once the fence let it through, the insert is not cut by ctx's end (a webhook request the
	// platform gave up on): a claim that landed unbeknown to this replica would leave the
	// message taken and never answered. It is tried again only while the database is away.
	bctx, cancel := store.Bound(ctx, ledgerClaim)
	defer cancel()
	var n int64
	err := store.Retry(bctx, store.Write{What: "the ledger's claim", Attempt: ledgerClaim, Log: l.log}, func(ctx context.Context) error {
		res, err := l.db.ExecContext(ctx, `INSERT INTO inbound_ledger (platform, inbound_key, instance_id, payload, done, taken_at)
			SELECT $1, $2, $3, $4, FALSE, now() WHERE $5 = 0 OR EXISTS (SELECT 1 FROM instances WHERE id = $3 AND epoch = $5)
			ON CONFLICT DO NOTHING`, platform, key, l.instance, string(payload), l.epoch())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("coord: take %s message %s: %w", platform, key, err)
	}
	if n == 0 && l.epoch() != 0 {
		// Nothing inserted: another replica took the message, or this replica's registration
		// changed under the fence (a survivor took its work over). The latter must not pass for
		// a repeat, or the message would be dropped unanswered: the platform is asked to send
		// it again, and another replica (or this one, registered again) takes it.
		var taken bool
		if err := l.db.QueryRowContext(bctx, `SELECT EXISTS (SELECT 1 FROM inbound_ledger WHERE platform = $1 AND inbound_key = $2)`,
			platform, key).Scan(&taken); err != nil {
			return false, fmt.Errorf("coord: take %s message %s: whether another replica took it: %w", platform, key, err)
		}
		if !taken {
			return false, fmt.Errorf("coord: take %s message %s: %w", platform, key, ErrTakenOver)
		}
	}
	return n == 1, nil
}

// ledgerClaim bounds a claim's insert (at least; a later deadline of its caller's holds).
const ledgerClaim = 5 * time.Second

// ledgerDone bounds the tries of Ledger.Done (at least; a later deadline of its caller's
// holds), and ledgerDoneTry each try.
const (
	ledgerDone    = time.Minute
	ledgerDoneTry = 5 * time.Second
)

// Done records that the turn of the message has ended (whatever its outcome). While the database
// is away it is tried again (store.Retry: the update may land twice) for a minute, or until ctx's
// deadline when that is later; ctx's cancellation does not stop it.
func (l *Ledger) Done(ctx context.Context, platform, key string) error {
	bctx, cancel := store.Bound(ctx, ledgerDone)
	defer cancel()
	err := store.Retry(bctx, store.Write{What: "the ledger's done", Attempt: ledgerDoneTry, Idempotent: true, Log: l.log},
		func(ctx context.Context) error {
			_, err := l.db.ExecContext(ctx, `UPDATE inbound_ledger SET done = TRUE WHERE platform = $1 AND inbound_key = $2`, platform, key)
			return err
		})
	if err != nil {
		return fmt.Errorf("coord: mark %s message %s done: %w", platform, key, err)
	}
	return nil
}

// Orphans takes over, for this replica, the messages of platform kept with a payload whose turn
// never ended and whose replica is gone: it left, or a survivor took its work over (TakeOver
// renames the rows, so a replica registering again under its id does not own them again). A
// replica whose lease merely expired still owns its messages: it may be paused, or coming back
// from an outage. It returns their payloads by key, and by key how many times a survivor has
// taken each over, this time included (1 the first time): the count is the deployment's, so a
// message that killed its first adopter too is known as such by the next. Replicas asking at
// once each get different ones (FOR UPDATE SKIP LOCKED).
func (l *Ledger) Orphans(ctx context.Context, platform string) (payloads map[string][]byte, adoptions map[string]int, err error) {
	rows, err := l.db.QueryContext(ctx, `UPDATE inbound_ledger SET instance_id = $2, adoptions = adoptions + 1
		WHERE (platform, inbound_key) IN (
			SELECT platform, inbound_key FROM inbound_ledger
			WHERE platform = $1 AND NOT done AND payload <> ''
			  AND instance_id NOT IN (SELECT id FROM instances)
			ORDER BY taken_at LIMIT 100 FOR UPDATE SKIP LOCKED)
		RETURNING inbound_key, payload, adoptions`, platform, l.instance)
	if err != nil {
		return nil, nil, fmt.Errorf("coord: take over %s messages of replicas that are gone: %w", platform, err)
	}
	defer rows.Close()
	payloads, adoptions = map[string][]byte{}, map[string]int{}
	for rows.Next() {
		var key, payload string
		var n int
		if err := rows.Scan(&key, &payload, &n); err != nil {
			return nil, nil, fmt.Errorf("coord: take over %s messages of replicas that are gone: %w", platform, err)
		}
		payloads[key], adoptions[key] = []byte(payload), n
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("coord: take over %s messages of replicas that are gone: %w", platform, err)
	}
	return payloads, adoptions, nil
}

// Purge drops entries taken more than age ago, which no platform sends again (Telegram keeps
// an unanswered update for 24 hours).
func (l *Ledger) Purge(ctx context.Context, age time.Duration) (int64, error) {
	res, err := l.db.ExecContext(ctx, `DELETE FROM inbound_ledger WHERE taken_at < now() - make_interval(secs => $1)`, age.Seconds())
	if err != nil {
		return 0, fmt.Errorf("coord: purge the inbound ledger: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
