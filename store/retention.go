package store

import (
	"context"
	"fmt"
	"relaybot/audit"
	"time"
)

// retentionBatch is how many rows one sweep transaction deletes, so a sweep never holds the
// writer for long.
const retentionBatch = 500

// RunRetention deletes turns (with their messages and LLM calls), audit rows and emptied inactive
// conversations older than keep, now and then every hour, until ctx ends. keep <= 0 keeps
// everything and returns at once. Failures are logged and retried at the next sweep.
func (s *Store) RunRetention(ctx context.Context, keep time.Duration) {
	if keep <= 0 {
		return
	}
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		n, err := s.Sweep(ctx, time.Now().Add(-keep))
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("retention sweep failed", "keep", keep, "deleted", n, "err", err)
		case n > 0:
			s.log.Info("retention sweep", "keep", keep, "deleted", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep deletes what started before cutoff, in small batches: finished turns (their messages and
// LLM calls go with them), finished audit rows, and inactive conversations left without turns. It
// returns how many rows it deleted (cascaded rows not counted).
func (s *Store) Sweep(ctx context.Context, cutoff time.Time) (int, error) {
	cutoff = dbTime(cutoff)
	steps := []struct {
		what string
		sql  string
		args []any
	}{
		{"tool calls", `DELETE FROM tool_calls WHERE id IN (SELECT id FROM tool_calls
			WHERE started_at < ? AND status <> ? ORDER BY started_at LIMIT ?)`,
			[]any{cutoff, audit.StatusRunning, retentionBatch}},
		{"turns", `DELETE FROM turns WHERE id IN (SELECT id FROM turns
			WHERE started_at < ? AND status <> ? ORDER BY started_at LIMIT ?)`,
			[]any{cutoff, TurnRunning, retentionBatch}},
		{"model calls outside turns", llmCallsOutsideTurns, []any{cutoff, LLMCallRunning, retentionBatch}},
		{"conversations", `DELETE FROM conversations WHERE id IN (SELECT c.id FROM conversations c
			WHERE c.created_at < ? AND c.active = ? AND NOT EXISTS
			(SELECT 1 FROM turns t WHERE t.conversation_id = c.id) LIMIT ?)`,
			[]any{cutoff, false, retentionBatch}},
	}
	total := 0
	for _, st := range steps {
		for {
			res := s.w.WithContext(ctx).Exec(st.sql, st.args...)
			if res.Error != nil {
				return total, fmt.Errorf("store: retention: delete %s before %s: %w", st.what, cutoff.Format(time.RFC3339), res.Error)
			}
			total += int(res.RowsAffected)
			if res.RowsAffected < retentionBatch {
				break
			}
			if err := ctx.Err(); err != nil {
				return total, err
			}
		}
	}
	return total, nil
}
