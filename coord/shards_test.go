package coord

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/internal/testkit/wait"
)

// shardReplica is one replica taking part in sharing a bot's shards: one goroutine per shard
// holds it whenever it can, as the Discord adapter does.
type shardReplica struct {
	name   string
	db     *sql.DB
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// holders records who holds which shard, as the replicas see it.
type holders struct {
	mu  sync.Mutex
	by  map[int][]string // shard → replicas holding it
	bad []string         // moments two replicas held one shard
}

func (h *holders) set(shard int, name string, holding bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if holding {
		if len(h.by[shard]) > 0 {
			h.bad = append(h.bad, fmt.Sprintf("%s took shard %d while %v held it", name, shard, h.by[shard]))
		}
		h.by[shard] = append(h.by[shard], name)
		return
	}
	h.by[shard] = slices.DeleteFunc(h.by[shard], func(n string) bool { return n == name })
}

// split returns each replica's shards, sorted, and whether every shard has one holder.
func (h *holders) split(count int) (map[string][]int, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string][]int{}
	whole := true
	for id := range count {
		if len(h.by[id]) != 1 {
			whole = false
			continue
		}
		out[h.by[id][0]] = append(out[h.by[id][0]], id)
	}
	return out, whole
}

// startShardReplica joins the shards of the bot as replica name, on a pool of its own whose
// sessions carry app (so the test can end them as a killed process' would end).
func startShardReplica(t *testing.T, dsn, app, name string, count int, h *holders) *shardReplica {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	r := &shardReplica{name: name, db: db, cancel: cancel}
	t.Cleanup(func() { cancel(); r.done.Wait() })
	s := NewShards(db, "bot "+dsn)
	s.RetryEvery = 100 * time.Millisecond
	leases, err := s.Join(ctx, count)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		r.done.Add(1)
		go func() {
			defer r.done.Done()
			for {
				held, release, err := l.Acquire(ctx)
				if err != nil {
					return
				}
				h.set(l.ID(), name, true)
				<-held.Done()
				h.set(l.ID(), name, false)
				if ctx.Err() != nil {
					return // killed: a dead process releases nothing
				}
				release()
			}
		}()
	}
	return r
}

// TestShardsSpreadOverReplicasAndPassOnWhenOneDies shares three shards among replicas that
// join one after another: the first holds all three, each newcomer takes what the others give
// up over their share (ceil(3 / replicas)), each shard always has one holder; when a replica
// dies (its database sessions end, as a killed process' do) the survivors take its shard.
func TestShardsSpreadOverReplicasAndPassOnWhenOneDies(t *testing.T) {
	_, dsn := pgStore(t, "")
	app := fmt.Sprintf("shards-%d", time.Now().UnixNano())
	h := &holders{by: map[int][]string{}}
	const count = 3
	settled := func(want map[string][]int) {
		t.Helper()
		wait.Until(t, fmt.Sprintf("the shards split as %v", want), func() error {
			got, whole := h.split(count)
			if !whole || !maps.EqualFunc(got, want, slices.Equal) {
				return fmt.Errorf("split %v (every shard held once: %v)", got, whole)
			}
			return nil
		})
	}

	a := startShardReplica(t, dsn, app+"-a", "a", count, h)
	settled(map[string][]int{"a": {0, 1, 2}})
	startShardReplica(t, dsn, app+"-b", "b", count, h)
	settled(map[string][]int{"a": {0, 1}, "b": {2}})
	startShardReplica(t, dsn, app+"-c", "c", count, h)
	settled(map[string][]int{"a": {0}, "b": {2}, "c": {1}})

	a.cancel()
	a.done.Wait()
	observer, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer observer.Close()
	if _, err := observer.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app+"-a"); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, "the survivors to hold every shard, two at most each", func() error {
		got, whole := h.split(count)
		if !whole || len(got["a"]) > 0 || len(got["b"]) > 2 || len(got["c"]) > 2 {
			return fmt.Errorf("split %v (every shard held once: %v)", got, whole)
		}
		return nil
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.bad {
		t.Error(b)
	}
}

// TestAShardHolderKeepsItsShardThroughADatabaseBlip drops the session holding a shard's lock (a
// failover, a dropped connection): the holder takes the lock again on a new session and its
// shard stays held (its gateway session is not closed); when another replica took the lock
// first, the holder gives the shard up.
func TestAShardHolderKeepsItsShardThroughADatabaseBlip(t *testing.T) {
	cases := []struct {
		name     string
		takenBy  bool // another session takes the lock before the holder can
		wantKept bool
	}{
		{"nobody took the lock", false, true},
		{"another replica took the lock", true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			_, dsn := pgStore(t, "")
			db, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			observer, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer observer.Close()
			s := NewShards(db, "blip")
			s.RetryEvery = 200 * time.Millisecond
			leases, err := s.Join(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			held, release, err := leases[0].Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			key := leases[0].lease.key
			var other *sql.Conn
			if tc.takenBy {
				// Hold the holder's retakes off: its pool cannot open a connection until the
				// other session has the lock.
				db.SetMaxOpenConns(1)
				other, err = observer.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer other.Close()
			}
			if _, err := observer.Exec(`SELECT pg_terminate_backend(pid) FROM pg_locks WHERE `+holdersOf, key); err != nil {
				t.Fatal(err)
			}
			if tc.takenBy {
				wait.For(t, "the other session to take the freed lock", func() bool {
					var ok bool
					return other.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok) == nil && ok
				})
				db.SetMaxOpenConns(0)
				wait.For(t, "the holder to give the shard up", func() bool { return held.Err() != nil })
				var given *adapters.GivenUp
				if errors.As(context.Cause(held), &given) {
					t.Fatalf("a shard whose lock another replica took ended as given up (%v), want it lost: its gateway session closes at once", context.Cause(held))
				}
				return
			}
			wait.For(t, "the holder to take the lock again on a new session", func() bool {
				var n int
				return observer.QueryRow(`SELECT COUNT(*) FROM pg_locks WHERE `+holdersOf, key).Scan(&n) == nil && n == 1
			})
			if err := held.Err(); err != nil {
				t.Fatalf("the shard was given up after a blip nobody used: %v", err)
			}
		})
	}
}
