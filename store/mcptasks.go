package store

import (
	"context"
	"fmt"
	"time"
)

// The MCP tasks of tool calls in flight (migration 00053, decision 068). A row is this process's
// task until the call is done with it; a row whose process is gone is left over, for the next
// process that connects the server to cancel. A process is gone when it is not this one on
// SQLite (one process at a time holds the file), and on PostgreSQL when its row in instances is
// gone (it left, or a survivor took its work over after its lease expired): the same rule as
// TurnQuery.Recover.

// mcpTaskRow is a row of mcp_tasks_in_flight.
type mcpTaskRow struct {
	Server    string `gorm:"primaryKey"`
	TaskID    string `gorm:"primaryKey;column:task_id"`
	Protocol  string
	Owner     string
	StartedMs int64 `gorm:"column:started_ms"`
}

func (mcpTaskRow) TableName() string { return "mcp_tasks_in_flight" }

// LeftTask is an MCP task a process that is gone left in flight.
type LeftTask struct {
	TaskID   string
	Protocol string
	// Owner is the process that left it; Started when the server made the call a task.
	Owner   string
	Started time.Time
}

// BeginTask records that server made a call of this process task taskID, on protocol.
func (s *MCPTaskQuery) BeginTask(ctx context.Context, server, taskID, protocol string) error {
	row := mcpTaskRow{Server: server, TaskID: taskID, Protocol: protocol, Owner: s.process, StartedMs: time.Now().UnixMilli()}
	if err := s.w.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("store: MCP task %q of server %q in flight: %w", taskID, server, err)
	}
	return nil
}

// EndTask forgets a task of server this process is done with.
func (s *MCPTaskQuery) EndTask(ctx context.Context, server, taskID string) error {
	if err := s.w.WithContext(ctx).Exec(`DELETE FROM mcp_tasks_in_flight WHERE server = ? AND task_id = ?`,
		server, taskID).Error; err != nil {
		return fmt.Errorf("store: end MCP task %q of server %q: %w", taskID, server, err)
	}
	return nil
}

// TakeLeftTasks deletes and returns the tasks of server that processes now gone left in flight;
// each is returned to one caller only, across replicas.
func (s *MCPTaskQuery) TakeLeftTasks(ctx context.Context, server string) ([]LeftTask, error) {
	q := `DELETE FROM mcp_tasks_in_flight WHERE server = ? AND owner <> ?`
	if s.driver == DriverPostgres {
		q += ` AND owner NOT IN (SELECT id FROM instances)`
	}
	var rows []mcpTaskRow
	if err := s.w.WithContext(ctx).Raw(q+` RETURNING server, task_id, protocol, owner, started_ms`, server, s.process).
		Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: take the MCP tasks left in flight of server %q: %w", server, err)
	}
	out := make([]LeftTask, 0, len(rows))
	for _, r := range rows {
		out = append(out, LeftTask{TaskID: r.TaskID, Protocol: r.Protocol, Owner: r.Owner, Started: time.UnixMilli(r.StartedMs).UTC()})
	}
	return out, nil
}
