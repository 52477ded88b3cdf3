package store

import (
	"context"
	"fmt"
)

// The conversation search index's merge after a retention sweep, on SQLite: FTS4 records a
// deleted message as a delete marker in a new segment, and drops the old postings only when the
// segments holding them are merged, so an index whose old turns retention deletes grows by what
// it deletes until its segments meet. Each step writes at most searchMergePages pages (a short
// write that does not hold the writer for long); a sweep takes at most searchMergeSteps of them
// and the next sweep goes on where it stopped.
const (
	searchMergePages = 256
	searchMergeSteps = 64
)

// CompactSearch merges the conversation search index after deletes, so the postings of deleted
// messages leave it and it does not grow forever (a retention sweep runs it when it deleted
// turns or conversations). On SQLite it merges FTS4's segments in bounded steps ('merge=X,2')
// until a step finds nothing to merge or searchMergeSteps ran; it returns how many steps
// merged something. On PostgreSQL it vacuums messages, which takes the deleted rows' entries
// out of the GIN index of their words now rather than at autovacuum's next pass.
func (s *RetentionQuery) CompactSearch(ctx context.Context) (int, error) {
	if s.driver == DriverPostgres {
		if _, err := s.wsql.ExecContext(ctx, `VACUUM messages`); err != nil {
			return 0, fmt.Errorf("store: vacuum the messages' search index: %w", err)
		}
		return 1, nil
	}
	for step := range searchMergeSteps {
		merged, err := s.mergeSearchStep(ctx)
		if err != nil {
			return step, err
		}
		if !merged {
			return step, nil
		}
	}
	return searchMergeSteps, nil
}

// mergeSearchStep runs one bounded FTS4 merge and reports whether it merged anything: by
// FTS4's contract, a merge with nothing to do changes fewer than two rows
// (sqlite3_total_changes, read on the merge's own connection).
func (s *RetentionQuery) mergeSearchStep(ctx context.Context) (bool, error) {
	c, err := s.wsql.Conn(ctx)
	if err != nil {
		return false, fmt.Errorf("store: merge the messages' search index: %w", err)
	}
	defer c.Close()
	var before, after int64
	if err := c.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&before); err != nil {
		return false, fmt.Errorf("store: merge the messages' search index: %w", err)
	}
	merge := fmt.Sprintf("merge=%d,2", searchMergePages)
	if _, err := c.ExecContext(ctx, `INSERT INTO messages_fts (messages_fts) VALUES (?)`, merge); err != nil {
		return false, fmt.Errorf("store: merge the messages' search index: %w", err)
	}
	if err := c.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&after); err != nil {
		return false, fmt.Errorf("store: merge the messages' search index: %w", err)
	}
	return after-before >= 2, nil
}
