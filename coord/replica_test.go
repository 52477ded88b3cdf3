package coord

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
	"relaybot/internal/testkit/wait"
)

// engine is a delivery engine as a Replica drives it: it records the budget shares it is
// given and the replies it is asked to end.
type engine struct {
	mu     sync.Mutex
	shares []int
	marked []string // "chat message: text"
}

func (e *engine) ShareGlobal(n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shares = append(e.shares, n)
}

func (e *engine) MarkInterrupted(_ context.Context, msg adapters.MessageRef, shown string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.marked = append(e.marked, msg.Chat.String()+" "+msg.ID+": "+shown)
	return nil
}

func (e *engine) share() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.shares) == 0 {
		return 1
	}
	return e.shares[len(e.shares)-1]
}

func (e *engine) marks() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.marked)
}

// newTestReplica joins a replica with a short lease to the deployment on db; it leaves when the
// test ends.
func newTestReplica(t *testing.T, db *sql.DB, st Store) *Replica {
	t.Helper()
	id, err := NewID()
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReplica(context.Background(), db, ReplicaOptions{ID: id, Store: st, TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

// TestASurvivorEndsTheReplyADeadReplicaWasStreaming: a replica that died mid-reply left what
// its message showed; the survivor's heartbeat hands that message to the engine of the same bot
// to end with a note, and leaves another bot's replies to that bot's engine.
func TestASurvivorEndsTheReplyADeadReplicaWasStreaming(t *testing.T) {
	ctx := context.Background()
	st, _ := pgStore(t, "")
	db := pool(t, st)
	ours, theirs := BotOf(chat.Telegram, "our-token"), BotOf(chat.Telegram, "another-token")
	msg := adapters.MessageRef{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "42"}, ID: "7"}
	for _, bot := range []Bot{ours, theirs} {
		dead := NewReplies(db, "dead-replica", bot, nil) // no instance row: gone
		dead.Showing("1", msg, "half an answ")
		if err := dead.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	survivor := newTestReplica(t, db, storeOf(st))
	e := &engine{}
	survivor.AddEngine(ours, e)
	wait.For(t, "the survivor to end the dead replica's reply", func() bool { return len(e.marks()) > 0 })
	if err := survivor.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := e.marks(), []string{"telegram:42 7: half an answ"}; !slices.Equal(got, want) {
		t.Errorf("the chat saw %q ended, want %q once", got, want)
	}
	var left int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM reply_messages WHERE bot = $1`, theirs.String()).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 1 {
		t.Errorf("the other bot's interrupted reply was taken by an engine of another bot (%d left)", left)
	}
}

// TestReplicasShareTheBotWideBudgets: a replica joining a live one takes half of the bot-wide
// budgets at once, the first one halves its own at its next heartbeat, and when the newcomer
// leaves the first takes the whole budget back.
func TestReplicasShareTheBotWideBudgets(t *testing.T) {
	ctx := context.Background()
	st, _ := pgStore(t, "")
	db := pool(t, st)
	bot := BotOf(chat.Discord, "token")
	join := func() (*Replica, *engine) {
		t.Helper()
		r := newTestReplica(t, db, storeOf(st))
		e := &engine{}
		r.AddEngine(bot, e)
		return r, e
	}
	_, first := join()
	if got := first.share(); got != 1 {
		t.Fatalf("a replica alone sends at 1/%d of the bot's budget", got)
	}
	second, newcomer := join()
	if got := newcomer.share(); got != 2 {
		t.Errorf("a replica joining a live one starts at 1/%d of the bot's budget, want 1/2", got)
	}
	wait.For(t, "the first replica to halve its budget", func() bool { return first.share() == 2 })
	if err := second.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the first replica to take the whole budget back", func() bool { return first.share() == 1 })
}

// TestABotIsNamedByADigestOfItsToken: the names replicas share for a bot carry a digest of its
// token, never the token, and stay what earlier builds wrote (a rolling upgrade shares leases).
func TestABotIsNamedByADigestOfItsToken(t *testing.T) {
	const token = "123456:secret-part"
	sum := sha256.Sum256([]byte(token))
	digest := hex.EncodeToString(sum[:8])
	tg, dc := BotOf(chat.Telegram, token), BotOf(chat.Discord, token)
	for _, tc := range []struct{ got, want string }{
		{tg.String(), "telegram " + digest},
		{tg.lease("poller"), "telegram poller " + digest},
		{dc.lease("shards"), "discord shards " + digest},
		{budgetKey{bot: tg, chat: "-100"}.String(), "telegram " + digest + "|-100"},
		{chatOf(tg, budgetKey{bot: tg, chat: "-100"}.String()), "-100"},
	} {
		if tc.got != tc.want {
			t.Errorf("named %q, want %q", tc.got, tc.want)
		}
		if strings.Contains(tc.got, "secret") {
			t.Errorf("%q shows the token", tc.got)
		}
	}
}
