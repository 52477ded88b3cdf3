package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"gorm.io/gorm"
)

// The overview's hourly roll-up (overview_hours, decision 063).
const (
	// RollUpEvery is how often RunRollUp rolls the hours.
	RollUpEvery = 5 * time.Minute
	// rollLate is how many hours before the rolled edge each pass rolls again: the rows of a
	// turn that began in them may still change (its end, its reply's times, a call settled
	// late); a row changed later than that leaves its hour as it was rolled.
	rollLate = 3 * time.Hour
	// rollMaxHours bounds one pass (a first one over a long history); the next goes on.
	rollMaxHours = 24 * 7
)

// rollState is overview_rollup's row: the hours before RolledUntil are rolled; RolledAt is when
// a pass last wrote (seconds since 1970).
type rollState struct {
	RolledUntil int64
	RolledAt    int64
}

func (s *UsageQuery) rollState(ctx context.Context, db *gorm.DB, lock bool) (rollState, error) {
	q := `SELECT rolled_until, rolled_at FROM overview_rollup WHERE id = 1`
	if lock && s.driver == DriverPostgres {
		q += ` FOR UPDATE`
	}
	var st rollState
	if err := db.WithContext(ctx).Raw(q).Row().Scan(&st.RolledUntil, &st.RolledAt); err != nil {
		return rollState{}, fmt.Errorf("read the roll-up's state: %w", err)
	}
	return st, nil
}

// RollUp rolls the whole hours before now into overview_hours: the hours from a few before the
// rolled edge (rollLate, where late rows land) on, at most rollMaxHours of them, each summed
// again from the rows and replaced whole, so a pass run twice writes the same. Passes on
// several replicas take turns on the roll-up's row: one that finds a pass wrote since it read
// the state stops without writing. It returns whether the hours are rolled up to now's.
func (s *UsageQuery) RollUp(ctx context.Context, now time.Time) (bool, error) {
	st, err := s.rollState(ctx, s.r, false)
	if err != nil {
		return false, fmt.Errorf("store: overview roll-up: %w", err)
	}
	end := now.UTC().Truncate(time.Hour)
	from := time.Unix(st.RolledUntil, 0).UTC().Add(-rollLate)
	if st.RolledUntil == 0 {
		if from, err = s.firstHour(ctx, end); err != nil {
			return false, fmt.Errorf("store: overview roll-up: %w", err)
		}
	}
	to := from.Add(rollMaxHours * time.Hour)
	if to.After(end) {
		to = end
	}
	var hours []sums
	if from.Before(to) {
		view := OverviewFilter{Since: from, Until: to, Step: time.Hour}
		hours = make([]sums, int(to.Sub(from)/time.Hour))
		if err := s.sumRows(ctx, view, view, hours); err != nil {
			return false, fmt.Errorf("store: overview roll-up: %w", err)
		}
	}
	err = s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		again, err := s.rollState(ctx, tx, true)
		if err != nil {
			return err
		}
		if again != st {
			hours = nil // another pass wrote since: its hours stand
			return nil
		}
		return writeHours(tx, from, to, hours, now)
	})
	if err != nil {
		return false, fmt.Errorf("store: overview roll-up: %w", err)
	}
	return hours == nil || !to.Before(end), nil
}

// firstHour is the hour of the oldest row the overview sums, end when there is none.
func (s *UsageQuery) firstHour(ctx context.Context, end time.Time) (time.Time, error) {
	var oldest *float64
	// Each table's oldest start read through its index, then converted.
	first := s.seconds("MIN(started_at)")
	q := `SELECT MIN(t) FROM (SELECT ` + first + ` AS t FROM turns
		UNION ALL SELECT ` + first + ` FROM llm_calls UNION ALL SELECT ` + first + ` FROM tool_calls) AS firsts`
	if err := s.r.WithContext(ctx).Raw(q).Row().Scan(&oldest); err != nil {
		return time.Time{}, fmt.Errorf("find the first row: %w", err)
	}
	if oldest == nil {
		return end, nil
	}
	return time.Unix(int64(math.Floor(*oldest)), 0).UTC().Truncate(time.Hour), nil
}

// writeHours replaces the roll-up's hours in [from, to) by hours (one per hour from from; an
// empty one is left out) and moves the state on.
func writeHours(tx *gorm.DB, from, to time.Time, hours []sums, now time.Time) error {
	if err := tx.Exec(`DELETE FROM overview_hours WHERE hour >= ? AND hour < ?`, from.Unix(), to.Unix()).Error; err != nil {
		return err
	}
	for i := range hours {
		h := &hours[i]
		if h.empty() {
			continue
		}
		h.First, h.Final = roundTimes(h.First), roundTimes(h.Final)
		b, err := json.Marshal(h)
		if err != nil {
			return err
		}
		at := from.Add(time.Duration(i) * time.Hour).Unix()
		if err := tx.Exec(`INSERT INTO overview_hours (hour, sums) VALUES (?, ?)`, at, string(b)).Error; err != nil {
			return err
		}
	}
	return tx.Exec(`UPDATE overview_rollup SET rolled_until = CASE WHEN rolled_until > ? THEN rolled_until ELSE ? END, rolled_at = ? WHERE id = 1`,
		to.Unix(), to.Unix(), now.Unix()).Error
}

// roundTimes are reply times as the roll-up keeps them (replyTime).
func roundTimes(ms map[int64]int64) map[int64]int64 {
	if len(ms) == 0 {
		return nil
	}
	out := make(map[int64]int64, len(ms))
	for v, n := range ms {
		out[replyTime(v)] += n
	}
	return out
}

// readRolled adds the roll-up's hours of f's window to its buckets (f's Since is a whole hour,
// its Step whole hours) and returns where they end: the rows from then on are read from their
// tables. f.Since when nothing of the window is rolled.
func (s *UsageQuery) readRolled(ctx context.Context, f OverviewFilter, out []sums) (time.Time, error) {
	st, err := s.rollState(ctx, s.r, false)
	if err != nil {
		return time.Time{}, err
	}
	upto := time.Unix(st.RolledUntil, 0).UTC()
	if !upto.After(f.Since) {
		return f.Since, nil
	}
	if upto.After(f.Until) {
		upto = f.Until
	}
	rows, err := s.r.WithContext(ctx).Raw(`SELECT hour, sums FROM overview_hours WHERE hour >= ? AND hour < ?`,
		f.Since.Unix(), upto.Unix()).Rows()
	if err != nil {
		return time.Time{}, fmt.Errorf("roll-up: %w", err)
	}
	defer rows.Close()
	step := int64(f.Step / time.Second)
	for rows.Next() {
		var hour int64
		var raw string
		if err := rows.Scan(&hour, &raw); err != nil {
			return time.Time{}, fmt.Errorf("roll-up: %w", err)
		}
		var h sums
		if err := json.Unmarshal([]byte(raw), &h); err != nil {
			return time.Time{}, fmt.Errorf("roll-up: the hour at %d: %w", hour, err)
		}
		if i := (hour - f.Since.Unix()) / step; i >= 0 && i < int64(len(out)) {
			out[i].add(&h)
		}
	}
	if err := rows.Err(); err != nil {
		return time.Time{}, fmt.Errorf("roll-up: %w", err)
	}
	return upto, nil
}

// RunRollUp rolls the overview's hours now and every RollUpEvery until ctx ends, each time
// until they are rolled up to the current hour. Failures are logged and tried at the next tick.
func (s *UsageQuery) RunRollUp(ctx context.Context) {
	t := time.NewTicker(RollUpEvery)
	defer t.Stop()
	for {
		for {
			done, err := s.RollUp(ctx, time.Now())
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("overview roll-up failed; trying again at the next tick", "err", err)
				}
				break
			}
			if done {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
