// Package toolstest holds what tests of the tool manager's users need and production does not: a
// Recorder that keeps the audit records in memory, and Consents that keeps "always allow" answers.
package toolstest

import (
	"context"
	"fmt"
	"sync"

	"relaybot/audit"
)

// RecorderOp names a tools.Recorder method in Recorder's log.
type RecorderOp string

// The two Recorder operations.
const (
	OpStart  RecorderOp = "start"
	OpFinish RecorderOp = "finish"
)

// RecorderEvent is one tools.Recorder call as Recorder saw it.
type RecorderEvent struct {
	Op     RecorderOp
	Record audit.Record // a copy, as passed
}

// Recorder is a tools.Recorder that keeps records in memory, for tests and benchmarks. It is safe
// for concurrent use. The zero value is ready to use.
type Recorder struct {
	mu     sync.Mutex
	nextID int64
	rows   []audit.Record
	byID   map[int64]int
	events []RecorderEvent
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{} }

// Start assigns r.ID and stores a copy of r.
func (m *Recorder) Start(ctx context.Context, r *audit.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byID == nil {
		m.byID = make(map[int64]int)
	}
	m.nextID++
	r.ID = m.nextID
	m.byID[r.ID] = len(m.rows)
	m.rows = append(m.rows, *r)
	m.events = append(m.events, RecorderEvent{Op: OpStart, Record: *r})
	return nil
}

// Finish replaces the stored record with r; r.ID must come from Start.
func (m *Recorder) Finish(ctx context.Context, r *audit.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, RecorderEvent{Op: OpFinish, Record: *r})
	i, ok := m.byID[r.ID]
	if !ok {
		return fmt.Errorf("toolstest: Recorder: finish of unknown record id %d (tool %s)", r.ID, r.ToolName)
	}
	m.rows[i] = *r
	return nil
}

// Records returns the stored records in the order they were started.
func (m *Recorder) Records() []audit.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]audit.Record(nil), m.rows...)
}

// Events returns every Start and Finish call in order.
func (m *Recorder) Events() []RecorderEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]RecorderEvent(nil), m.events...)
}

// Reset forgets all records and events.
func (m *Recorder) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rows, m.events = m.rows[:0], m.events[:0]
	clear(m.byID)
}
