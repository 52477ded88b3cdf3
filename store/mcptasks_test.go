package store

import (
	"context"
	"testing"
)

// A task this process ended is gone; one it still runs is not taken by itself. Alone on SQLite,
// the next process takes what the one before left, once. On PostgreSQL a replica takes only the
// tasks of replicas whose row is gone: a live one's (or an expired one not yet taken over) stay.
func TestMCPTasksLeftInFlightAreTakenOnceByTheNextProcess(t *testing.T) {
	ctx := context.Background()
	forEachDriver(t, func(t *testing.T, driver string) {
		opts := testOptions(t, driver)
		if driver == DriverPostgres {
			opts.Instance = "replica-a"
		}
		first := openTest(t, opts)
		for _, id := range []string{"t1", "t2", "t3"} {
			if err := first.MCPTasks.BeginTask(ctx, "kit", id, "2026-07-28"); err != nil {
				t.Fatal(err)
			}
		}
		if err := first.MCPTasks.EndTask(ctx, "kit", "t2"); err != nil {
			t.Fatal(err)
		}
		if left, err := first.MCPTasks.TakeLeftTasks(ctx, "kit"); err != nil || len(left) != 0 {
			t.Fatalf("the process took its own tasks as left over: %v, %v", left, err)
		}
		next := opts
		if driver == DriverPostgres {
			next.Instance = "replica-b"
			register(t, first, "replica-a", true)
			second := openTest(t, next)
			if left, err := second.MCPTasks.TakeLeftTasks(ctx, "kit"); err != nil || len(left) != 0 {
				t.Fatalf("a replica took the tasks of a live one: %v, %v", left, err)
			}
			if _, err := first.wsql.Exec(`DELETE FROM instances WHERE id = 'replica-a'`); err != nil {
				t.Fatal(err)
			}
		}
		second := openTest(t, next)
		left, err := second.MCPTasks.TakeLeftTasks(ctx, "kit")
		if err != nil || len(left) != 2 || left[0].Protocol != "2026-07-28" || left[0].Started.IsZero() {
			t.Fatalf("the next process took %+v, %v; want t1 and t3 of 2026-07-28", left, err)
		}
		got := map[string]bool{left[0].TaskID: true, left[1].TaskID: true}
		if !got["t1"] || !got["t3"] {
			t.Fatalf("took %+v, want t1 and t3", left)
		}
		if again, err := second.MCPTasks.TakeLeftTasks(ctx, "kit"); err != nil || len(again) != 0 {
			t.Fatalf("the left tasks were taken twice: %+v, %v", again, err)
		}
		if other, err := second.MCPTasks.TakeLeftTasks(ctx, "other"); err != nil || len(other) != 0 {
			t.Fatalf("another server's left tasks: %+v, %v", other, err)
		}
	})
}
