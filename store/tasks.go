package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// TaskQuery reads and writes the tasks, task_runs and user_timezones tables: reminders and
// scheduled tasks (package tasks holds their logic). Every claim and every end of a run is
// fenced: it lands only while the registration (instance and epoch) that claims it is still the
// replica's in the instances table, or always where there is none (epoch 0, a single process).
// The SQL is plain and the same on both dialects: the compare-and-sets say what GORM cannot.
type TaskQuery struct{ *conn }

// States of a task.
const (
	TaskActive    = "active"    // runs to come
	TaskPaused    = "paused"    // three failed runs in a row; no runs until made again
	TaskDone      = "done"      // no runs to come
	TaskCancelled = "cancelled" // cancelled by its owner or an admin
)

// Statuses of a task run.
const (
	RunClaimed   = "claimed"   // a replica is firing it
	RunRetry     = "retry"     // a try failed; another is due at next_try_at
	RunDelivered = "delivered" // the platform confirmed the delivery
	RunFailed    = "failed"    // every try failed
	RunSkipped   = "skipped"   // missed by more than the grace: not fired, its owner told
)

// ErrTooManyTasks refuses a task beyond its owner's limit.
var ErrTooManyTasks = errors.New("store: too many tasks")

// Task is a tasks row.
type Task struct {
	ID           int64
	Platform     string
	ChatID       string
	ThreadID     string
	ParentChatID string
	Private      bool
	UserID       string
	UserName     string
	// Kind is "message" (delivered as written) or "prompt" (a model turn as the owner).
	Kind string
	Text string
	// Schedule is how the task recurs, as package tasks writes it ("at …", "cron …", "every …").
	Schedule string
	Timezone string
	State    string
	// NextRunAt is the next run (UTC); nil once there is none.
	NextRunAt *time.Time
	// Seq changes with each claim: the compare-and-set of ClaimTaskRun.
	Seq        int64
	Runs       int
	Failures   int // failed runs in a row
	LastRunAt  *time.Time
	LastStatus string
	LastError  string
	CreatedAt  time.Time
}

// TableName is the table of Task.
func (Task) TableName() string { return "tasks" }

// TaskRun is a task_runs row: one run of a task at its scheduled time.
type TaskRun struct {
	ID          int64
	TaskID      int64
	ScheduledAt time.Time
	Status      string
	InstanceID  string
	Epoch       int64
	Attempts    int
	NextTryAt   *time.Time
	Error       string
	TurnID      int64
	ClaimedAt   time.Time
	FinishedAt  *time.Time
}

// TableName is the table of TaskRun.
func (TaskRun) TableName() string { return "task_runs" }

// Claimant is the registration a run is claimed and finished under: the replica's id and the
// epoch of its registration; epoch 0 where no replicas are registered (a single process).
type Claimant struct {
	Instance string
	Epoch    int64
}

// fence is the condition that holds a write to c's registration, and its arguments: on
// PostgreSQL the instances row of c's id and epoch must be there (epoch 0: no replicas); on
// SQLite, one process alone, nothing holds it.
func (s *TaskQuery) fence(c Claimant) (string, []any) {
	if s.driver != DriverPostgres {
		return "1 = 1", nil
	}
	return `(? = 0 OR EXISTS (SELECT 1 FROM instances WHERE id = ? AND epoch = ?))`, []any{c.Epoch, c.Instance, c.Epoch}
}

// gone is the condition on a claimed run of task_runs whose registration is gone, other than
// self's, and its arguments: on PostgreSQL one no longer in the instances table (taken over, or
// left); on SQLite one a previous process claimed.
func (s *TaskQuery) gone(self Claimant) (string, []any) {
	if s.driver != DriverPostgres {
		return "instance_id <> ?", []any{self.Instance}
	}
	return `NOT (instance_id = ? AND epoch = ?)
		AND NOT EXISTS (SELECT 1 FROM instances WHERE instances.id = task_runs.instance_id AND instances.epoch = task_runs.epoch)`,
		[]any{self.Instance, self.Epoch}
}

// CreateTask adds t (its ID, Seq and CreatedAt are set here) unless its owner already keeps
// max tasks with runs to come, and returns it as stored.
func (s *TaskQuery) CreateTask(ctx context.Context, t Task, max int) (Task, error) {
	t.ID, t.Seq, t.CreatedAt = 0, 0, now()
	if t.NextRunAt != nil {
		n := dbTime(*t.NextRunAt)
		t.NextRunAt = &n
	}
	err := s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&Task{}).Where("platform = ? AND user_id = ? AND state = ?", t.Platform, t.UserID, TaskActive).Count(&n).Error; err != nil {
			return err
		}
		if n >= int64(max) {
			return ErrTooManyTasks
		}
		return tx.Create(&t).Error
	})
	if err != nil {
		if errors.Is(err, ErrTooManyTasks) {
			return Task{}, err
		}
		return Task{}, fmt.Errorf("store: create task for %s:%s: %w", t.Platform, t.UserID, err)
	}
	return t, nil
}

// TaskFilter selects tasks; empty fields match all.
type TaskFilter struct {
	Platform, ChatID, UserID string
	// Live keeps the active and paused tasks only.
	Live bool
	// Limit caps the tasks returned (newest first); 0 means 500.
	Limit int
}

// ListTasks returns the tasks f selects, newest first.
func (s *TaskQuery) ListTasks(ctx context.Context, f TaskFilter) ([]Task, error) {
	q := s.r.WithContext(ctx).Model(&Task{})
	if f.Platform != "" {
		q = q.Where("platform = ?", f.Platform)
	}
	if f.ChatID != "" {
		q = q.Where("chat_id = ?", f.ChatID)
	}
	if f.UserID != "" {
		q = q.Where("user_id = ?", f.UserID)
	}
	if f.Live {
		q = q.Where("state IN ?", []string{TaskActive, TaskPaused})
	}
	if f.Limit <= 0 {
		f.Limit = 500
	}
	var out []Task
	if err := q.Order("id DESC").Limit(f.Limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("store: list tasks: %w", err)
	}
	for i := range out {
		out[i].utc()
	}
	return out, nil
}

// Task returns the task id, ErrNotFound when there is none.
func (s *TaskQuery) Task(ctx context.Context, id int64) (Task, error) {
	var t Task
	err := s.r.WithContext(ctx).Where("id = ?", id).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Task{}, fmt.Errorf("store: task %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Task{}, fmt.Errorf("store: task %d: %w", id, err)
	}
	t.utc()
	return t, nil
}

func (t *Task) utc() {
	t.CreatedAt = t.CreatedAt.UTC()
	for _, p := range []*time.Time{t.NextRunAt, t.LastRunAt} {
		if p != nil {
			*p = p.UTC()
		}
	}
}

// CancelTask ends task id: it has no runs to come. It reports false when the task had already
// ended (done or cancelled) or does not exist.
func (s *TaskQuery) CancelTask(ctx context.Context, id int64) (bool, error) {
	res := s.w.WithContext(ctx).Exec(`UPDATE tasks SET state = ?, next_run_at = NULL, seq = seq + 1
		WHERE id = ? AND state IN (?, ?)`, TaskCancelled, id, TaskActive, TaskPaused)
	if res.Error != nil {
		return false, fmt.Errorf("store: cancel task %d: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// Due is one piece of work the scheduler finds due: a task whose next run has come (Run 0), or
// a run to try again or to take over from a replica that is gone (Run set).
type Due struct {
	Task int64
	Seq  int64
	// At is the task's next run, or the run's scheduled time.
	At  time.Time
	Run int64
	// Status, Instance, Epoch and Attempts are the run's as read: the compare-and-set of
	// ReclaimTaskRun.
	Status   string
	Instance string
	Epoch    int64
	Attempts int
}

// DueWork is the scheduler's one query per tick: up to limit tasks whose next run is at or
// before now, and up to limit runs due again (a retry whose time has come, or a run claimed by
// a registration that is no longer in the instances table, other than self's).
func (s *TaskQuery) DueWork(ctx context.Context, now time.Time, self Claimant, limit int) ([]Due, error) {
	var rows []struct {
		Task     int64
		Seq      int64
		At       time.Time
		Run      int64
		Status   string
		Instance string
		Epoch    int64
		Attempts int
	}
	t := dbTime(now)
	gone, goneArgs := s.gone(self)
	args := append([]any{TaskActive, t, limit, RunRetry, t, RunClaimed}, goneArgs...)
	err := s.r.WithContext(ctx).Raw(`SELECT * FROM (SELECT id AS task, seq, next_run_at AS at, 0 AS run, '' AS status, '' AS instance, 0 AS epoch, 0 AS attempts
			FROM tasks WHERE state = ? AND next_run_at <= ? ORDER BY next_run_at LIMIT ?) AS due_tasks
		UNION ALL
		SELECT * FROM (SELECT task_id AS task, 0 AS seq, scheduled_at AS at, id AS run, status, instance_id AS instance, epoch, attempts
			FROM task_runs
			WHERE (status = ? AND next_try_at <= ?) OR (status = ? AND `+gone+`)
			ORDER BY id LIMIT ?) AS due_runs`,
		append(args, limit)...).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: due tasks: %w", err)
	}
	out := make([]Due, len(rows))
	for i, r := range rows {
		out[i] = Due{Task: r.Task, Seq: r.Seq, At: r.At.UTC(), Run: r.Run, Status: r.Status, Instance: r.Instance, Epoch: r.Epoch, Attempts: r.Attempts}
	}
	return out, nil
}

// ClaimTaskRun claims the run of task at scheduled for c, in one transaction: the task moves on
// to next (nil: no runs to come, the task is done) only if its seq is still seq, and the run's
// row is written with status (RunClaimed, or RunSkipped for a run too late to fire). It reports
// the run's id, or 0 when another replica claimed it first or c's registration is gone.
func (s *TaskQuery) ClaimTaskRun(ctx context.Context, task, seq int64, scheduled time.Time, next *time.Time, status string, c Claimant) (int64, error) {
	var id int64
	at := dbTime(scheduled)
	err := s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		state, nextAt := TaskActive, any(nil)
		if next != nil {
			nextAt = dbTime(*next)
		} else {
			state = TaskDone
		}
		fence, fenceArgs := s.fence(c)
		res := tx.Exec(`UPDATE tasks SET next_run_at = ?, state = ?, seq = seq + 1
			WHERE id = ? AND seq = ? AND state = ? AND `+fence,
			append([]any{nextAt, state, task, seq, TaskActive}, fenceArgs...)...)
		if res.Error != nil || res.RowsAffected != 1 {
			return res.Error
		}
		var finished any
		if status != RunClaimed {
			finished = now()
		}
		res = tx.Exec(`INSERT INTO task_runs (task_id, scheduled_at, status, instance_id, epoch, claimed_at, finished_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (task_id, scheduled_at) DO NOTHING`,
			task, at, status, c.Instance, c.Epoch, now(), finished)
		if res.Error != nil || res.RowsAffected != 1 {
			return res.Error
		}
		return tx.Raw(`SELECT id FROM task_runs WHERE task_id = ? AND scheduled_at = ?`, task, at).Scan(&id).Error
	})
	if err != nil {
		return 0, fmt.Errorf("store: claim run of task %d at %s: %w", task, at.Format(time.RFC3339), err)
	}
	return id, nil
}

// ReclaimTaskRun claims run d.Run again for c (a retry, or the run of a replica taken over)
// only if it is still as d read it; it reports whether c has it now.
func (s *TaskQuery) ReclaimTaskRun(ctx context.Context, d Due, c Claimant) (bool, error) {
	fence, fenceArgs := s.fence(c)
	res := s.w.WithContext(ctx).Exec(`UPDATE task_runs SET status = ?, instance_id = ?, epoch = ?, claimed_at = ?, next_try_at = NULL
		WHERE id = ? AND status = ? AND instance_id = ? AND epoch = ? AND attempts = ? AND `+fence,
		append([]any{RunClaimed, c.Instance, c.Epoch, now(), d.Run, d.Status, d.Instance, d.Epoch, d.Attempts}, fenceArgs...)...)
	if res.Error != nil {
		return false, fmt.Errorf("store: claim run %d again: %w", d.Run, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// RunEnd is how one try of a run ended.
type RunEnd struct {
	// Status is RunDelivered, RunRetry (then NextTry is set) or RunFailed.
	Status  string
	NextTry time.Time
	Error   string
	TurnID  int64
	// PauseAfter pauses the task once this many runs in a row have failed (0: never).
	PauseAfter int
}

// EndTaskRun records how c's try of run ended and, when the run is over, the task's last run;
// it reports false when c no longer holds the run (a survivor took it over), and whether the
// task was paused by this failure.
func (s *TaskQuery) EndTaskRun(ctx context.Context, run int64, c Claimant, e RunEnd) (held, paused bool, err error) {
	err = s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var nextTry, finished any
		if e.Status == RunRetry {
			nextTry = dbTime(e.NextTry)
		} else {
			finished = now()
		}
		fence, fenceArgs := s.fence(c)
		res := tx.Exec(`UPDATE task_runs SET status = ?, attempts = attempts + 1, next_try_at = ?, error = ?, turn_id = ?, finished_at = ?
			WHERE id = ? AND status = ? AND instance_id = ? AND epoch = ? AND `+fence,
			append([]any{e.Status, nextTry, e.Error, e.TurnID, finished, run, RunClaimed, c.Instance, c.Epoch}, fenceArgs...)...)
		if res.Error != nil || res.RowsAffected != 1 {
			return res.Error
		}
		held = true
		return s.endTask(tx, run, e, &paused)
	})
	if err != nil {
		return false, false, fmt.Errorf("store: end run %d: %w", run, err)
	}
	return held, paused, nil
}

// endTask records a run's end on its task: its last run, its runs and failures in a row, and
// the pause after PauseAfter failures.
func (s *TaskQuery) endTask(tx *gorm.DB, run int64, e RunEnd, paused *bool) error {
	var r TaskRun
	if err := tx.Where("id = ?", run).Take(&r).Error; err != nil {
		return err
	}
	status, failures := e.Status, "0"
	switch e.Status {
	case RunRetry:
		status = RunRetry
		failures = "failures"
	case RunFailed:
		failures = "failures + 1"
	}
	runs := "runs"
	if e.Status != RunRetry {
		runs = "runs + 1"
	}
	if err := tx.Exec(`UPDATE tasks SET last_run_at = ?, last_status = ?, last_error = ?, runs = `+runs+`, failures = `+failures+` WHERE id = ?`,
		dbTime(r.ScheduledAt), status, e.Error, r.TaskID).Error; err != nil {
		return err
	}
	if e.Status != RunFailed || e.PauseAfter <= 0 {
		return nil
	}
	res := tx.Exec(`UPDATE tasks SET state = ?, next_run_at = NULL, seq = seq + 1 WHERE id = ? AND state = ? AND failures >= ?`,
		TaskPaused, r.TaskID, TaskActive, e.PauseAfter)
	*paused = res.RowsAffected == 1
	return res.Error
}

// RecordSkip records on task that the run at scheduled was skipped (too late to fire).
func (s *TaskQuery) RecordSkip(ctx context.Context, task int64, scheduled time.Time) error {
	err := s.w.WithContext(ctx).Exec(`UPDATE tasks SET last_run_at = ?, last_status = ?, last_error = ? WHERE id = ?`,
		dbTime(scheduled), RunSkipped, "missed while the bot was down", task).Error
	if err != nil {
		return fmt.Errorf("store: record skipped run of task %d: %w", task, err)
	}
	return nil
}

// TaskRuns returns the latest runs of task, newest first, up to limit.
func (s *TaskQuery) TaskRuns(ctx context.Context, task int64, limit int) ([]TaskRun, error) {
	var out []TaskRun
	if err := s.r.WithContext(ctx).Where("task_id = ?", task).Order("scheduled_at DESC, id DESC").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("store: runs of task %d: %w", task, err)
	}
	for i := range out {
		out[i].ScheduledAt, out[i].ClaimedAt = out[i].ScheduledAt.UTC(), out[i].ClaimedAt.UTC()
	}
	return out, nil
}

// Timezone returns the zone user set on platform, "" when none.
func (s *TaskQuery) Timezone(ctx context.Context, platform, user string) (string, error) {
	var zones []string
	if err := s.r.WithContext(ctx).Table("user_timezones").Where("platform = ? AND user_id = ?", platform, user).Pluck("timezone", &zones).Error; err != nil {
		return "", fmt.Errorf("store: time zone of %s:%s: %w", platform, user, err)
	}
	if len(zones) == 0 {
		return "", nil
	}
	return zones[0], nil
}

// SetTimezone sets the zone of user on platform.
func (s *TaskQuery) SetTimezone(ctx context.Context, platform, user, zone string) error {
	err := s.w.WithContext(ctx).Exec(`INSERT INTO user_timezones (platform, user_id, timezone, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (platform, user_id) DO UPDATE SET timezone = excluded.timezone, updated_at = excluded.updated_at`,
		platform, user, zone, now()).Error
	if err != nil {
		return fmt.Errorf("store: set the time zone of %s:%s: %w", platform, user, err)
	}
	return nil
}
