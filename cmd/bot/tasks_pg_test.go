package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"relaybot/coord"
	tgkit "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
	"relaybot/store"
	"relaybot/store/storetest"
)

// dueTasks stores n reminders in n private chats (from base up), the i-th due at first plus
// i times every, straight into the deployment's database.
func dueTasks(t *testing.T, db *store.Database, base int64, n int, first time.Time, every time.Duration) {
	t.Helper()
	for i := range n {
		at := first.Add(time.Duration(i) * every)
		_, err := db.Tasks.CreateTask(context.Background(), store.Task{Platform: "telegram", ChatID: fmt.Sprint(base + int64(i)),
			Private: true, UserID: fmt.Sprint(base + int64(i)), Kind: "message", Text: fmt.Sprintf("reminder %d", i),
			Schedule: "at " + at.UTC().Format(time.RFC3339), Timezone: "UTC", State: store.TaskActive, NextRunAt: &at}, 1)
		if err != nil {
			t.Fatal(err)
		}
	}
}

// openChats has each of the n users from base set their zone, so that Telegram knows their
// chats with the bot (it refuses a send to a chat it does not know), and waits for the answers.
func openChats(t *testing.T, e *env, base int64, n int) {
	t.Helper()
	for i := range n {
		e.say(base+int64(i), "/timezone UTC")
	}
	for i := range n {
		e.waitBotText(base+int64(i), "the answer to /timezone", contains("Your time zone is now UTC"))
	}
}

// delivered reports whether each of the n chats from base has its reminder.
func delivered(e *env, base int64, n int) bool {
	for i := range n {
		if !slices.Contains(e.botTexts(base+int64(i)), fmt.Sprintf("reminder %d", i)) {
			return false
		}
	}
	return true
}

// onceEach checks that each of the n chats from base got its reminder exactly once, and
// that every run is recorded delivered.
func onceEach(t *testing.T, e *env, db *store.Database, base int64, n int) {
	t.Helper()
	for i := range n {
		want := fmt.Sprintf("reminder %d", i)
		got := e.botTexts(base + int64(i))
		if k := len(slices.DeleteFunc(slices.Clone(got), func(s string) bool { return s != want })); k != 1 {
			t.Errorf("chat %d got %q, want %q once", base+int64(i), got, want)
		}
	}
	ts, err := db.Tasks.ListTasks(context.Background(), store.TaskFilter{Platform: "telegram", Limit: 2 * n})
	if err != nil {
		t.Fatal(err)
	}
	claimers := map[string]int{}
	for _, task := range ts {
		runs, _ := db.Tasks.TaskRuns(context.Background(), task.ID, 5)
		if len(runs) != 1 || runs[0].Status != store.RunDelivered {
			t.Errorf("task %d's runs = %+v, want one, delivered", task.ID, runs)
			continue
		}
		claimers[runs[0].InstanceID]++
	}
	t.Logf("runs delivered by replica: %v", claimers)
}

// TestThreeReplicasFireEachDueTaskOnce runs three replicas on one PostgreSQL database; 60
// reminders fall due within a second: each arrives once, recorded delivered once, and Telegram
// answers no request with 429.
func TestThreeReplicasFireEachDueTaskOnce(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	dsn := storetest.PostgresDatabaseDSN(t)
	e := newEnv(t)
	db := storetest.OpenWith(t, store.Options{Driver: store.DriverPostgres, DSN: dsn})
	const base, n = 7000, 60
	var reps []*replica
	for range 3 {
		reps = append(reps, startReplica(t, telegramReplica(t, dsn, e, polling...).parse(t)))
	}
	openChats(t, e, base, n)
	dueTasks(t, db, base, n, time.Now().Add(2*time.Second), 0)
	t.Cleanup(func() {
		if t.Failed() {
			for i, r := range reps {
				t.Logf("replica %d:\n%s", i, r.logs)
			}
		}
	})
	wait.For(t, "every reminder", func() bool { return delivered(e, base, n) })
	time.Sleep(3 * time.Second) // three more due-queries per replica: nothing fires twice
	onceEach(t, e, db, base, n)
	p := &telegramPlatform{e: e}
	if limited := p.rateLimited(); len(limited) > 0 {
		t.Errorf("Telegram answered %d requests with 429:\n%s", len(limited), strings.Join(limited, "\n"))
	}
}

// TestRunsOfAKilledAndAPausedReplicaArriveOnceBySurvivor runs three replicas in child
// processes. 30 reminders fall due over six seconds and every chat answers its first send with
// a 429 of 25 s, so each run is claimed and waits in its replica's delivery engine. The replica holding
// the most runs is killed (SIGKILL) and the next paused (SIGSTOP): the survivor takes their
// runs over once their leases lapse and delivers them; the paused one, resumed after that,
// sends nothing of what it had claimed (its engine's fence refuses work taken over). Every
// reminder arrives exactly once.
func TestRunsOfAKilledAndAPausedReplicaArriveOnceBySurvivor(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	dsn := storetest.PostgresDatabaseDSN(t)
	e := newEnv(t)
	db := storetest.OpenWith(t, store.Options{Driver: store.DriverPostgres, DSN: dsn})
	var reps []*childReplica
	for range 3 {
		c := startChildReplica(t, telegramReplica(t, dsn, e, polling...))
		wait.For(t, "a replica to run", func() bool { return c.logged("bot running") })
		reps = append(reps, c)
	}
	const base, n = 8000, 30
	openChats(t, e, base, n)
	for i := range n {
		e.tg.AddFault(tgkit.Fault{Kind: tgkit.Fault429, Method: "sendMessage", ChatID: base + int64(i), RetryAfter: 25})
	}
	// Five a second for six seconds: the replicas' ticks, each a second apart at its own phase,
	// share them.
	dueTasks(t, db, base, n, time.Now().Add(time.Second), 200*time.Millisecond)
	pg, _ := db.Postgres()
	byPID := map[int]int{} // runs claimed, by the pid of the replica that claimed them
	wait.For(t, "every run claimed", func() bool {
		clear(byPID)
		ins, err := coord.Instances(context.Background(), pg)
		if err != nil {
			return false
		}
		pids := map[string]int{}
		for _, in := range ins {
			pids[in.ID] = in.PID
		}
		rows, err := pg.Query(`SELECT instance_id FROM task_runs WHERE status = 'claimed'`)
		if err != nil {
			return false
		}
		defer rows.Close()
		k := 0
		for rows.Next() {
			var id string
			rows.Scan(&id)
			byPID[pids[id]]++
			k++
		}
		return k == n
	})
	slices.SortFunc(reps, func(a, b *childReplica) int { return byPID[b.cmd.Process.Pid] - byPID[a.cmd.Process.Pid] })
	t.Logf("runs claimed per replica (killed, paused, survivor): %d, %d, %d",
		byPID[reps[0].cmd.Process.Pid], byPID[reps[1].cmd.Process.Pid], byPID[reps[2].cmd.Process.Pid])
	reps[0].kill()
	if err := reps[1].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	// The chats' 429s last 25 s; the takeover comes once the leases lapse.
	for deadline := time.Now().Add(90 * time.Second); !delivered(e, base, n); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("90 s after the kill, some reminders never arrived")
		}
	}
	// The paused replica wakes once its lease was taken over, its runs' 429s long over.
	time.Sleep(time.Until(paused.Add(20 * time.Second)))
	if err := reps[1].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if byPID[reps[1].cmd.Process.Pid] > 0 {
		wait.For(t, "the resumed replica to drop the runs taken over", func() bool { return reps[1].logged("tasks: run left to another replica") })
	}
	time.Sleep(3 * time.Second)
	onceEach(t, e, db, base, n)
	if byPID[reps[0].cmd.Process.Pid]+byPID[reps[1].cmd.Process.Pid] > 0 && !reps[2].logged("tasks: run taken over from a replica that is gone") {
		t.Error("the survivor logged no run taken over")
	}
}

// TestAThousandRemindersOnThreeReplicasQueueBehindTelegramsBudget: 1,000 reminders in 1,000
// groups fall due in the same second on three replicas; every one arrives once, and Telegram
// (the testkit, with its real 30 messages a second) answers none of the sends with 429: the
// runs queue in the delivery engines behind the bot-wide budget the replicas share. The time
// it took is logged (docs/performance/2026-12-07-tasks.md).
func TestAThousandRemindersOnThreeReplicasQueueBehindTelegramsBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of Telegram's budget")
	}
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	dsn := storetest.PostgresDatabaseDSN(t)
	e := newEnv(t)
	db := storetest.OpenWith(t, store.Options{Driver: store.DriverPostgres, DSN: dsn})
	for range 3 {
		startReplica(t, telegramReplica(t, dsn, e, polling...).parse(t))
	}
	const base, n = -30000, 1000
	// The groups exist for Telegram once someone wrote there; the bot, not addressed, is silent.
	for i := range n {
		e.tg.Send(tgkit.Inbound{Chat: tgkit.Chat{ID: base + int64(i), Type: "group", Title: "team"}, From: user(42), Text: "morning all"})
	}
	wait.For(t, "the groups' messages to be read", func() bool { return e.tg.PendingUpdates() == 0 })
	due := time.Now().Add(2 * time.Second).Truncate(time.Second)
	dueTasks(t, db, base, n, due, 0)
	for deadline := due.Add(3 * time.Minute); !delivered(e, base, n); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("3 minutes after they fell due, some of the 1,000 reminders never arrived")
		}
	}
	t.Logf("1,000 reminders delivered %s after they fell due", time.Since(due).Round(100*time.Millisecond))
	onceEach(t, e, db, base, n)
	p := &telegramPlatform{e: e}
	if limited := p.rateLimited(); len(limited) > 0 {
		t.Errorf("Telegram answered %d requests with 429:\n%s", len(limited), strings.Join(limited[:min(5, len(limited))], "\n"))
	}
}
