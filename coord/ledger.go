package coord

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Ledger is the deployment's record of inbound messages taken (table inbound_ledger): each
// message key is taken by one replica, once. It implements adapters.Ledger.
type Ledger struct {
	db       *sql.DB
	instance string
}

// NewLedger returns the ledger over db, recording instance as the taker.
func NewLedger(db *sql.DB, instance string) *Ledger {
	return &Ledger{db: db, instance: instance}
}

// Claim records key of platform as taken by this replica and reports whether it was the first
// to take it. The unique key decides between replicas racing for the same message.
func (l *Ledger) Claim(ctx context.Context, platform, key string) (bool, error) {
	res, err := l.db.ExecContext(ctx, `INSERT INTO inbound_ledger (platform, inbound_key, instance_id, taken_at)
		VALUES ($1, $2, $3, now()) ON CONFLICT DO NOTHING`, platform, key, l.instance)
	if err != nil {
		return false, fmt.Errorf("coord: take %s message %s: %w", platform, key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("coord: take %s message %s: %w", platform, key, err)
	}
	return n == 1, nil
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
