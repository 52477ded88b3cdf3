package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	dtk "relaybot/internal/testkit/discord"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/wait"
	"relaybot/store/storetest"
)

// TestAShardChangingHandsToAJoiningReplicaLosesNoMessage runs one replica holding both of two
// Discord shards, posts messages continuously in a guild on shard 1 while a second replica
// joins and takes shard 1 over (the first gives it up: it is over its share), and goes on
// posting until the shards have settled one each. Every message is answered exactly once: the
// first replica keeps its session of shard 1 open until the second one's is READY, so Discord
// always had a session to send each message to, and the inbound ledger answers the messages
// both sessions received once.
func TestAShardChangingHandsToAJoiningReplicaLosesNoMessage(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	dsn := storetest.PostgresDatabaseDSN(t)
	e := newEnv(t)
	dc := dtk.New(dtk.Config{Shards: 2, MaxConcurrency: 2})
	t.Cleanup(dc.Close)
	c := replicaTOML(dsn, e).
		set("discord", "enabled", true, "token", dc.Token(), "api_base", dc.APIBase(), "register_commands", false, "shards", "auto").
		set("admin", "enabled", false)
	e.llm.SetHandler(func(llm.Request) llm.Reply { return llm.Text("Answered.") })

	first := startReplica(t, c.parse(t))
	oneEach := func() bool { l := dc.LiveShards(); return l[0] == 1 && l[1] == 1 }
	wait.For(t, "the first replica to connect both shards", func() bool {
		return oneEach() && strings.Count(first.logs.String(), "discord: shard connected") == 2
	})

	// Messages every 100 ms in a guild on shard 1, each in a channel of its own from a user of
	// its own (within the per-user rate limit and Discord's global budget), from before the
	// second replica starts until the shards have settled.
	guild := dtk.GuildOnShard(1, 2, 0)
	var (
		mu       sync.Mutex
		channels []string
		postErr  error
	)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			ch := fmt.Sprintf("54000000000%07d", i)
			_, err := dc.Post(dtk.UserMessage{ChannelID: ch, GuildID: guild, AuthorID: fmt.Sprint(600 + i),
				Content: "<@" + dc.BotID() + "> question", MentionBot: true})
			mu.Lock()
			channels = append(channels, ch)
			if err != nil && postErr == nil {
				postErr = err
			}
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	posted := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), channels...)
	}
	wait.For(t, "the first messages answered", func() bool {
		p := posted()
		return len(p) >= 5 && len(dc.BotMessages(p[4])) > 0
	})

	second := startReplica(t, c.parse(t))
	holds := func(r *replica, shard int) bool {
		return strings.Contains(r.logs.String(), fmt.Sprintf(`msg="discord: this replica holds the shard" shard=%d`, shard))
	}
	wait.For(t, "the second replica to take shard 1, each shard connected once", func() bool {
		return holds(second, 1) && oneEach() && strings.Contains(second.logs.String(), "discord: shard connected")
	})
	// Keep posting a moment after the split settled, then stop.
	settled := len(posted())
	wait.For(t, "messages posted after the split settled", func() bool { return len(posted()) >= settled+10 })
	close(stop)
	<-stopped
	if postErr != nil {
		t.Fatal(postErr)
	}
	all := posted()

	wait.Until(t, "every message answered", func() error {
		var missing []string
		for _, ch := range all {
			if len(dc.BotMessages(ch)) == 0 {
				missing = append(missing, ch)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%d of %d messages unanswered: %v\nthe first replica's log:\n%s\nthe second's:\n%s", len(missing), len(all), missing, first.logs, second.logs)
		}
		return nil
	})
	for _, r := range []*replica{second, first} {
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
	for _, ch := range all {
		if got := dc.BotMessages(ch); len(got) != 1 {
			t.Errorf("channel %s got %d bot messages, want its message answered once", ch, len(got))
		}
	}
	if holds(second, 0) {
		t.Error("the second replica took shard 0, which the first should have kept")
	}
	if !strings.Contains(first.logs.String(), `msg="discord: shard handed over; its connection is closed" shard=1`) {
		t.Errorf("the first replica did not hand shard 1 over:\n%s", first.logs)
	}
}
