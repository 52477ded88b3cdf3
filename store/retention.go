package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"relaybot/audit"
)

// retentionBatch is how many rows one sweep transaction deletes, so a sweep never holds the
// writer for long.
const retentionBatch = 500

// RunRetention deletes turns (with their messages and LLM calls), audit rows and emptied inactive
// conversations older than keep, now and then every hour, until ctx ends. keep <= 0 keeps
// everything and returns at once. Failures are logged and retried at the next sweep.
func (s *RetentionQuery) RunRetention(ctx context.Context, keep time.Duration) {
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
// LLM calls go with them), finished audit rows, inactive conversations left without turns, the
// scheduled tasks' finished runs and ended tasks, the messages the web chat showed, and the
// overview roll-up's hours wholly before cutoff; when
// turns or conversations went, it merges the messages' search index (CompactSearch). It
// returns how many rows it deleted (cascaded rows not counted).
func (s *RetentionQuery) Sweep(ctx context.Context, cutoff time.Time) (int, error) {
	cutoff = dbTime(cutoff)
	db := s.w.WithContext(ctx)
	// Each step deletes a batch chosen by a subquery: a DELETE takes no ORDER BY or LIMIT on
	// PostgreSQL.
	steps := []struct {
		what  string
		model any
		batch *gorm.DB
		key   string // the column batch selects; "id" when empty
	}{
		{"tool calls", &toolCallModel{}, db.Model(&toolCallModel{}).Select("id").
			Where("started_at < ? AND status <> ?", cutoff, audit.StatusRunning).Order("started_at").Limit(retentionBatch), ""},
		{"turns", &turnRow{}, db.Model(&turnRow{}).Select("id").
			Where("started_at < ? AND status <> ?", cutoff, TurnRunning).Order("started_at").Limit(retentionBatch), ""},
		{"model calls outside turns", &llmCallRow{}, db.Model(&llmCallRow{}).Select("id").
			Where("turn_id IS NULL AND started_at < ? AND status <> ?", cutoff, LLMCallRunning).Order("started_at").Limit(retentionBatch), ""},
		{"conversations", &conversationRow{}, db.Table("conversations c").Select("c.id").
			Where("c.created_at < ? AND c.active = ? AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.conversation_id = c.id)", cutoff, false).
			Limit(retentionBatch), ""},
		// A batch of positions may name a few more rows than the batch (two chats' messages at
		// the same microsecond): all of them are older than the cutoff.
		// A scheduled task's finished runs, and the tasks that ended (their runs go with them).
		{"task runs", &TaskRun{}, db.Model(&TaskRun{}).Select("id").
			Where("finished_at < ? AND status IN ?", cutoff, []string{RunDelivered, RunFailed, RunSkipped}).Order("id").Limit(retentionBatch), ""},
		{"ended tasks", &Task{}, db.Model(&Task{}).Select("id").
			Where("state IN ? AND created_at < ? AND (last_run_at IS NULL OR last_run_at < ?)", []string{TaskDone, TaskCancelled}, cutoff, cutoff).
			Order("id").Limit(retentionBatch), ""},
		{"web chat messages", &webMessageRow{}, db.Model(&webMessageRow{}).Select("pos").
			Where("pos < ?", cutoff.UnixMicro()).Order("pos").Limit(retentionBatch), "pos"},
	}
	total, withMessages := 0, 0
	for _, st := range steps {
		for {
			key := st.key
			if key == "" {
				key = "id"
			}
			res := s.w.WithContext(ctx).Where(key+" IN (?)", st.batch).Delete(st.model)
			if res.Error != nil {
				return total, fmt.Errorf("store: retention: delete %s before %s: %w", st.what, cutoff.Format(time.RFC3339), res.Error)
			}
			total += int(res.RowsAffected)
			if st.what == "turns" || st.what == "conversations" {
				withMessages += int(res.RowsAffected)
			}
			if res.RowsAffected < retentionBatch {
				break
			}
			if err := ctx.Err(); err != nil {
				return total, err
			}
		}
	}
	// The overview's roll-up forgets the hours whose rows retention deleted, as the rows'
	// overview did: an hour wholly before the cutoff.
	if err := s.w.WithContext(ctx).Exec(`DELETE FROM overview_hours WHERE hour + 3600 <= ?`, cutoff.Unix()).Error; err != nil {
		return total, fmt.Errorf("store: retention: delete the overview's hours before %s: %w", cutoff.Format(time.RFC3339), err)
	}
	if withMessages > 0 {
		if _, err := s.CompactSearch(ctx); err != nil {
			return total, fmt.Errorf("store: retention: %w", err)
		}
	}
	return total, nil
}
