package discord_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/discord"
	dtk "relaybot/internal/testkit/discord"
	"relaybot/internal/testkit/wait"
)

// guildMessage is a message in a guild channel that mentions the bot.
func guildMessage(srv *dtk.Server, guild, channel, text string) dtk.UserMessage {
	return dtk.UserMessage{ChannelID: channel, GuildID: guild, AuthorID: userID,
		Content: "<@" + srv.BotID() + "> " + text, MentionBot: true}
}

// TestOneProcessConnectsEveryShardDiscordRecommends: with the shard count left to Discord
// (two here), a single process connects both shards, once each, and answers in the guilds of
// both and in direct messages (which arrive on shard 0).
func TestOneProcessConnectsEveryShardDiscordRecommends(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hs := launch(t, dtk.New(dtk.Config{InMemory: true, Shards: 2, MaxConcurrency: 2}), nil, nil)
		hs.waitFor("both shards connected once", func() bool {
			l := hs.srv.LiveShards()
			return l[0] == 1 && l[1] == 1
		})
		g0, g1 := dtk.GuildOnShard(0, 2, 0), dtk.GuildOnShard(1, 2, 0)
		for _, c := range []struct{ um dtk.UserMessage }{
			{guildMessage(hs.srv, g0, "700000000000000001", "on shard zero")},
			{guildMessage(hs.srv, g1, "700000000000000002", "on shard one")},
			{dtk.UserMessage{ChannelID: "700000000000000003", Content: "a direct message"}},
		} {
			_, got := hs.post(c.um)
			if got.in.Chat.ChatID != c.um.ChannelID {
				t.Errorf("a message in %s reached the handler as one in %s", c.um.ChannelID, got.in.Chat.ChatID)
			}
		}
		select {
		case extra := <-hs.h.got:
			t.Errorf("a message reached the handler twice: %q", extra.in.Text)
		default:
		}
	})
}

// testShards hands out leases the test grants and takes back.
type testShards struct {
	leases []*testLease
}

func (s *testShards) Join(_ context.Context, count int) ([]adapters.Lease, error) {
	out := make([]adapters.Lease, count)
	for i := range out {
		out[i] = s.leases[i]
	}
	return out, nil
}

type testLease struct {
	grant    chan struct{}
	mu       sync.Mutex
	lose     context.CancelCauseFunc
	served   int // Serving calls
	released chan struct{}
}

func newTestLease() *testLease {
	return &testLease{grant: make(chan struct{}, 1), released: make(chan struct{}, 1)}
}

func (l *testLease) Acquire(ctx context.Context) (context.Context, func(), error) {
	select {
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-l.grant:
	}
	held, lose := context.WithCancelCause(ctx)
	l.mu.Lock()
	l.lose = lose
	l.mu.Unlock()
	return held, func() { lose(nil); l.released <- struct{}{} }, nil
}

// Serving implements adapters.HandOff.
func (l *testLease) Serving(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.served++
	return nil
}

func (l *testLease) servedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.served
}

// take ends the holder's term, as a lease lost to the database or another replica.
func (l *testLease) take() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lose(errors.New("lease lost"))
}

// giveUp ends the holder's term as given up; the new holder serves the lease once handed is
// closed.
func (l *testLease) giveUp(handed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lose(&adapters.GivenUp{HandedOver: func(ctx context.Context) error {
		select {
		case <-handed:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
}

// TestAShardGivenUpStaysConnectedUntilItIsHandedOver: a replica whose shard lease is given up
// (not lost) releases the lease at once but keeps the shard's gateway session, and answers what
// arrives on it, until the new holder serves the shard; then it closes the session.
func TestAShardGivenUpStaysConnectedUntilItIsHandedOver(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		shards := &testShards{leases: []*testLease{newTestLease(), newTestLease()}}
		hs := launch(t, dtk.New(dtk.Config{InMemory: true, Shards: 2, MaxConcurrency: 2}), func(o *discord.Options) { o.ShardLeases = shards }, nil)
		l := shards.leases[1]
		l.grant <- struct{}{}
		wait.For(t, "shard 1 connected and marked served", func() bool { return hs.srv.LiveShards()[1] == 1 && l.servedCount() == 1 })

		handed := make(chan struct{})
		synctest.Wait() // as before take in TestAReplicaConnectsOnlyTheShardsItHoldsAndClosesOneItLoses
		l.giveUp(handed)
		select {
		case <-l.released:
		case <-time.After(30 * time.Second):
			t.Fatal("the lease given up was not released")
		}
		if live := hs.srv.LiveShards()[1]; live != 1 {
			t.Fatalf("shard 1 has %d live sessions right after it was given up, want its session kept", live)
		}
		g1 := dtk.GuildOnShard(1, 2, 0)
		if _, got := hs.post(guildMessage(hs.srv, g1, "710000000000000003", "in the hand-off")); got.in.Text != "in the hand-off" {
			t.Errorf("the handler got %q, want the message sent during the hand-off", got.in.Text)
		}
		close(handed)
		hs.waitFor("shard 1's connection closed once handed over", func() bool { return hs.srv.LiveShards()[1] == 0 })
	})
}

// TestAReplicaConnectsOnlyTheShardsItHoldsAndClosesOneItLoses runs the adapter with shard
// leases: it connects shard 1 only once that lease is granted, answers in shard 1's guilds,
// closes shard 1's connection when the lease is taken back (and releases the lease), and
// connects shard 0 (direct messages) when that lease comes.
func TestAReplicaConnectsOnlyTheShardsItHoldsAndClosesOneItLoses(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		shards := &testShards{leases: []*testLease{newTestLease(), newTestLease()}}
		hs := launch(t, dtk.New(dtk.Config{InMemory: true, Shards: 2, MaxConcurrency: 2}), func(o *discord.Options) { o.ShardLeases = shards }, nil)
		shards.leases[1].grant <- struct{}{}
		hs.waitFor("shard 1 connected, shard 0 not", func() bool {
			l := hs.srv.LiveShards()
			return l[0] == 0 && l[1] == 1
		})
		g1 := dtk.GuildOnShard(1, 2, 0)
		if _, got := hs.post(guildMessage(hs.srv, g1, "710000000000000001", "hello")); got.in.Text != "hello" {
			t.Errorf("the handler got %q, want the guild message on the held shard", got.in.Text)
		}

		// Let the shard's discordgo goroutines settle first: its Close sleeps holding the session
		// lock, and a heartbeat not yet started would wait on that lock, which the bubble
		// cannot see past.
		synctest.Wait()
		shards.leases[1].take()
		hs.waitFor("shard 1's connection closed", func() bool { return hs.srv.LiveShards()[1] == 0 })
		select {
		case <-shards.leases[1].released:
		case <-time.After(30 * time.Second):
			t.Fatal("the lost lease was never released")
		}

		shards.leases[0].grant <- struct{}{}
		hs.waitFor("shard 0 connected", func() bool { return hs.srv.LiveShards()[0] == 1 })
		if _, got := hs.dm("710000000000000002", "direct"); got.in.Text != "direct" {
			t.Errorf("the handler got %q, want the direct message on shard 0", got.in.Text)
		}
	})
}

// memLedger is a deployment's inbound ledger in memory: each replica sees it through a
// memJournal of its own; a replica marked dead leaves its unfinished messages to the others.
type memLedger struct {
	mu   sync.Mutex
	rows map[string]*memRow
	dead map[string]bool
}

type memRow struct {
	owner     string
	payload   []byte
	done      bool
	adoptions int
}

type memJournal struct {
	l  *memLedger
	me string
}

func (j memJournal) Claim(ctx context.Context, platform, key string) (bool, error) {
	return j.ClaimPayload(ctx, platform, key, nil)
}

func (j memJournal) ClaimPayload(_ context.Context, platform, key string, payload []byte) (bool, error) {
	j.l.mu.Lock()
	defer j.l.mu.Unlock()
	if _, ok := j.l.rows[platform+key]; ok {
		return false, nil
	}
	j.l.rows[platform+key] = &memRow{owner: j.me, payload: payload}
	return true, nil
}

func (j memJournal) Done(_ context.Context, platform, key string) error {
	j.l.mu.Lock()
	defer j.l.mu.Unlock()
	if r, ok := j.l.rows[platform+key]; ok {
		r.done = true
	}
	return nil
}

func (j memJournal) Orphans(_ context.Context, platform string) (map[string][]byte, map[string]int, error) {
	j.l.mu.Lock()
	defer j.l.mu.Unlock()
	out, adoptions := map[string][]byte{}, map[string]int{}
	for k, r := range j.l.rows {
		if key, ok := cutPrefix(k, platform); ok && !r.done && len(r.payload) > 0 && j.l.dead[r.owner] {
			r.owner = j.me
			r.adoptions++
			out[key], adoptions[key] = r.payload, r.adoptions
		}
	}
	return out, adoptions, nil
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) < len(p) || s[:len(p)] != p {
		return s, false
	}
	return s[len(p):], true
}

// TestAMessageOfAReplicaThatDiedIsAnsweredByAnother runs two adapters (two replicas) on one
// Discord and one ledger: the replica that takes a guild message dies mid-turn; the other one
// takes the message over from the ledger and hands it to its pipeline again, marked
// redelivered, with its text, author and chat, and its reply answers the user's message.
func TestAMessageOfAReplicaThatDiedIsAnsweredByAnother(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		srv := dtk.New(dtk.Config{InMemory: true})
		ledger := &memLedger{rows: map[string]*memRow{}, dead: map[string]bool{}}
		stuck := make(chan struct{})
		defer close(stuck)
		launch(t, srv, func(o *discord.Options) { o.Ledger = memJournal{ledger, "a"} },
			func(context.Context, adapters.Inbound, adapters.Responder) { <-stuck })
		wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.WaitReady(wctx); err != nil {
			t.Fatal(err)
		}
		um := guildMessage(srv, guildID, "720000000000000001", "what time is it?")
		um.RoleIDs = []string{"900"}
		posted, err := srv.Post(um)
		if err != nil {
			t.Fatal(err)
		}
		wait.For(t, "the first replica to take the message", func() bool {
			ledger.mu.Lock()
			defer ledger.mu.Unlock()
			return len(ledger.rows) == 1
		})

		second := join(t, srv, func(o *discord.Options) { o.Ledger = memJournal{ledger, "b"} },
			func(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
				r := out.NewReply(ctx)
				_ = r.Finish(ctx, "It is noon.", nil)
			})
		ledger.mu.Lock()
		ledger.dead["a"] = true
		ledger.mu.Unlock()

		got := second.next()
		if !got.in.Redelivered || got.in.Text != "what time is it?" || got.in.MessageID != posted.ID ||
			got.in.UserID != userID || got.in.Chat.ChatID != um.ChannelID || got.in.Kind != adapters.Group ||
			len(got.in.Roles) != 1 || got.in.Roles[0] != "900" {
			t.Errorf("the survivor got %+v, want the message again, marked redelivered", got.in)
		}
		msgs := srv.BotMessages(um.ChannelID)
		if len(msgs) != 1 || msgs[0].Content != "It is noon." || msgs[0].ReferenceID != posted.ID {
			t.Errorf("bot messages %+v, want one answer referencing the user's message", msgs)
		}
		wait.For(t, "the message recorded done", func() bool {
			ledger.mu.Lock()
			defer ledger.mu.Unlock()
			for _, r := range ledger.rows {
				return r.done
			}
			return false
		})
	})
}
