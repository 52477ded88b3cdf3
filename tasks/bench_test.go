package tasks

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
	"relaybot/store"
	"relaybot/store/storetest"
)

// benchStored is how many tasks the benchmarks keep stored, and benchDue how many of them fall
// due in the same minute.
const (
	benchStored = 100_000
	benchDue    = 1_000
)

// seedBench stores benchStored tasks on a PostgreSQL database of the benchmark's own: the first
// benchDue due within the minute before due, the rest spread over the next year. Bulk SQL (a
// benchmark's set-up, not the store's way to make a task).
func seedBench(b *testing.B, due time.Time) (*store.Database, *sql.DB) {
	b.Helper()
	db := storetest.Open(b, storetest.Postgres)
	pg, _ := db.Postgres()
	_, err := pg.Exec(`INSERT INTO tasks (platform, chat_id, user_id, kind, text, schedule, timezone, state, next_run_at, created_at)
		SELECT 'telegram', (10000 + i)::text, (10000 + i)::text, 'message', 'reminder ' || i, 'at 2030-01-01T00:00:00Z', 'UTC', 'active',
		       CASE WHEN i <= $2 THEN $1::timestamptz - make_interval(secs => (i % 60)) ELSE $1::timestamptz + make_interval(mins => i) END, now()
		FROM generate_series(1, $3) AS i`, due, benchDue, benchStored)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pg.Exec(`ANALYZE tasks`); err != nil {
		b.Fatal(err)
	}
	return db, pg
}

// BenchmarkIdleDueQuery is one replica's due-query (once a second at most) with 100,000 tasks
// stored and none due: the scheduler's idle cost.
func BenchmarkIdleDueQuery(b *testing.B) {
	db, _ := seedBench(b, time.Now().Add(-time.Hour))
	ctx := context.Background()
	self := store.Claimant{Instance: "bench"}
	b.ReportAllocs()
	for b.Loop() {
		due, err := db.Tasks.DueWork(ctx, time.Now().Add(-2*time.Hour), self, 64)
		if err != nil || len(due) != 0 {
			b.Fatal(len(due), err)
		}
	}
}

// countingPlatform counts deliveries per chat, instantly: the scheduler's own cost, the
// platform's pacing left to the delivery engine.
type countingPlatform struct {
	mu    sync.Mutex
	chats map[string]int
	total atomic.Int64
}

func (p *countingPlatform) Post(ctx context.Context, ref chat.Ref, text string) error {
	p.mu.Lock()
	p.chats[ref.ChatID]++
	p.mu.Unlock()
	p.total.Add(1)
	return nil
}

func (p *countingPlatform) ChatResponder(chat.Ref) adapters.Responder { return nil }

// BenchmarkThousandDueOnThreeReplicas: 100,000 tasks stored, 1,000 due in the same minute,
// three schedulers (replicas) on one PostgreSQL database: the time until every run is claimed,
// delivered and recorded, each once, and the CPU time and heap of the three at idle afterwards.
func BenchmarkThousandDueOnThreeReplicas(b *testing.B) {
	for range b.N {
		b.StopTimer()
		due := time.Now()
		db, _ := seedBench(b, due)
		plat := &countingPlatform{chats: map[string]int{}}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for i := range 3 {
			svc, err := New(Options{Store: db.Tasks, Turns: db.Turns, Instance: fmt.Sprint("replica-", i),
				Platforms: map[chat.Platform]Platform{chat.Telegram: plat}})
			if err != nil {
				b.Fatal(err)
			}
			wg.Go(func() { svc.Run(ctx) })
		}
		b.StartTimer()
		start := time.Now()
		for plat.total.Load() < benchDue {
			time.Sleep(5 * time.Millisecond)
		}
		took := time.Since(start)
		b.StopTimer()
		b.ReportMetric(took.Seconds(), "s-to-deliver-1000")
		for chat, n := range plat.chats {
			if n != 1 {
				b.Errorf("chat %s got %d deliveries, want one", chat, n)
			}
		}
		// Idle: the three schedulers go on asking once a second each.
		var before, after syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &before)
		const idle = 10 * time.Second
		time.Sleep(idle)
		syscall.Getrusage(syscall.RUSAGE_SELF, &after)
		cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) / 3
		b.ReportMetric(float64(cpu.Microseconds())/idle.Seconds()/1000, "cpu-ms/s-idle-per-replica")
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB-3-replicas-idle")
		if plat.total.Load() != benchDue {
			b.Errorf("%d deliveries, want %d", plat.total.Load(), benchDue)
		}
		cancel()
		wg.Wait()
	}
}
