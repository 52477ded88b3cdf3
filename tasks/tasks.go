// Package tasks holds reminders and scheduled tasks: the schedule_task, list_tasks and
// cancel_task tools (offered by tools/native, answered here), the /tasks and /timezone commands
// (answered here for the pipeline), and the scheduler that fires each run once across the
// replicas, through the platform's delivery engine (a message) or the pipeline (a prompt, a
// turn as the task's owner). The rows are the store's (store.TaskQuery); the decision is
// docs/decisions/046-scheduled-tasks.md.
package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
	"relaybot/store"
)

// Kinds of task.
const (
	KindMessage = "message" // delivered as written, no model call
	KindPrompt  = "prompt"  // a model turn in the chat, as the owner
)

// Store is what the tasks need of the database (*store.TaskQuery).
type Store interface {
	CreateTask(ctx context.Context, t store.Task, max int) (store.Task, error)
	ListTasks(ctx context.Context, f store.TaskFilter) ([]store.Task, error)
	Task(ctx context.Context, id int64) (store.Task, error)
	CancelTask(ctx context.Context, id int64) (bool, error)
	DueWork(ctx context.Context, now time.Time, self store.Claimant, limit int) ([]store.Due, error)
	ClaimTaskRun(ctx context.Context, task, seq int64, scheduled time.Time, next *time.Time, status string, c store.Claimant) (int64, error)
	ReclaimTaskRun(ctx context.Context, d store.Due, c store.Claimant) (bool, error)
	EndTaskRun(ctx context.Context, run int64, c store.Claimant, e store.RunEnd) (held, paused bool, err error)
	RecordSkip(ctx context.Context, task int64, scheduled time.Time) error
	Timezone(ctx context.Context, platform, user string) (string, error)
	SetTimezone(ctx context.Context, platform, user, zone string) error
}

// Turns finds the turn a prompt run started (*store.TurnQuery): the run's id is its inbound
// message id.
type Turns interface {
	TurnByInbound(ctx context.Context, ref chat.Ref, inboundMessageID string) (store.Turn, bool, error)
}

// Platform delivers to one platform's chats (the Telegram and Discord adapters), through its
// delivery engine, with the budgets, 429s and fencing every reply has.
type Platform interface {
	// Post sends text in chat and returns once the platform confirmed it, or it failed.
	Post(ctx context.Context, chat chat.Ref, text string) error
	// ChatResponder answers a prompt task's turn in chat as a message's replies are answered.
	ChatResponder(chat chat.Ref) adapters.Responder
}

// Fence is the replica's membership where several replicas share the database
// (coord.Replica); nil for a single process, whose claims are never refused.
type Fence interface {
	// Fence returns once the replica's lease is confirmed, or ctx's error.
	Fence(ctx context.Context) error
	// Stamp marks ctx with the replica's registration now: work the delivery engine refuses
	// once a survivor took it over.
	Stamp(ctx context.Context) context.Context
	// StampedEpoch is the epoch Stamp put in ctx.
	StampedEpoch(ctx context.Context) int64
	// TakenOver reports an error refusing work that a survivor took over.
	TakenOver(err error) bool
}

// Options configure New.
type Options struct {
	Store Store
	Turns Turns
	// Platforms deliver the runs, by platform; a task is made only where one is. Deliver adds
	// the platforms built after the service.
	Platforms map[chat.Platform]Platform
	// Handler runs a prompt task's turn (the pipeline); nil refuses prompt tasks. Answer sets
	// it once the pipeline is built.
	Handler adapters.Handler
	// Fence and Instance are the replica's (coord.Replica, its id); nil and "" alone.
	Fence    Fence
	Instance string

	MaxPerUser   int           // tasks with runs to come per person (default 20)
	MinEvery     time.Duration // the shortest recurrence (default 5m)
	MisfireGrace time.Duration // how late a run still fires (default 1h)
	DefaultZone  string        // a person's zone until /timezone (default UTC)

	// Tick is how often the scheduler asks for due work (default and least 1s: one due-query
	// per second per replica at most).
	Tick time.Duration
	// Batch caps the work one due-query returns (default 200); Parallel the runs fired at once
	// (default 64).
	Batch, Parallel int
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Service answers the tools and commands and runs the scheduler.
type Service struct {
	opts Options
	log  *slog.Logger
	def  *time.Location

	mu        sync.RWMutex
	platforms map[chat.Platform]Platform
	handler   adapters.Handler
}

// Deliver adds platform p's deliveries; call it before the service runs.
func (s *Service) Deliver(p chat.Platform, pl Platform) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.platforms[p] = pl
}

// Answer sets the handler of prompt tasks' turns (the pipeline); call it before the service runs.
func (s *Service) Answer(h adapters.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = h
}

func (s *Service) platform(p chat.Platform) (Platform, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	pl, ok := s.platforms[p]
	return pl, ok
}

func (s *Service) answerer() adapters.Handler {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.handler
}

// Run tries before a run is recorded failed, and failed runs in a row that pause a task.
const (
	MaxTries       = 3
	PauseAfterRuns = 3
)

// New returns the service; it fails on an unknown DefaultZone.
func New(opts Options) (*Service, error) {
	if opts.MaxPerUser <= 0 {
		opts.MaxPerUser = 20
	}
	if opts.MinEvery <= 0 {
		opts.MinEvery = 5 * time.Minute
	}
	if opts.MisfireGrace <= 0 {
		opts.MisfireGrace = time.Hour
	}
	if opts.DefaultZone == "" {
		opts.DefaultZone = "UTC"
	}
	if opts.Tick < time.Second {
		opts.Tick = time.Second
	}
	if opts.Batch <= 0 {
		opts.Batch = 200
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 64
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	def, err := loadZone(opts.DefaultZone)
	if err != nil {
		return nil, fmt.Errorf("tasks: default_timezone: %w", err)
	}
	s := &Service{opts: opts, log: opts.Logger, def: def, platforms: map[chat.Platform]Platform{}, handler: opts.Handler}
	for p, pl := range opts.Platforms {
		s.platforms[p] = pl
	}
	return s, nil
}

// zoneOf is the zone person user on platform set, else the default.
func (s *Service) zoneOf(ctx context.Context, platform, user string) *time.Location {
	name, err := s.opts.Store.Timezone(ctx, platform, user)
	if err != nil {
		s.log.Warn("tasks: time zone not read; the default applies", "user", platform+":"+user, "err", err)
	}
	if loc, err := loadZone(name); err == nil {
		return loc
	}
	return s.def
}

// Caller is who asks a tool or a command, and where.
type Caller struct {
	// Chat is where the task runs: the thread or topic when there is one.
	Chat         chat.Ref
	ParentChatID string
	Private      bool
	UserID       string
	UserName     string
	// Admin is a bot admin; ChatAdmin an administrator of the chat.
	Admin, ChatAdmin bool
}

// describe is one task as /tasks and list_tasks show it, with its next run in loc.
func describe(t store.Task, loc *time.Location) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d ", t.ID)
	switch {
	case t.State == store.TaskPaused:
		b.WriteString("paused after failed runs")
	case t.NextRunAt != nil:
		b.WriteString("next " + FormatWhen(*t.NextRunAt, loc))
	default:
		b.WriteString("no runs to come")
	}
	if sch, err := ParseSchedule(t.Schedule); err == nil && sch.Recurring() {
		b.WriteString(" · " + sch.human(t.Timezone))
	}
	fmt.Fprintf(&b, " · %s: %s", t.Kind, clip(t.Text, 80))
	if t.LastStatus == store.RunFailed || t.LastStatus == store.RunRetry {
		fmt.Fprintf(&b, " · last run %s: %s", t.LastStatus, clip(t.LastError, 120))
	}
	return b.String()
}

// human is a recurring schedule in words.
func (s Schedule) human(zone string) string {
	if s.Cron != "" {
		return "cron " + s.Cron + " " + zone
	}
	return "every " + shortDuration(s.Every)
}

// shortDuration is d as a person writes it: "1d", "2h", "90m", "1h30m".
func shortDuration(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// clip cuts text to n runes on one line.
func clip(text string, n int) string {
	text = strings.Join(strings.Fields(text), " ")
	if r := []rune(text); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return text
}

// mayCancel reports whether c may cancel t: its owner, or an admin of the chat or the bot, in
// the task's chat.
func mayCancel(c Caller, t store.Task) bool {
	if string(c.Chat.Platform) != t.Platform || c.Chat.ChatID != t.ChatID {
		return false
	}
	return t.UserID == c.UserID || c.Admin || c.ChatAdmin
}

// refusal is a cancel refused for a reason the caller is told (the id argument's).
type refusal struct{ why string }

func (r refusal) Error() string { return "id: " + r.why }

// cancel cancels task id for c.
func (s *Service) cancel(ctx context.Context, c Caller, id int64) (string, error) {
	t, err := s.opts.Store.Task(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (string(c.Chat.Platform) != t.Platform || c.Chat.ChatID != t.ChatID)) {
		return "", refusal{fmt.Sprintf("there is no task %d in this chat", id)}
	}
	if err != nil {
		return "", err
	}
	if !mayCancel(c, t) {
		s.log.Info("tasks: cancel refused: not the owner's", "task", id, "user", c.UserID)
		return "", refusal{fmt.Sprintf("task %d is not yours: only its owner or an admin of this chat can cancel it", id)}
	}
	ok, err := s.opts.Store.CancelTask(ctx, id)
	if err != nil {
		return "", err
	}
	if !ok {
		return fmt.Sprintf("Task %d had no runs to come.", id), nil
	}
	s.log.Info("tasks: task cancelled", "task", id, "by", c.UserID)
	return fmt.Sprintf("Task %d cancelled.", id), nil
}

// list lists c's tasks in this chat, with their next runs in c's zone.
func (s *Service) list(ctx context.Context, c Caller) (string, error) {
	ts, err := s.opts.Store.ListTasks(ctx, store.TaskFilter{Platform: string(c.Chat.Platform), ChatID: c.Chat.ChatID, UserID: c.UserID, Live: true})
	if err != nil {
		return "", err
	}
	if len(ts) == 0 {
		return "You have no scheduled tasks in this chat.", nil
	}
	loc := s.zoneOf(ctx, string(c.Chat.Platform), c.UserID)
	lines := make([]string, 0, len(ts)+1)
	lines = append(lines, fmt.Sprintf("Your tasks in this chat (%s):", loc))
	for i := len(ts) - 1; i >= 0; i-- {
		lines = append(lines, describe(ts[i], loc))
	}
	return strings.Join(lines, "\n"), nil
}
