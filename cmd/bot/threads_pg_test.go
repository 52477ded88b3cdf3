package main

import (
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dtk "relaybot/internal/testkit/discord"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/wait"
	"relaybot/store/storetest"
)

// Three replicas with threads = "auto" open one thread per question and answer each once in
// it; a replica killed after opening a thread, its turn waiting in a tool call, leaves the
// question to a survivor, which meets Discord's 160004 ("a thread has already been created for
// this message"), answers in that thread, and opens no other.
func TestThreeReplicasNeverOpenTwoThreadsForOneMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three bot serve processes")
	}
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	dsn := storetest.PostgresDatabaseDSN(t)
	e := newEnv(t)
	dc := dtk.New(dtk.Config{Shards: discordShards, MaxConcurrency: discordShards, GlobalN: discordBudget})
	t.Cleanup(dc.Close)
	p := &discordPlatform{t: t, dc: dc, channels: map[int64]dtk.UserMessage{}, shard: -1}
	var mu sync.Mutex
	asked := map[string]int{}
	e.llm.SetHandler(func(req llm.Request) llm.Reply {
		if strings.Contains(req.Messages[0].Content, "title of at most six words") {
			return llm.Text("A title")
		}
		last := lastUserText(req)
		mu.Lock()
		asked[last]++
		n := asked[last]
		mu.Unlock()
		if strings.HasPrefix(last, "kill") && n == 1 {
			return llm.ToolCalls(llm.Call{ID: "call_kill", Name: "sleep", Args: []string{`{"seconds":600}`}})
		}
		return llm.Text("A:" + last)
	})
	reps := startReplicasWith(t, 3, dsn, e, p, func(c *tomlConfig) { c.set("discord", "threads", "auto") })
	p.started(t, reps)

	post := func(chat int64, text string) string {
		t.Helper()
		um := p.channel(chat)
		um.Content, um.MentionBot = "<@"+dc.BotID()+"> "+text, true
		m, err := dc.Post(um)
		if err != nil {
			t.Fatal(err)
		}
		return m.ID
	}
	answered := func(thread, text string) bool {
		for _, m := range dc.BotMessages(thread) {
			if m.Content == "A:"+text {
				return true
			}
		}
		return false
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func(query string) int {
		var n int
		if err := db.QueryRow(query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	allAnswered := func(questions map[string]string) func() error {
		return func() error {
			for thread, text := range questions {
				if !answered(thread, text) {
					return fmt.Errorf("thread %s (%q) shows %d bot messages", thread, text, len(dc.BotMessages(thread)))
				}
			}
			return nil
		}
	}
	questions := map[string]string{} // thread (the question's id) → its text
	for c := range int64(20) {
		if c%10 == 9 {
			continue // the platform makes these chats direct messages, which have no threads
		}
		text := fmt.Sprintf("q%d", c)
		questions[post(50_000+c, text)] = text
	}
	wait.Until(t, "every question answered in its thread", allAnswered(questions))
	wait.For(t, "every question's turn ended", func() bool {
		return count(`SELECT count(*) FROM inbound_ledger WHERE NOT done`) == 0
	})

	victim := p.victim(t, reps)
	p.pin(victim)
	killed := post(60_000, "kill me")
	p.pin(-1)
	wait.For(t, "the kill question's tool call running on its replica, in its thread", func() bool {
		_, opened := dc.Channel(killed)
		return count(`SELECT count(*) FROM tool_calls WHERE status = 'running'`) == 1 && opened
	})
	reps[victim].kill()
	p.takenOver(t, reps, victim, time.Now())
	questions[killed] = "kill me"

	wait.Until(t, "the killed replica's question answered in its thread", allAnswered(questions))
	var wrong []string
	for thread, text := range questions {
		if n := len(dc.BotMessages(thread)); n != 1 {
			wrong = append(wrong, fmt.Sprintf("thread of %q has %d bot messages, want its one answer", text, n))
		}
	}
	p.mu.Lock()
	for _, um := range p.channels {
		if n := len(dc.BotMessages(um.ChannelID)); n != 0 {
			wrong = append(wrong, fmt.Sprintf("channel %s itself has %d bot messages", um.ChannelID, n))
		}
	}
	p.mu.Unlock()
	reportSome(t, "questions not answered once in their thread", wrong)
	opened, refused := 0, 0
	for _, c := range dc.CallsTo(dtk.RouteStartThread) {
		switch {
		case c.Status == http.StatusCreated:
			opened++
		case c.Status == http.StatusBadRequest && strings.Contains(c.Path, "/messages/"+killed+"/"):
			refused++
		default:
			t.Errorf("a thread opening answered %d: %s", c.Status, c.Path)
		}
	}
	if opened != len(questions) || refused != 1 {
		t.Errorf("%d threads opened and %d openings refused as already there, want %d and the survivor's 1", opened, refused, len(questions))
	}
	for i, r := range reps {
		if i != victim {
			r.term(t)
		}
	}
}
