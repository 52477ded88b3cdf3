package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func newTask(user string, next time.Time) Task {
	return Task{Platform: "telegram", ChatID: "100", UserID: user, Kind: "message", Text: "stand up",
		Schedule: "at " + next.UTC().Format(time.RFC3339), Timezone: "UTC", State: TaskActive, NextRunAt: &next}
}

// TestRacingReplicasClaimEachRunOnce: three claimants race for the same due runs; each run is
// claimed by exactly one of them, and a task is never claimed twice for the same time.
func TestRacingReplicasClaimEachRunOnce(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		s := newStore(t, driver)
		ctx := context.Background()
		at := time.Now().Add(-time.Second).Truncate(time.Second)
		const n = 30
		for i := range n {
			if _, err := s.Tasks.CreateTask(ctx, newTask(fmt.Sprint("u", i), at), 5); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		claims := map[int64]int{}
		var wg sync.WaitGroup
		for r := range 3 {
			c := Claimant{Instance: fmt.Sprint("replica-", r)}
			wg.Go(func() {
				due, err := s.Tasks.DueWork(ctx, time.Now(), c, 100)
				if err != nil {
					t.Error(err)
					return
				}
				for _, d := range due {
					id, err := s.Tasks.ClaimTaskRun(ctx, d.Task, d.Seq, d.At, nil, RunClaimed, c)
					if err != nil {
						t.Error(err)
					}
					if id != 0 {
						mu.Lock()
						claims[d.Task]++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		if len(claims) != n {
			t.Errorf("%d of %d due tasks were claimed, want every one", len(claims), n)
		}
		for task, k := range claims {
			if k != 1 {
				t.Errorf("task %d was claimed %d times, want once", task, k)
			}
		}
		due, _ := s.Tasks.DueWork(ctx, time.Now(), Claimant{Instance: "replica-0"}, 100)
		for _, d := range due {
			if d.Run == 0 {
				t.Errorf("after the claims, task %d is still due", d.Task)
			}
		}
	})
}

// TestARunOfAReplicaTakenOverIsClaimedBySurvivorAndTheOldClaimCannotEndIt simulates a replica
// paused mid-fire: its registration is taken over (its instances row deleted), a survivor
// finds the run due and claims it, and the paused replica, waking, can neither end the run nor
// claim new ones under its old epoch.
func TestARunOfAReplicaTakenOverIsClaimedBySurvivorAndTheOldClaimCannotEndIt(t *testing.T) {
	s := newStore(t, DriverPostgres)
	ctx := context.Background()
	register(t, s, "paused", true)
	register(t, s, "survivor", true)
	epochOf := func(id string) int64 {
		var e int64
		if err := s.wsql.QueryRow(`SELECT epoch FROM instances WHERE id = $1`, id).Scan(&e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	paused := Claimant{Instance: "paused", Epoch: epochOf("paused")}
	survivor := Claimant{Instance: "survivor", Epoch: epochOf("survivor")}
	if paused.Epoch == 0 || survivor.Epoch == 0 {
		t.Skip("instances rows have no epochs here")
	}
	at := time.Now().Add(-time.Second).Truncate(time.Second)
	task, err := s.Tasks.CreateTask(ctx, newTask("u", at), 5)
	if err != nil {
		t.Fatal(err)
	}
	second, _ := s.Tasks.CreateTask(ctx, newTask("v", at), 5)
	run, err := s.Tasks.ClaimTaskRun(ctx, task.ID, 0, at, nil, RunClaimed, paused)
	if err != nil || run == 0 {
		t.Fatalf("claim = %d, %v", run, err)
	}
	if due, _ := s.Tasks.DueWork(ctx, time.Now(), survivor, 10); len(due) != 1 || due[0].Task != second.ID {
		t.Fatalf("while the paused replica is registered, its run must not be due elsewhere: %+v", due)
	}
	if _, err := s.wsql.Exec(`DELETE FROM instances WHERE id = 'paused'`); err != nil {
		t.Fatal(err)
	}
	due, err := s.Tasks.DueWork(ctx, time.Now(), survivor, 10)
	if err != nil {
		t.Fatal(err)
	}
	var taken Due
	for _, d := range due {
		if d.Run == run {
			taken = d
		}
	}
	if taken.Run == 0 {
		t.Fatalf("the run of the replica taken over is not due for the survivor: %+v", due)
	}
	if ok, err := s.Tasks.ReclaimTaskRun(ctx, taken, survivor); !ok || err != nil {
		t.Fatalf("survivor's claim = %v, %v", ok, err)
	}
	if ok, _ := s.Tasks.ReclaimTaskRun(ctx, taken, survivor); ok {
		t.Error("the same run was claimed again from the same read")
	}
	if held, _, err := s.Tasks.EndTaskRun(ctx, run, paused, RunEnd{Status: RunDelivered}); held || err != nil {
		t.Errorf("the paused replica ended the run the survivor holds: held=%v err=%v", held, err)
	}
	if id, _ := s.Tasks.ClaimTaskRun(ctx, second.ID, 0, at, nil, RunClaimed, paused); id != 0 {
		t.Error("the paused replica claimed a new run under the epoch it lost")
	}
	if held, _, err := s.Tasks.EndTaskRun(ctx, run, survivor, RunEnd{Status: RunDelivered}); !held || err != nil {
		t.Errorf("the survivor could not end the run: held=%v err=%v", held, err)
	}
	runs, _ := s.Tasks.TaskRuns(ctx, task.ID, 10)
	if len(runs) != 1 || runs[0].Status != RunDelivered || runs[0].InstanceID != "survivor" {
		t.Errorf("runs = %+v, want one, delivered by the survivor", runs)
	}
}

// TestThreeFailedRunsInARowPauseATask and a delivered run in between resets the count.
func TestThreeFailedRunsInARowPauseATask(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		s := newStore(t, driver)
		ctx := context.Background()
		c := Claimant{Instance: "me"}
		start := time.Now().Add(-time.Hour).Truncate(time.Second)
		task, err := s.Tasks.CreateTask(ctx, newTask("u", start), 5)
		if err != nil {
			t.Fatal(err)
		}
		statuses := []string{RunFailed, RunFailed, RunDelivered, RunFailed, RunFailed, RunFailed}
		for i, st := range statuses {
			cur, _ := s.Tasks.Task(ctx, task.ID)
			at := start.Add(time.Duration(i) * time.Minute)
			next := at.Add(time.Minute)
			run, err := s.Tasks.ClaimTaskRun(ctx, task.ID, cur.Seq, at, &next, RunClaimed, c)
			if err != nil || run == 0 {
				t.Fatalf("run %d: claim = %d, %v", i, run, err)
			}
			_, paused, err := s.Tasks.EndTaskRun(ctx, run, c, RunEnd{Status: st, Error: "chat not found", PauseAfter: 3})
			if err != nil {
				t.Fatal(err)
			}
			if want := i == len(statuses)-1; paused != want {
				t.Errorf("run %d (%s): paused = %v, want %v", i, st, paused, want)
			}
		}
		got, _ := s.Tasks.Task(ctx, task.ID)
		if got.State != TaskPaused || got.NextRunAt != nil || got.LastStatus != RunFailed || got.LastError != "chat not found" || got.Runs != 6 {
			t.Errorf("task after three failures in a row = %+v, want paused with no next run and the reason", got)
		}
	})
}

// TestMaxPerUserRefusesAnotherTask counts only the owner's tasks with runs to come.
func TestMaxPerUserRefusesAnotherTask(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		s := newStore(t, driver)
		ctx := context.Background()
		at := time.Now().Add(time.Hour)
		a, _ := s.Tasks.CreateTask(ctx, newTask("u", at), 2)
		if _, err := s.Tasks.CreateTask(ctx, newTask("u", at), 2); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Tasks.CreateTask(ctx, newTask("u", at), 2); !errors.Is(err, ErrTooManyTasks) {
			t.Errorf("third task = %v, want ErrTooManyTasks", err)
		}
		if _, err := s.Tasks.CreateTask(ctx, newTask("other", at), 2); err != nil {
			t.Errorf("another person's task refused: %v", err)
		}
		if ok, err := s.Tasks.CancelTask(ctx, a.ID); !ok || err != nil {
			t.Fatalf("cancel = %v, %v", ok, err)
		}
		if _, err := s.Tasks.CreateTask(ctx, newTask("u", at), 2); err != nil {
			t.Errorf("a task after a cancel refused: %v", err)
		}
		if err := s.Tasks.SetTimezone(ctx, "telegram", "u", "Asia/Tokyo"); err != nil {
			t.Fatal(err)
		}
		_ = s.Tasks.SetTimezone(ctx, "telegram", "u", "Europe/Berlin")
		if z, err := s.Tasks.Timezone(ctx, "telegram", "u"); z != "Europe/Berlin" || err != nil {
			t.Errorf("zone = %q, %v, want the last one set", z, err)
		}
	})
}

// TestRetentionDeletesFinishedRunsAndEndedTasks: the sweep deletes a task's finished runs and
// the tasks that ended before the cutoff, and keeps an active task and a run under way.
func TestRetentionDeletesFinishedRunsAndEndedTasks(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		s := newStore(t, driver)
		ctx := context.Background()
		c := Claimant{Instance: "me"}
		at := time.Now().Add(-time.Hour).Truncate(time.Second)
		active, _ := s.Tasks.CreateTask(ctx, newTask("u", at), 5)
		ended, _ := s.Tasks.CreateTask(ctx, newTask("v", at), 5)
		next := at.Add(time.Hour * 24)
		done, _ := s.Tasks.ClaimTaskRun(ctx, active.ID, 0, at, &next, RunClaimed, c)
		s.Tasks.EndTaskRun(ctx, done, c, RunEnd{Status: RunDelivered})
		open, _ := s.Tasks.ClaimTaskRun(ctx, active.ID, 1, next, &next, RunClaimed, c)
		if _, err := s.Tasks.CancelTask(ctx, ended.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Retention.Sweep(ctx, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		runs, _ := s.Tasks.TaskRuns(ctx, active.ID, 10)
		if len(runs) != 1 || runs[0].ID != open {
			t.Errorf("runs after the sweep = %+v, want only the one under way", runs)
		}
		if _, err := s.Tasks.Task(ctx, active.ID); err != nil {
			t.Errorf("the active task was deleted: %v", err)
		}
		if _, err := s.Tasks.Task(ctx, ended.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("the cancelled task outlived the sweep: %v", err)
		}
	})
}
