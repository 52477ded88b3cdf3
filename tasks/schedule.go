package tasks

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // zones resolve on hosts without a zoneinfo database

	"github.com/robfig/cron/v3"
)

// Schedule is when a task runs, in its zone: once (at), by a cron expression, or every fixed
// duration from its first run. It is kept in the tasks table as its String.
type Schedule struct {
	// Once is the one run of a task made with in or at (UTC); zero for a recurring task.
	Once time.Time
	// Cron is the 5-field expression of a cron task.
	Cron string
	// Every is the period of an "every" task; its runs are First, First+Every, ….
	Every time.Duration
	First time.Time

	cron cron.Schedule
}

// cronParser reads the standard 5 fields only: no descriptors (@every would bypass min_every),
// no seconds. A TZ= prefix is refused before it is asked (the task's tz says the zone).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// String is the schedule as stored: "at 2026-12-08T00:00:00Z", "cron 0 9 * * 1" or
// "every 2h0m0s from 2026-12-08T00:00:00Z".
func (s Schedule) String() string {
	switch {
	case s.Cron != "":
		return "cron " + s.Cron
	case s.Every > 0:
		return "every " + s.Every.String() + " from " + s.First.UTC().Format(time.RFC3339)
	default:
		return "at " + s.Once.UTC().Format(time.RFC3339)
	}
}

// ParseSchedule reads a stored schedule (String).
func ParseSchedule(text string) (Schedule, error) {
	kind, rest, _ := strings.Cut(text, " ")
	switch kind {
	case "at":
		t, err := time.Parse(time.RFC3339, rest)
		if err != nil {
			return Schedule{}, fmt.Errorf("tasks: schedule %q: %w", text, err)
		}
		return Schedule{Once: t}, nil
	case "cron":
		return cronSchedule(rest)
	case "every":
		d, from, ok := strings.Cut(rest, " from ")
		every, err := time.ParseDuration(d)
		if !ok || err != nil || every <= 0 {
			return Schedule{}, fmt.Errorf("tasks: schedule %q: not an every schedule", text)
		}
		first, err := time.Parse(time.RFC3339, from)
		if err != nil {
			return Schedule{}, fmt.Errorf("tasks: schedule %q: %w", text, err)
		}
		return Schedule{Every: every, First: first}, nil
	}
	return Schedule{}, fmt.Errorf("tasks: schedule %q: unknown kind", text)
}

func cronSchedule(expr string) (Schedule, error) {
	expr = strings.Join(strings.Fields(expr), " ")
	if strings.Contains(strings.ToUpper(expr), "TZ=") {
		return Schedule{}, errors.New("a time zone goes in tz, not in the expression")
	}
	if len(strings.Fields(expr)) != 5 {
		return Schedule{}, fmt.Errorf("%q is not a 5-field cron expression (minute hour day-of-month month day-of-week)", expr)
	}
	c, err := cronParser.Parse(expr)
	if err != nil {
		return Schedule{}, fmt.Errorf("%q: %w", expr, err)
	}
	return Schedule{Cron: expr, cron: c}, nil
}

// Recurring reports whether the task has more than one run.
func (s Schedule) Recurring() bool { return s.Cron != "" || s.Every > 0 }

// maxCronTries bounds the search of a cron schedule for a run that is not a repeat of the
// previous one's wall-clock time.
const maxCronTries = 4

// Next is the first run strictly after after, in loc; false when there is none (a one-time task
// whose run is past). A cron task follows daylight saving as robfig/cron/v3 defines it: a time
// the spring-forward day skips (02:30 in Europe/Berlin on 29 March 2026) does not run that day
// (the next run is the next day's 02:30); a time the autumn day repeats runs once, at its first
// occurrence. prev, when not zero, is the run before: a run at the same wall-clock minute of
// the same day as prev (the repeated hour) is passed over, should the parser ever offer one.
func (s Schedule) Next(after, prev time.Time, loc *time.Location) (time.Time, bool) {
	switch {
	case s.Cron != "":
		t := after.In(loc)
		for range maxCronTries {
			t = s.cron.Next(t)
			if t.IsZero() {
				return time.Time{}, false
			}
			if prev.IsZero() || !sameWallMinute(t, prev.In(loc)) {
				return t.UTC(), true
			}
		}
		return time.Time{}, false
	case s.Every > 0:
		if after.Before(s.First) {
			return s.First.UTC(), true
		}
		n := after.Sub(s.First)/s.Every + 1
		return s.First.Add(n * s.Every).UTC(), true
	default:
		if s.Once.After(after) {
			return s.Once.UTC(), true
		}
		return time.Time{}, false
	}
}

func sameWallMinute(a, b time.Time) bool {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return ay == by && am == bm && ad == bd && a.Hour() == b.Hour() && a.Minute() == b.Minute()
}

// shortestGap is the shortest time between the next n runs of a cron schedule after from.
func (s Schedule) shortestGap(from time.Time, loc *time.Location, n int) time.Duration {
	gap := time.Duration(1<<63 - 1)
	prev, _ := s.Next(from, time.Time{}, loc)
	for range n {
		t, ok := s.Next(prev, prev, loc)
		if !ok {
			break
		}
		gap = min(gap, t.Sub(prev))
		prev = t
	}
	return gap
}

// parseIn reads a relative time: a Go duration ("90s", "15m", "2h30m") or whole days ("1d").
func parseIn(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%q is not a number of days such as \"1d\"", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as \"90s\", \"15m\", \"2h\" or \"1d\"", v)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q is not in the future", v)
	}
	return d, nil
}

// parseAt reads "2006-01-02 15:04" in loc, or an RFC 3339 time. A local time the
// spring-forward day skips is refused: it does not exist on that day.
func parseAt(v string, loc *time.Location) (time.Time, error) {
	v = strings.TrimSpace(v)
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	t, err := time.ParseInLocation("2006-01-02 15:04", v, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither \"2006-01-02 15:04\" nor RFC 3339", v)
	}
	if t.Format("2006-01-02 15:04") != v {
		return time.Time{}, fmt.Errorf("%s does not exist in %s (the clocks skip it)", v, loc)
	}
	return t, nil
}

// loadZone resolves an IANA zone name; "Local" and "" are refused (the host's zone is nobody's).
func loadZone(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("unknown time zone %q; use an IANA name such as Europe/Berlin", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q; use an IANA name such as Europe/Berlin", name)
	}
	return loc, nil
}

// FormatWhen is a run's time as the owner reads it: "Tue 8 Dec 09:00 Asia/Tokyo".
func FormatWhen(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("Mon 2 Jan 15:04") + " " + loc.String()
}
