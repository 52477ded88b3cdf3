package tasks

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"relaybot/chat"
	"relaybot/store"
)

// drainWait is how long a run under way may still take once the scheduler stops.
const drainWait = 30 * time.Second

// fenceWait bounds how long a tick waits for the replica's lease before it skips the tick.
const fenceWait = 2 * time.Second

// backoff is the wait before a run's next try: 30 s, then 2 min.
func backoff(tries int) time.Duration {
	d := 30 * time.Second
	for range tries - 1 {
		d *= 4
	}
	return d
}

// Run asks for due work once per tick and fires what this replica claims, until ctx ends; it
// then waits for the runs it fired. A run is claimed by one replica only (store.ClaimTaskRun
// and ReclaimTaskRun are compare-and-sets fenced by the replica's registration), and its
// delivery runs under a context stamped with that registration, so a replica paused or cut off
// while a survivor took its runs over sends nothing when it wakes.
func (s *Service) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, s.opts.Parallel)
	tick := time.NewTicker(s.opts.Tick)
	defer tick.Stop()
	for {
		s.tick(ctx, &wg, slots)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// claimant is this replica's registration for work begun now, and ctx stamped with it.
func (s *Service) claimant(ctx context.Context) (context.Context, store.Claimant, error) {
	c := store.Claimant{Instance: s.opts.Instance}
	if s.opts.Fence == nil {
		return ctx, c, nil
	}
	fctx, cancel := context.WithTimeout(ctx, fenceWait)
	err := s.opts.Fence.Fence(fctx)
	cancel()
	if err != nil {
		return ctx, c, err
	}
	ctx = s.opts.Fence.Stamp(ctx)
	c.Epoch = s.opts.Fence.StampedEpoch(ctx)
	return ctx, c, nil
}

// tick runs one due-query and claims and fires what it found, while slots are free. It reads
// three times as much as it has free slots for and tries them in a random order, so replicas
// ticking at once mostly claim different runs instead of racing for the same first ones.
func (s *Service) tick(ctx context.Context, wg *sync.WaitGroup, slots chan struct{}) {
	free := cap(slots) - len(slots)
	if free == 0 {
		return // busy: the due work waits for the next tick
	}
	wctx, c, err := s.claimant(ctx)
	if err != nil {
		return // fenced: nothing is claimed until the lease is confirmed
	}
	now := s.opts.Now()
	due, err := s.opts.Store.DueWork(ctx, now, c, min(s.opts.Batch, 3*free))
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("tasks: due work not read", "err", err)
		}
		return
	}
	rand.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
	for _, d := range due {
		select {
		case slots <- struct{}{}:
		default:
			return // every slot taken: the rest waits for the next tick
		}
		r, ok := s.claim(wctx, d, c, now)
		if !ok {
			<-slots
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			// A run under way is not cut by the shutdown at once: a send cut mid-request may
			// have reached the platform. It gets drainWait to end.
			fctx, cancel := context.WithCancel(context.WithoutCancel(wctx))
			defer cancel()
			stop := context.AfterFunc(ctx, func() { time.AfterFunc(drainWait, cancel) })
			defer stop()
			s.fire(fctx, r)
		}()
	}
}

// run is one claimed run, about to fire.
type run struct {
	id        int64
	task      store.Task
	scheduled time.Time
	tries     int // tries before this one
	c         store.Claimant
	// adopted says a replica that is gone claimed the run before: it may have delivered it.
	adopted bool
}

// claim claims d for c; false when another replica has it or there is nothing to fire.
func (s *Service) claim(ctx context.Context, d store.Due, c store.Claimant, now time.Time) (run, bool) {
	t, err := s.opts.Store.Task(ctx, d.Task)
	if err != nil {
		s.log.Warn("tasks: due task not read", "task", d.Task, "err", err)
		return run{}, false
	}
	if d.Run != 0 {
		ok, err := s.opts.Store.ReclaimTaskRun(ctx, d, c)
		if err != nil {
			s.log.Warn("tasks: run not claimed again", "run", d.Run, "err", err)
		}
		adopted := d.Status == store.RunClaimed
		if ok && adopted {
			s.log.Info("tasks: run taken over from a replica that is gone", "run", d.Run, "task", t.ID, "from", d.Instance)
		}
		return run{id: d.Run, task: t, scheduled: d.At, tries: d.Attempts, c: c, adopted: adopted}, ok && err == nil
	}
	sch, err := ParseSchedule(t.Schedule)
	loc, zerr := loadZone(t.Timezone)
	if err != nil || zerr != nil {
		s.log.Error("tasks: task's schedule unreadable; it runs no more", "task", t.ID, "err", errors.Join(err, zerr))
		_, _ = s.opts.Store.ClaimTaskRun(ctx, t.ID, d.Seq, d.At, nil, store.RunFailed, c)
		return run{}, false
	}
	// The next run is the first after now: a recurring task fires no backlog.
	var next *time.Time
	if n, ok := sch.Next(now.Truncate(time.Second), d.At, loc); ok {
		next = &n
	}
	status := store.RunClaimed
	late := now.Sub(d.At) > s.opts.MisfireGrace
	if late {
		status = store.RunSkipped
	}
	id, err := s.opts.Store.ClaimTaskRun(ctx, t.ID, d.Seq, d.At, next, status, c)
	if err != nil {
		s.log.Warn("tasks: run not claimed", "task", t.ID, "err", err)
		return run{}, false
	}
	if id == 0 {
		return run{}, false // another replica claimed it
	}
	if late {
		s.skipped(ctx, t, d.At, loc)
		return run{}, false
	}
	return run{id: id, task: t, scheduled: d.At, c: c}, true
}

// skipped records and tells the owner that the run at at was missed by more than the grace.
func (s *Service) skipped(ctx context.Context, t store.Task, at time.Time, loc *time.Location) {
	s.log.Info("tasks: run missed by more than the grace; skipped", "task", t.ID, "scheduled", at)
	if err := s.opts.Store.RecordSkip(ctx, t.ID, at); err != nil {
		s.log.Warn("tasks: skipped run not recorded", "task", t.ID, "err", err)
	}
	s.tell(ctx, t, fmt.Sprintf("Task %d (%s) was due %s while the bot was down; that run was skipped.",
		t.ID, clip(t.Text, 60), FormatWhen(at, loc)))
}

// tell posts text to the task's chat, for its owner.
func (s *Service) tell(ctx context.Context, t store.Task, text string) {
	p, ok := s.platform(chat.Platform(t.Platform))
	if !ok {
		return
	}
	if err := p.Post(ctx, chatOf(t), text); err != nil && ctx.Err() == nil {
		s.log.Warn("tasks: owner not told", "task", t.ID, "err", err)
	}
}

func chatOf(t store.Task) chat.Ref {
	return chat.Ref{Platform: chat.Platform(t.Platform), ChatID: t.ChatID, ThreadID: t.ThreadID}
}

// outcome is how one try of a run went.
type outcome struct {
	err error
	// final says the error will not go away with another try (the owner may no longer use
	// the bot, the turn was refused).
	final  bool
	turnID int64
}

// fire tries run r once and records how it went.
func (s *Service) fire(ctx context.Context, r run) {
	if r.task.State == store.TaskCancelled {
		s.end(ctx, r, outcome{err: errors.New("the task was cancelled"), final: true})
		return
	}
	var o outcome
	p, ok := s.platform(chat.Platform(r.task.Platform))
	switch {
	case !ok:
		o = outcome{err: fmt.Errorf("no %s platform in this server", r.task.Platform)}
	case r.task.Kind == KindPrompt:
		o = s.prompt(ctx, p, r)
	default:
		o = outcome{err: p.Post(ctx, chatOf(r.task), r.task.Text)}
	}
	if errors.Is(o.err, context.Canceled) && ctx.Err() != nil || s.opts.Fence != nil && s.opts.Fence.TakenOver(o.err) {
		// Shutting down, or taken over while cut off: the run stays claimed for a survivor.
		s.log.Info("tasks: run left to another replica", "run", r.id, "task", r.task.ID, "err", o.err)
		return
	}
	s.end(ctx, r, o)
}

// end records o as the end of r's try, and tells the owner of a failed run and a pause.
func (s *Service) end(ctx context.Context, r run, o outcome) {
	e := store.RunEnd{Status: store.RunDelivered, TurnID: o.turnID, PauseAfter: PauseAfterRuns}
	switch {
	case o.err == nil:
	case !o.final && r.tries+1 < MaxTries:
		e.Status, e.Error, e.NextTry = store.RunRetry, o.err.Error(), s.opts.Now().Add(backoff(r.tries+1))
	default:
		e.Status, e.Error = store.RunFailed, o.err.Error()
	}
	// The record is not cut by shutdown: the platform has spoken.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	held, paused, err := s.opts.Store.EndTaskRun(rctx, r.id, r.c, e)
	switch {
	case err != nil:
		s.log.Error("tasks: run's end not recorded", "run", r.id, "task", r.task.ID, "status", e.Status, "err", err)
		return
	case !held:
		s.log.Warn("tasks: run's end not recorded: another replica took it over", "run", r.id, "task", r.task.ID)
		return
	}
	s.log.Info("tasks: run "+e.Status, "run", r.id, "task", r.task.ID, "try", r.tries+1, "err", e.Error)
	if e.Status == store.RunFailed && r.task.State != store.TaskCancelled {
		s.tell(rctx, r.task, fmt.Sprintf("Task %d (%s) could not be delivered: %s", r.task.ID, clip(r.task.Text, 60), clip(e.Error, 200)))
	}
	if paused {
		s.tell(rctx, r.task, fmt.Sprintf("Task %d is paused after %d failed runs in a row; it will not run again. Make it anew once the cause is fixed.", r.task.ID, PauseAfterRuns))
	}
}

// RunMessageID is the inbound message id of run's turn: the key a survivor finds the turn by.
func RunMessageID(run int64) string { return "task-run-" + strconv.FormatInt(run, 10) }
