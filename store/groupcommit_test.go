package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"relaybot/chat"
	"relaybot/internal/testkit/wait"
)

// holdWriter occupies the turn writer with a write that waits for release, so the writes made
// meanwhile queue up behind it as they do while a commit is on its way to the disk.
func holdWriter(t *testing.T, s *Database) (release func()) {
	t.Helper()
	hold, held := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.turns.do(context.Background(), func(*gorm.DB) error {
			close(held)
			<-hold
			return nil
		})
	}()
	<-held
	return func() {
		close(hold)
		if err := <-done; err != nil {
			t.Errorf("the holding write failed: %v", err)
		}
	}
}

func TestTurnsWaitingTogetherShareOneCommitAndAllPersist(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "1"})
		if err != nil {
			t.Fatal(err)
		}
		before := s.turns.commits.Load()
		release := holdWriter(t, s)
		const n = 10
		ids := make([]int64, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				ids[i], errs[i] = s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserMessage: chat.Message{Content: fmt.Sprint("question ", i)}})
			})
		}
		wait.For(t, "ten turns queued behind the held commit", func() bool { return len(s.turns.jobs) == n })
		release()
		wg.Wait()
		if got := s.turns.commits.Load() - before; got != 2 {
			t.Errorf("%d commits for the held write and ten waiting turns, want 2 (the ten together)", got)
		}
		for i, id := range ids {
			if errs[i] != nil {
				t.Fatalf("turn %d: %v", i, errs[i])
			}
			if tr, err := s.Turns.Turn(ctx, id); err != nil || tr.Status != TurnRunning {
				t.Errorf("turn %d after its commit: %+v, %v; want it stored, running", i, tr, err)
			}
		}
	})
}

func TestAFailingTurnWriteDoesNotUndoTheOthersInItsCommit(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		s := newStore(t, driver)
		c, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "1"})
		if err != nil {
			t.Fatal(err)
		}
		done, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserMessage: chat.Message{Content: "q"}})
		if err != nil {
			t.Fatal(err)
		}
		end := TurnEnd{TurnID: done, Status: TurnOK, Messages: []chat.Message{{Role: RoleAssistant, Content: "a"}}}
		if err := s.Turns.FinishTurn(ctx, end); err != nil {
			t.Fatal(err)
		}
		release := holdWriter(t, s)
		var wg sync.WaitGroup
		var finishAgain error
		wg.Go(func() { finishAgain = s.Turns.FinishTurn(ctx, end) })
		wait.For(t, "the second finish queued", func() bool { return len(s.turns.jobs) == 1 })
		const n = 4
		ids := make([]int64, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				ids[i], errs[i] = s.Turns.StartTurn(ctx, TurnStart{ConversationID: c.ID, UserMessage: chat.Message{Content: fmt.Sprint("next ", i)}})
			})
		}
		wait.For(t, "five writes queued", func() bool { return len(s.turns.jobs) == n+1 })
		release()
		wg.Wait()
		if finishAgain == nil {
			t.Errorf("finishing a finished turn again succeeded")
		}
		for i, id := range ids {
			if errs[i] != nil {
				t.Fatalf("turn %d committed with a failing write: %v", i, errs[i])
			}
			if _, err := s.Turns.Turn(ctx, id); err != nil {
				t.Errorf("turn %d missing after its commit: %v", i, err)
			}
		}
		if tr, err := s.Turns.Turn(ctx, done); err != nil || tr.Status != TurnOK {
			t.Errorf("the finished turn after the failed second finish: %+v, %v; want it ok", tr, err)
		}
	})
}

// TestAWriteThatLosesADeadlockToAnotherReplicaRunsAgain has two stores on one PostgreSQL (two
// replicas) commit batches that take the same two keys in opposite orders, each batch's first
// write waiting until both hold their first key: PostgreSQL ends the cycle by failing one write,
// which is rolled back alone and runs again once its batch is committed, so every write lands.
func TestAWriteThatLosesADeadlockToAnotherReplicaRunsAgain(t *testing.T) {
	ctx := context.Background()
	opts := testOptions(t, DriverPostgres)
	a, b := openTest(t, opts), openTest(t, opts)
	if err := a.w.Exec(`CREATE TABLE deadlock_keys (k TEXT PRIMARY KEY)`).Error; err != nil {
		t.Fatal(err)
	}
	insert := func(key string) func(*gorm.DB) error {
		return func(tx *gorm.DB) error {
			return tx.Exec(`INSERT INTO deadlock_keys (k) VALUES (?) ON CONFLICT DO NOTHING`, key).Error
		}
	}
	var both sync.WaitGroup
	both.Add(2)
	first := func(key string) func(*gorm.DB) error {
		return func(tx *gorm.DB) error {
			if err := insert(key)(tx); err != nil {
				return err
			}
			both.Done()
			both.Wait() // the other replica holds its first key too
			return nil
		}
	}
	var errs [4]error
	var wg sync.WaitGroup
	var releases []func()
	for i, r := range []struct {
		s           *Database
		one, second string
	}{{a, "x", "y"}, {b, "y", "x"}} {
		releases = append(releases, holdWriter(t, r.s))
		wg.Go(func() { errs[2*i] = r.s.turns.do(ctx, first(r.one)) })
		wait.For(t, "the first write queued", func() bool { return len(r.s.turns.jobs) == 1 })
		wg.Go(func() { errs[2*i+1] = r.s.turns.do(ctx, insert(r.second)) })
		wait.For(t, "both writes queued behind the held commit", func() bool { return len(r.s.turns.jobs) == 2 })
	}
	// Both batches start together.
	for _, release := range releases {
		release()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("write %d: %v", i, err)
		}
	}
	var n int64
	if err := a.w.Raw(`SELECT COUNT(*) FROM deadlock_keys`).Scan(&n).Error; err != nil || n != 2 {
		t.Errorf("%d keys stored (%v), want 2", n, err)
	}
}

// TestAWriteLockedOutBySQLiteFailsAtTheBusyTimeoutAndTheNextOneGoesThrough: the SQLite writer's
// transactions run without a deadline (writerAttempt), so what bounds a write kept from the
// database is the busy timeout. Another process holding the write lock makes a turn's start
// fail, not hang, and once the lock is given back the writer writes again.
func TestAWriteLockedOutBySQLiteFailsAtTheBusyTimeoutAndTheNextOneGoesThrough(t *testing.T) {
	ctx := context.Background()
	opts := testOptions(t, DriverSQLite)
	opts.BusyTimeout = 200 * time.Millisecond
	s := openTest(t, opts)
	conv, err := s.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "locked"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite3", "file:"+opts.DSN+"?_busy_timeout=0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lock, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	start := func() <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := s.Turns.StartTurn(ctx, TurnStart{ConversationID: conv.ID, UserMessage: chat.Message{Content: "hello"}})
			done <- err
		}()
		return done
	}
	select {
	case err := <-start():
		if !errContains(err, "locked") && !errContains(err, "busy") {
			t.Fatalf("a turn started while another process held the lock: err = %v, want database is locked", err)
		}
	case <-time.After(wait.Deadline):
		t.Fatal("a turn's start kept from the database by a lock hung instead of failing at the busy timeout")
	}
	if _, err := lock.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-start():
		if err != nil {
			t.Fatalf("the writer did not write again once the lock was given back: %v", err)
		}
	case <-time.After(wait.Deadline):
		t.Fatal("the writer hung after a lock wait ended")
	}
	if n := count(t, s, "turns", "conversation_id = ?", conv.ID); n != 1 {
		t.Fatalf("%d turns saved, want the one started after the lock", n)
	}
}
