package coord

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"relaybot/chat"
	"relaybot/internal/testkit/wait"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"relaybot/store"
)

func ids(t *testing.T, st *store.Database) []string {
	t.Helper()
	ins, err := Instances(context.Background(), pool(t, st))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range ins {
		out = append(out, in.ID)
	}
	return out
}

// TestAReplicaThatStopsHeartbeatingIsGoneAndItsTurnsAreReclaimed runs two members on one
// database: while both beat, each one's running turn survives the other's sweep; when one stops
// beating (killed), its lease expires, the survivor's sweep takes it over once the lease has
// stayed expired for the grace period and ends its turn interrupted, and a clean
// Leave drops a member from the list at once. The survivor counts the live replicas (for the
// platform budgets it divides): two, then itself alone.
func TestAReplicaThatStopsHeartbeatingIsGoneAndItsTurnsAreReclaimed(t *testing.T) {
	ctx := context.Background()
	st, dsn := pgStore(t, "")
	db := pool(t, st)
	dead, err := Join(ctx, db, Options{TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	deadStore := openPG(t, dsn, dead.ID())
	conv, err := deadStore.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	turn, err := deadStore.Turns.StartTurn(ctx, store.TurnStart{ConversationID: conv.ID, UserMessage: chat.Message{Content: "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	survivorStore := openPG(t, dsn, "")
	var members atomic.Int64
	survivorID, err := NewID()
	if err != nil {
		t.Fatal(err)
	}
	var survivor *Member
	var joined atomic.Bool
	survivor, err = Join(ctx, db, Options{ID: survivorID, TTL: 600 * time.Millisecond, Members: func(n int) { members.Store(int64(n)) }, Sweep: func(ctx context.Context) error {
		if joined.Load() && survivor.LiveFor() >= TakeoverGrace(600*time.Millisecond) {
			if _, err := TakeOver(ctx, db, survivorID, TakeoverGrace(600*time.Millisecond), survivorStore.Turns); err != nil {
				return err
			}
		}
		_, _, err := survivorStore.Turns.Recover(ctx)
		return err
	}})
	joined.Store(true)
	if err != nil {
		t.Fatal(err)
	}
	defer survivor.Leave(ctx)
	if got := ids(t, st); !slices.Contains(got, dead.ID()) || !slices.Contains(got, survivor.ID()) {
		t.Fatalf("live instances = %v, want both replicas", got)
	}
	wait.For(t, "the survivor to count two replicas", func() bool { return members.Load() == 2 })
	if _, _, err := survivorStore.Turns.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if tr, _ := st.Turns.Turn(ctx, turn); tr.Status != store.TurnRunning {
		t.Fatalf("a live replica's turn is %q after another's recovery, want running", tr.Status)
	}

	// Killed: the heartbeat stops, the row stays until its lease runs out.
	dead.stop()
	<-dead.done
	wait.For(t, "the stopped replica's lease to expire", func() bool { return !slices.Contains(ids(t, st), dead.ID()) })
	wait.For(t, "the survivor to count itself alone", func() bool { return members.Load() == 1 })
	wait.For(t, "the survivor to reclaim the dead replica's turn", func() bool {
		tr, err := st.Turns.Turn(ctx, turn)
		return err == nil && tr.Status == store.TurnInterrupted
	})

	if err := survivor.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, st); slices.Contains(got, survivor.ID()) {
		t.Fatalf("live instances after a clean Leave = %v, want the replica gone at once", got)
	}
}

const lockHelperEnv = "COORD_TEST_LOCK_HELPER"

// TestASecondProcessOnTheSameSQLiteFileIsRefusedByName holds the lock of a database file in a
// helper process: this process is refused with an error naming the helper's pid, and takes the
// lock once the helper is killed.
func TestASecondProcessOnTheSameSQLiteFileIsRefusedByName(t *testing.T) {
	if p := os.Getenv(lockHelperEnv); p != "" {
		if _, err := LockFile(p); err != nil {
			os.Stdout.WriteString("error " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("locked\n")
		bufio.NewReader(os.Stdin).ReadString('\n') // held until killed
		os.Exit(0)
	}
	// In a data folder that does not exist yet, as on a first start.
	path := filepath.Join(t.TempDir(), "data", "bot.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestASecondProcessOnTheSameSQLiteFileIsRefusedByName$")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "locked" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %q", line)
	}

	_, err = LockFile(path)
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("second process on %s: err = %v, want it refused as in use", path, err)
	}
	if !strings.Contains(err.Error(), "pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Errorf("refusal %q does not name the process holding the file (pid %d)", err, cmd.Process.Pid)
	}

	cmd.Process.Kill()
	cmd.Wait()
	l, err := LockFile(path)
	if err != nil {
		t.Fatalf("lock after the holder was killed: %v", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
}
