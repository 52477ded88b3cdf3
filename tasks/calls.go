package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
	"relaybot/store"
	"relaybot/tools"
)

// maxText caps a task's message or prompt, in characters.
const maxText = 4000

// maxAhead is how far ahead a one-time task may be.
const maxAhead = 5 * 366 * 24 * time.Hour

// scheduleArgs are schedule_task's arguments.
type scheduleArgs struct {
	Message *string `json:"message"`
	Prompt  *string `json:"prompt"`
	In      *string `json:"in"`
	At      *string `json:"at"`
	Cron    *string `json:"cron"`
	Every   *string `json:"every"`
	TZ      *string `json:"tz"`
}

// CallerOf is who asks a tool call: the turn's chat (its thread or topic, the most specific of
// its rule chats), its user and their rights.
func CallerOf(turn tools.TurnInfo) Caller {
	c := Caller{Chat: chat.Ref{Platform: chat.Platform(turn.Platform), ChatID: turn.ChatID}, Private: turn.Private,
		UserID: turn.UserID, Admin: turn.Admin, ChatAdmin: turn.ChatAdmin}
	if len(turn.RuleChats) > 0 {
		c.Chat = turn.RuleChats[0]
		for _, r := range turn.RuleChats[1:] {
			if r.ChatID != c.Chat.ChatID {
				c.ParentChatID = r.ChatID
			}
		}
	}
	return c
}

// ScheduleTask answers schedule_task: it makes the task and names its number and next run in
// the owner's zone. A bad or contradictory argument is an error naming it.
func (s *Service) ScheduleTask(ctx context.Context, turn tools.TurnInfo, raw json.RawMessage) (string, error) {
	c := CallerOf(turn)
	var a scheduleArgs
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return "", fmt.Errorf("bad arguments: %w", err)
	}
	t, sch, loc, err := s.build(ctx, c, a)
	if err != nil {
		return "", err
	}
	t, err = s.opts.Store.CreateTask(ctx, t, s.opts.MaxPerUser)
	if errors.Is(err, store.ErrTooManyTasks) {
		return "", fmt.Errorf("you already have %d scheduled tasks (max_per_user); cancel one first", s.opts.MaxPerUser)
	}
	if err != nil {
		return "", err
	}
	s.log.Info("tasks: task scheduled", "task", t.ID, "user", c.UserID, "chat", c.Chat.String(), "kind", t.Kind, "schedule", t.Schedule)
	// The next run in the owner's zone, and in the task's when tz named another.
	owner := s.zoneOf(ctx, string(c.Chat.Platform), c.UserID)
	when := FormatWhen(*t.NextRunAt, owner)
	if loc.String() != owner.String() {
		when += " (" + FormatWhen(*t.NextRunAt, loc) + ")"
	}
	every := ""
	if sch.Recurring() {
		every = ", then " + sch.human(loc.String())
	}
	return fmt.Sprintf("Task %d scheduled: next %s%s.", t.ID, when, every), nil
}

// build checks a's arguments and returns the task they make, its schedule and zone.
func (s *Service) build(ctx context.Context, c Caller, a scheduleArgs) (store.Task, Schedule, *time.Location, error) {
	var t store.Task
	if _, ok := s.platform(c.Chat.Platform); !ok {
		return t, Schedule{}, nil, fmt.Errorf("scheduled tasks cannot be delivered on %s", c.Chat.Platform)
	}
	kind, text, err := s.payload(a)
	if err != nil {
		return t, Schedule{}, nil, err
	}
	loc := s.zoneOf(ctx, string(c.Chat.Platform), c.UserID)
	if a.TZ != nil {
		if loc, err = loadZone(*a.TZ); err != nil {
			return t, Schedule{}, nil, fmt.Errorf("tz: %w", err)
		}
	}
	now := s.opts.Now().UTC().Truncate(time.Second)
	sch, err := s.when(a, now, loc)
	if err != nil {
		return t, Schedule{}, nil, err
	}
	next, ok := sch.Next(now, time.Time{}, loc)
	if !ok {
		return t, Schedule{}, nil, errors.New("the schedule has no run to come")
	}
	t = store.Task{Platform: string(c.Chat.Platform), ChatID: c.Chat.ChatID, ThreadID: c.Chat.ThreadID, ParentChatID: c.ParentChatID,
		Private: c.Private, UserID: c.UserID, UserName: c.UserName, Kind: kind, Text: text, Schedule: sch.String(),
		Timezone: loc.String(), State: store.TaskActive, NextRunAt: &next}
	return t, sch, loc, nil
}

// payload is the task's kind and text: exactly one of message and prompt.
func (s *Service) payload(a scheduleArgs) (kind, text string, err error) {
	switch {
	case a.Message != nil && a.Prompt != nil:
		return "", "", errors.New("message, prompt: give exactly one of them")
	case a.Message != nil:
		kind, text = KindMessage, strings.TrimSpace(*a.Message)
	case a.Prompt != nil:
		if s.answerer() == nil {
			return "", "", errors.New("prompt: prompt tasks are not available here; use message")
		}
		kind, text = KindPrompt, strings.TrimSpace(*a.Prompt)
	default:
		return "", "", errors.New("message, prompt: give exactly one of them")
	}
	if text == "" {
		return "", "", fmt.Errorf("%s: empty", kind)
	}
	if len([]rune(text)) > maxText {
		return "", "", fmt.Errorf("%s: longer than %d characters", kind, maxText)
	}
	return kind, text, nil
}

// when is the schedule of exactly one of in, at, cron and every; the bot computes the time.
func (s *Service) when(a scheduleArgs, now time.Time, loc *time.Location) (Schedule, error) {
	var given []string
	for name, v := range map[string]*string{"in": a.In, "at": a.At, "cron": a.Cron, "every": a.Every} {
		if v != nil {
			given = append(given, name)
		}
	}
	if len(given) != 1 {
		return Schedule{}, errors.New("in, at, cron, every: give exactly one of them")
	}
	switch {
	case a.In != nil:
		d, err := parseIn(*a.In)
		if err != nil {
			return Schedule{}, fmt.Errorf("in: %w", err)
		}
		if d > maxAhead {
			return Schedule{}, fmt.Errorf("in: %q is more than five years ahead", *a.In)
		}
		return Schedule{Once: now.Add(d).Truncate(time.Second)}, nil
	case a.At != nil:
		t, err := parseAt(*a.At, loc)
		if err != nil {
			return Schedule{}, fmt.Errorf("at: %w", err)
		}
		if !t.After(now) {
			return Schedule{}, fmt.Errorf("at: %s is not in the future (now is %s)", FormatWhen(t, loc), FormatWhen(now, loc))
		}
		if t.Sub(now) > maxAhead {
			return Schedule{}, fmt.Errorf("at: %q is more than five years ahead", *a.At)
		}
		return Schedule{Once: t.UTC().Truncate(time.Second)}, nil
	case a.Cron != nil:
		sch, err := cronSchedule(*a.Cron)
		if err != nil {
			return Schedule{}, fmt.Errorf("cron: %w", err)
		}
		if gap := sch.shortestGap(now, loc, 50); gap < s.opts.MinEvery {
			return Schedule{}, fmt.Errorf("cron: runs %s apart; the shortest recurrence is %s (min_every)", shortDuration(gap), shortDuration(s.opts.MinEvery))
		}
		return sch, nil
	default:
		d, err := parseIn(*a.Every)
		if err != nil {
			return Schedule{}, fmt.Errorf("every: %w", err)
		}
		if d < s.opts.MinEvery {
			return Schedule{}, fmt.Errorf("every: %q is shorter than %s, the shortest recurrence (min_every)", *a.Every, shortDuration(s.opts.MinEvery))
		}
		return Schedule{Every: d, First: now.Add(d)}, nil
	}
}

// ListTasks answers list_tasks: the caller's tasks in this chat.
func (s *Service) ListTasks(ctx context.Context, turn tools.TurnInfo) (string, error) {
	return s.list(ctx, CallerOf(turn))
}

// CancelTask answers cancel_task: its owner, or an admin of the chat or the bot, cancels it.
func (s *Service) CancelTask(ctx context.Context, turn tools.TurnInfo, id int64) (string, error) {
	return s.cancel(ctx, CallerOf(turn), id)
}

// Command answers /tasks, /tasks cancel N, /timezone and /timezone ZONE for the message in;
// admin says the sender is a bot admin.
func (s *Service) Command(ctx context.Context, in adapters.Inbound, admin bool) (string, error) {
	c := Caller{Chat: in.Chat, ParentChatID: in.ParentChatID, Private: in.Kind == adapters.Private,
		UserID: in.UserID, UserName: in.UserName, Admin: admin, ChatAdmin: in.ChatAdmin}
	args := strings.Fields(in.Args)
	switch in.Command {
	case "timezone":
		return s.timezone(ctx, c, args)
	case "tasks":
		if len(args) == 0 {
			return s.list(ctx, c)
		}
		if len(args) == 1 && args[0] != "cancel" {
			// Discord's slash command gives the cancel option's value alone.
			args = []string{"cancel", args[0]}
		}
		if len(args) == 2 && args[0] == "cancel" {
			id, err := strconv.ParseInt(strings.TrimPrefix(args[1], "#"), 10, 64)
			if err != nil || id <= 0 {
				return "Usage: /tasks cancel N, N being a number /tasks shows.", nil
			}
			text, err := s.cancel(ctx, c, id)
			if r, ok := errors.AsType[refusal](err); ok {
				return "Not cancelled: " + r.why + ".", nil
			}
			return text, err
		}
		return "Usage: /tasks, or /tasks cancel N.", nil
	}
	return "", fmt.Errorf("tasks: unknown command %q", in.Command)
}

// timezone shows or sets the sender's zone.
func (s *Service) timezone(ctx context.Context, c Caller, args []string) (string, error) {
	p := string(c.Chat.Platform)
	if len(args) == 0 {
		loc := s.zoneOf(ctx, p, c.UserID)
		return fmt.Sprintf("Your time zone is %s (now %s). Set it with /timezone ZONE, e.g. /timezone Europe/Berlin.",
			loc, s.opts.Now().In(loc).Format("Mon 2 Jan 15:04")), nil
	}
	if len(args) > 1 {
		return "Usage: /timezone ZONE, an IANA name such as Europe/Berlin.", nil
	}
	loc, err := loadZone(args[0])
	if err != nil {
		return fmt.Sprintf("Not set: %q is not a time zone; use an IANA name such as Europe/Berlin or America/New_York.", args[0]), nil
	}
	if err := s.opts.Store.SetTimezone(ctx, p, c.UserID, loc.String()); err != nil {
		return "", err
	}
	return fmt.Sprintf("Your time zone is now %s (now %s). Tasks you make from now on use it.", loc, s.opts.Now().In(loc).Format("Mon 2 Jan 15:04")), nil
}
