package store

import (
	"context"
	"fmt"
	"sync"

	"gorm.io/gorm"
)

// NewTurnID returns the id of a turn about to start, before its row is written: the turn's start
// (TurnStart.ID) can then ride in its first model call's reservation (LLMCallStart.Turn), one
// commit for both, while the id is already known to what needs it before (tool calls' audit
// rows, traces, logs). An id not used leaves a gap, as a rolled-back insert does.
//
// On PostgreSQL it is the next value of the turns' identity sequence (no commit), so the ids of
// the turns of every replica still grow in the order they were taken. On SQLite (one process) it
// comes from a block of turnIDBlock ids this Database reserves by moving the table's AUTOINCREMENT
// counter (sqlite_sequence) past it in one commit: a turn inserted without an id, by this
// process or another, is numbered after every reserved block.
func (s *TurnQuery) NewTurnID(ctx context.Context) (int64, error) {
	if s.driver == DriverPostgres {
		var id int64
		if err := s.w.WithContext(ctx).Raw(nextTurnIDPostgres).Row().Scan(&id); err != nil {
			return 0, fmt.Errorf("store: new turn id: %w", err)
		}
		return id, nil
	}
	id, err := s.ids.take(ctx, s.turns)
	if err != nil {
		return 0, fmt.Errorf("store: new turn id: %w", err)
	}
	return id, nil
}

// nextTurnIDPostgres takes an id of the turns' identity column. Plain SQL: a sequence is no
// table GORM has a model of.
const nextTurnIDPostgres = `SELECT nextval(pg_get_serial_sequence('turns', 'id'))`

// turnIDBlock is how many turn ids one reservation takes on SQLite: a commit per 64 turns.
const turnIDBlock = 64

// turnIDs is the block of turn ids reserved on SQLite and not handed out yet: [next, end).
type turnIDs struct {
	mu        sync.Mutex
	next, end int64
}

// take hands out the next id of the block, reserving a new block through w when it is used up.
func (b *turnIDs) take(ctx context.Context, w *groupWriter) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.next == b.end {
		var last int64
		if err := w.do(ctx, func(tx *gorm.DB) error {
			var err error
			last, err = reserveTurnIDs(tx, turnIDBlock)
			return err
		}); err != nil {
			return 0, err
		}
		b.next, b.end = last-turnIDBlock+1, last+1
	}
	id := b.next
	b.next++
	return id, nil
}

// reserveTurnIDs moves the turns' AUTOINCREMENT counter n past the highest id SQLite has given
// or would give and returns the new counter: the ids up to it are this Database's to hand out.
// Plain SQL: sqlite_sequence is SQLite's own table, of which GORM has no model.
func reserveTurnIDs(tx *gorm.DB, n int64) (int64, error) {
	var high int64
	if err := tx.Raw(`SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'turns'), 0),
		COALESCE((SELECT MAX(id) FROM turns), 0))`).Row().Scan(&high); err != nil {
		return 0, err
	}
	last := high + n
	res := tx.Exec(`UPDATE sqlite_sequence SET seq = ? WHERE name = 'turns'`, last)
	if res.Error != nil {
		return 0, res.Error
	}
	if res.RowsAffected == 0 {
		if err := tx.Exec(`INSERT INTO sqlite_sequence (name, seq) VALUES ('turns', ?)`, last).Error; err != nil {
			return 0, err
		}
	}
	return last, nil
}
