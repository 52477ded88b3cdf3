package store

import (
	"context"
	"database/sql"
	"fmt"
)

// InterruptTurnsOf ends interrupted the turns running on replica instance, within tx: the
// takeover of a replica that is gone (coord.TakeOver) runs it in the transaction that deletes
// the replica's row, so that replica either renewed first and keeps its turns, or finds its row
// gone and its turns ended, never both. Plain SQL: it joins a database/sql transaction GORM did
// not open. PostgreSQL only (only replicas are taken over).
func (s *TurnQuery) InterruptTurnsOf(ctx context.Context, tx *sql.Tx, instance string) error {
	_, err := tx.ExecContext(ctx, `UPDATE turns SET status = $1, finished_at = now(), error = $2
		WHERE status = $3 AND instance_id = $4`, TurnInterrupted, interruptedError, TurnRunning, instance)
	if err != nil {
		return fmt.Errorf("store: interrupt the turns of replica %s: %w", instance, err)
	}
	return nil
}

// interruptedError is the error of a turn its replica left running.
const interruptedError = "the bot stopped before the turn finished"
