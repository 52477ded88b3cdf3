package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"relaybot/config"
	dtk "relaybot/internal/testkit/discord"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/logbuf"
	tgkit "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
	"relaybot/store/storetest"
)

// helperReplicaConfig names the config file of a TestHelperReplica child.
const helperReplicaConfig = "RELAYBOT_REPLICA_HELPER_CONFIG"

// TestHelperReplica is bot serve in a child process of the test binary, as a replica of a
// deployment: SIGTERM stops it cleanly (its turns finish, it leaves the instance list), SIGKILL
// kills it as a crash would.
func TestHelperReplica(t *testing.T) {
	path := os.Getenv(helperReplicaConfig)
	if path == "" {
		t.Skip("run by TestThreeReplicasServeOneBot")
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, slog.New(slog.NewTextHandler(os.Stderr, nil)), nil); err != nil {
		t.Fatal(err)
	}
}

// childReplica is a bot serve replica in a child process.
type childReplica struct {
	cmd  *exec.Cmd
	out  *logbuf.Buffer
	done chan struct{}
	err  error // the exit, once done is closed
}

// startChildReplica runs a replica with the config text in a child process until the test ends.
func startChildReplica(t *testing.T, cfg *tomlConfig) *childReplica {
	t.Helper()
	cfgPath := cfg.write(t)
	c := &childReplica{out: &logbuf.Buffer{}, done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperReplica$", "-test.count=1")
	c.cmd.Env = append(os.Environ(), helperReplicaConfig+"="+cfgPath)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(c.kill)
	return c
}

// kill ends the replica with SIGKILL and waits for it; safe to call more than once.
func (c *childReplica) kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
}

// term stops the replica with SIGTERM and waits until it exited.
func (c *childReplica) term(t *testing.T) {
	t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	wait.For(t, "a replica to stop after SIGTERM", func() bool {
		select {
		case <-c.done:
			return true
		default:
			return false
		}
	})
	if c.err != nil {
		t.Errorf("a replica stopped with %v:\n%s", c.err, c.out)
	}
}

// logged reports whether the replica's log has a line with msg.
func (c *childReplica) logged(msg string) bool {
	return strings.Contains(c.out.String(), `msg="`+msg+`"`)
}

// roundRobin is the test's load balancer in front of the replicas' webhooks: each update goes to
// the next replica in turn, or to the one pinned; a replica that cannot be reached (killed) is
// skipped for the next.
type roundRobin struct {
	srv *httptest.Server

	mu       sync.Mutex
	backends []string
	next     int
	pinned   int // -1: round robin
}

func newRoundRobin(t *testing.T) *roundRobin {
	rr := &roundRobin{pinned: -1}
	rr.srv = httptest.NewServer(http.HandlerFunc(rr.serve))
	t.Cleanup(rr.srv.Close)
	return rr
}

func (rr *roundRobin) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rr.mu.Lock()
	backends, first := rr.backends, rr.pinned
	if first < 0 {
		first = rr.next
		rr.next++
	}
	rr.mu.Unlock()
	for i := range backends {
		addr := backends[(first+i)%len(backends)]
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, "http://"+addr+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		return
	}
	w.WriteHeader(http.StatusBadGateway)
}

// pin sends the next updates to replica i; -1 goes back to round robin.
func (rr *roundRobin) pin(i int) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.pinned = i
}

// replicaPlatform is how the test's users reach the replicas: the testkit Telegram by webhook
// or polling, or the testkit Discord with two shards.
type replicaPlatform interface {
	// configure adds the platform's part of replica i's config to c.
	configure(t *testing.T, i int, c *tomlConfig)
	// started waits until the replicas receive messages.
	started(t *testing.T, reps []*childReplica)
	// say sends a user's message in a chat of its own.
	say(chat int64, text string)
	// answers are the bot's messages in the chat, in order.
	answers(chat int64) []string
	// pin routes the next messages of new chats to replica i (-1: no preference) where the
	// platform lets the test choose.
	pin(i int)
	// stopMode says how the /stop test runs: across, the held turn is pinned to replica 0 and
	// the /stop to replica 1; else both reach the replica that receives the chat. tested is
	// false when the platform cannot test a stop (one poller takes every message).
	stopMode() (across, tested bool)
	// spreads reports whether a chat's messages are handed to the replicas in turn, so most
	// chats' two messages run on two replicas.
	spreads() bool
	// victim is the replica to kill mid-turn: one that is running turns.
	victim(t *testing.T, reps []*childReplica) int
	// takenOver waits until a survivor receives what the victim received, and reports how long
	// after the kill that was (0 when the platform has nothing to take over) and the most it may
	// take.
	takenOver(t *testing.T, reps []*childReplica, victim int, killed time.Time) (took, limit time.Duration)
	// rateLimited says the platform's 429 answers to the bot (empty: none).
	rateLimited() []string
}

// telegramPlatform is the testkit Telegram, with its real limits, reached by webhook behind the
// test's round-robin proxy or by polling.
type telegramPlatform struct {
	e       *env
	webhook bool
	rr      *roundRobin
}

// budget is the bot's Telegram budget in these tests (paid broadcast, so it may exceed 30 a
// second); the fake allows exactly as much, so replicas that did not share it would draw 429s.
const budget = 300

func (p *telegramPlatform) configure(t *testing.T, i int, c *tomlConfig) {
	mode := polling
	if p.webhook {
		mode = webhookAt("127.0.0.1:0", p.rr.srv.URL+"/hook")
	}
	// One message per answer: a message that reaches the user is an answer, whole.
	c.set("telegram", "enabled", true, "token", p.e.tg.Token(), "api_endpoint", p.e.tg.Endpoint(),
		"offset_file", filepath.Join(t.TempDir(), fmt.Sprintf("telegram-%d.offset", i)),
		"stream", false, "drafts", "off", "global_per_second", budget, "paid_broadcast", true).
		set("telegram", mode...)
}

func (p *telegramPlatform) started(t *testing.T, reps []*childReplica) {
	t.Helper()
	if !p.webhook {
		wait.For(t, "one replica to poll", func() bool {
			return slices.ContainsFunc(reps, func(r *childReplica) bool { return r.logged("telegram: this replica polls") })
		})
		return
	}
	var addrs []string
	for _, r := range reps {
		var addr string
		wait.For(t, "a replica's webhook to listen", func() bool {
			for line := range strings.Lines(r.out.String()) {
				if strings.Contains(line, `msg="telegram: webhook listening"`) {
					for _, f := range strings.Fields(line) {
						if a, ok := strings.CutPrefix(f, "addr="); ok {
							addr = a
							return true
						}
					}
				}
			}
			return false
		})
		addrs = append(addrs, addr)
	}
	p.rr.mu.Lock()
	p.rr.backends = addrs
	p.rr.mu.Unlock()
}

func (p *telegramPlatform) say(chat int64, text string) { p.e.say(chat, text) }

func (p *telegramPlatform) answers(chat int64) []string { return p.e.botTexts(chat) }

func (p *telegramPlatform) pin(i int) {
	if p.webhook {
		p.rr.pin(i)
	}
}

func (p *telegramPlatform) stopMode() (across, tested bool) { return p.webhook, p.webhook }

func (p *telegramPlatform) spreads() bool { return p.webhook }

func (p *telegramPlatform) victim(t *testing.T, reps []*childReplica) int {
	if p.webhook {
		return len(reps) - 1
	}
	return slices.IndexFunc(reps, func(r *childReplica) bool { return r.logged("telegram: this replica polls") })
}

func (p *telegramPlatform) takenOver(t *testing.T, reps []*childReplica, victim int, killed time.Time) (took, limit time.Duration) {
	t.Helper()
	if p.webhook {
		return 0, 0 // the proxy sends the next updates to the survivors
	}
	wait.For(t, "a survivor to take over polling", func() bool {
		for i, r := range reps {
			if i != victim && r.logged("telegram: this replica polls") {
				return true
			}
		}
		return false
	})
	return time.Since(killed), 15 * time.Second
}

func (p *telegramPlatform) rateLimited() []string {
	var out []string
	for _, c := range p.e.tg.Calls() {
		if c.Code == http.StatusTooManyRequests {
			out = append(out, fmt.Sprintf("%s %s in chat %d: %s", c.Time.Format("15:04:05.000"), c.Method, c.ChatID, c.Description))
		}
	}
	return out
}

// discordBudget is the bot's Discord budget of REST requests a second in these tests (Discord
// grants large bots more than the default 50); the fake allows exactly as much, so replicas that
// did not share it would draw 429s.
const discordBudget = 200

// discordShards is the shard count the testkit Discord recommends: two shards for three
// replicas, so one replica holds none until a holder dies.
const discordShards = 2

// discordPlatform is the testkit Discord recommending two shards, each connected by the replica
// holding its lease (discord.shards = "auto"). A chat is a guild channel, in guilds spread over
// both shards, or (one chat in ten, outside a pin) a direct message, which shard 0 receives.
// Discord hands a channel's messages to its shard's holder only: the test cannot send them to
// another replica, so a chat's messages land on two replicas only when its shard changes hands
// (the killed replica's messages, answered again by the survivor that takes its shard over).
type discordPlatform struct {
	t  *testing.T
	dc *dtk.Server

	mu          sync.Mutex
	channels    map[int64]dtk.UserMessage // a chat's channel, guild and user
	shard       int                       // the shard new chats' guilds are on; -1 spreads them
	victimShard int                       // the shard the victim holds
	before      int                       // the victim shard's identifies before the kill
}

func (p *discordPlatform) configure(t *testing.T, i int, c *tomlConfig) {
	c.set("discord", "enabled", true, "token", p.dc.Token(), "api_base", p.dc.APIBase(), "register_commands", false,
		"shards", "auto", "global_per_second", discordBudget)
}

// holders returns, by shard, the replicas holding it now by their logs: the last word of each
// replica on the shard is that it holds it, not that it lost it or handed it over (a replica
// that gave a shard up serves it until the one taking it over is connected: both hold it then).
func (p *discordPlatform) holders(reps []*childReplica) map[int][]int {
	out := map[int][]int{}
	for i, r := range reps {
		held := map[int]bool{}
		for line := range strings.Lines(r.out.String()) {
			for shard := range discordShards {
				switch {
				case strings.Contains(line, fmt.Sprintf(`msg="discord: this replica holds the shard" shard=%d `, shard)):
					held[shard] = true
				case strings.Contains(line, fmt.Sprintf(`msg="discord: shard lease lost; its connection is closed" shard=%d`, shard)),
					strings.Contains(line, fmt.Sprintf(`msg="discord: shard handed over; its connection is closed" shard=%d`, shard)),
					strings.Contains(line, fmt.Sprintf(`msg="discord: shard hand-off not confirmed; its connection is closed anyway" shard=%d`, shard)):
					held[shard] = false
				}
			}
		}
		for shard, h := range held {
			if h {
				out[shard] = append(out[shard], i)
			}
		}
	}
	return out
}

// settled reports whether each shard has one holder and one live gateway session, and no
// replica holds more than its share (ceil(shards / replicas)): one over it is about to give a
// shard up, and what Discord sends that shard until another replica holds it is lost.
func (p *discordPlatform) settled(reps []*childReplica) bool {
	h, live := p.holders(reps), p.dc.LiveShards()
	share := (discordShards + len(reps) - 1) / len(reps)
	count := map[int]int{}
	for shard := range discordShards {
		if len(h[shard]) != 1 || live[shard] != 1 {
			return false
		}
		if count[h[shard][0]]++; count[h[shard][0]] > share {
			return false
		}
	}
	return true
}

func (p *discordPlatform) started(t *testing.T, reps []*childReplica) {
	t.Helper()
	for _, r := range reps {
		wait.For(t, "a replica to take part in sharing the shards", func() bool {
			return r.logged("discord: sharing the gateway shards with the other replicas")
		})
	}
	wait.Until(t, "each shard held and connected by one replica", func() error {
		if !p.settled(reps) {
			return fmt.Errorf("holders %v, live sessions by shard %v", p.holders(reps), p.dc.LiveShards())
		}
		return nil
	})
}

// channel returns a chat's channel, guild and user, choosing them on the chat's first message.
func (p *discordPlatform) channel(chat int64) dtk.UserMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	if um, ok := p.channels[chat]; ok {
		return um
	}
	um := dtk.UserMessage{ChannelID: fmt.Sprintf("6%017d", chat), AuthorID: fmt.Sprintf("7%017d", chat)}
	switch {
	case p.shard >= 0:
		um.GuildID = dtk.GuildOnShard(p.shard, discordShards, int(chat%5))
	case chat%10 != 9:
		um.GuildID = dtk.GuildOnShard(int(chat%discordShards), discordShards, int(chat%5))
	}
	p.channels[chat] = um
	return um
}

func (p *discordPlatform) say(chat int64, text string) {
	um := p.channel(chat)
	um.Content = text
	if um.GuildID != "" {
		um.Content, um.MentionBot = "<@"+p.dc.BotID()+"> "+text, true
	}
	if _, err := p.dc.Post(um); err != nil {
		p.t.Fatalf("post %q in chat %d: %v", text, chat, err)
	}
}

func (p *discordPlatform) answers(chat int64) []string {
	var out []string
	for _, m := range p.dc.BotMessages(p.channel(chat).ChannelID) {
		out = append(out, m.Content)
	}
	return out
}

func (p *discordPlatform) pin(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shard = -1
	if i >= 0 {
		p.shard = p.victimShard
	}
}

// stopMode: the /stop reaches the holder of the chat's shard, which runs the turn; so does the
// Stop button's interaction (Discord dispatches it on the guild's shard too). No Discord stop
// crosses replicas; the test checks that the stop works, in time.
func (p *discordPlatform) stopMode() (across, tested bool) { return false, true }

func (p *discordPlatform) spreads() bool { return false }

// victim is the holder of shard 0; the test's pin sends the next chats to guilds of that shard.
func (p *discordPlatform) victim(t *testing.T, reps []*childReplica) int {
	t.Helper()
	if !p.settled(reps) {
		t.Fatalf("the shards changed hands before the kill: holders %v, live sessions %v", p.holders(reps), p.dc.LiveShards())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.victimShard, p.before = 0, p.dc.ShardIdentifies(0)
	return p.holders(reps)[0][0]
}

// takenOver waits until a survivor holds the killed replica's shard and identified it, each
// shard connected once again.
func (p *discordPlatform) takenOver(t *testing.T, reps []*childReplica, victim int, killed time.Time) (took, limit time.Duration) {
	t.Helper()
	wait.Until(t, "a survivor to identify the killed replica's shard", func() error {
		h := p.holders(reps)
		if p.dc.ShardIdentifies(p.victimShard) == p.before || !slices.ContainsFunc(h[p.victimShard], func(i int) bool { return i != victim }) {
			return fmt.Errorf("holders %v, identifies of shard %d %d", h, p.victimShard, p.dc.ShardIdentifies(p.victimShard))
		}
		// The killed replica's connection is gone (the fake saw it close), the survivor's live.
		if live := p.dc.LiveShards(); live[0] != 1 || live[1] != 1 {
			return fmt.Errorf("live sessions by shard %v", live)
		}
		return nil
	})
	return time.Since(killed), 30 * time.Second
}

func (p *discordPlatform) rateLimited() []string {
	var out []string
	for _, c := range p.dc.Calls() {
		if c.Status == http.StatusTooManyRequests {
			out = append(out, fmt.Sprintf("%s %s %s: retry after %v", c.Time.Format("15:04:05.000"), c.Method, c.Path, c.RetryAfter))
		}
	}
	return out
}

// TestThreeReplicasServeOneBot runs three bot serve processes on one PostgreSQL database and
// checks what users of the bot notice. 200 chats send two messages each at once; behind the
// webhook proxy a chat's two messages land on different replicas. Every message is answered
// exactly once, in the order sent, the second turn seeing the first one's answer in its history.
// A /stop sent to a replica that does not run the turn stops it within a second (on Discord the
// /stop reaches the replica that runs the turn: it stops it within a second). One replica is
// killed (SIGKILL) while three turns run on it, each in a tool call: a survivor answers those
// messages once more within 30 s, their turns having run on two replicas (and takes over
// polling within 15 s, or the killed replica's Discord shard within 30 s), and messages sent
// after the kill are answered once. No 429 from the platform although every replica may send,
// every audit row and turn ends in a final status, and every message's turn is in the history,
// whole. The Discord mode's chats are guild channels on both shards and direct messages.
func TestThreeReplicasServeOneBot(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three bot serve processes")
	}
	for _, mode := range []string{"webhook", "polling"} {
		t.Run("telegram "+mode, func(t *testing.T) {
			dsn := storetest.PostgresDSN(t)
			e := newEnv(t)
			paidTelegram(t, e)
			p := &telegramPlatform{e: e, webhook: mode == "webhook"}
			if p.webhook {
				p.rr = newRoundRobin(t)
			}
			runThreeReplicas(t, dsn, e, p)
		})
	}
	t.Run("discord", func(t *testing.T) {
		dsn := storetest.PostgresDSN(t)
		e := newEnv(t)
		dc := dtk.New(dtk.Config{Shards: discordShards, MaxConcurrency: discordShards, GlobalN: discordBudget})
		t.Cleanup(dc.Close)
		runThreeReplicas(t, dsn, e, &discordPlatform{t: t, dc: dc, channels: map[int64]dtk.UserMessage{}, shard: -1})
	})
}

// paidTelegram gives e a testkit Telegram with Telegram's limits and a paid budget as large as
// the bot's, and returns it.
func paidTelegram(t *testing.T, e *env) *tgkit.Server {
	t.Helper()
	tg, err := tgkit.New(tgkit.Options{PaidPerSecond: budget})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Close)
	e.tg = tg
	return tg
}

// runThreeReplicas is TestThreeReplicasServeOneBot on one platform.
func runThreeReplicas(t *testing.T, dsn string, e *env, p replicaPlatform) {
	const chats = 200
	const loadChat, stopChat, killChat, afterChat = 10_000, 20_000, 30_000, 40_000

	hold := make(chan struct{})
	defer close(hold)
	var mu sync.Mutex
	asked := map[string]int{} // the last user text of each model request → requests
	e.llm.SetHandler(func(req llm.Request) llm.Reply {
		last := lastUserText(req)
		mu.Lock()
		asked[last]++
		n := asked[last]
		mu.Unlock()
		switch {
		case strings.HasPrefix(last, "hold"):
			return llm.Reply{Chunks: []llm.Chunk{{Content: "Holding"}, {Content: " on", Wait: hold}}}
		case strings.HasPrefix(last, "kill") && n == 1:
			// The first replica to run it waits in a tool call until it is killed.
			return llm.ToolCalls(llm.Call{ID: "call_" + strings.ReplaceAll(last, " ", "_"), Name: "sleep", Args: []string{`{"seconds":600}`}})
		}
		// A few milliseconds of model time: two messages of a chat that ran at once would
		// overlap.
		return llm.Reply{Chunks: []llm.Chunk{{Content: "A:"}, {Content: last}}, TokenDelay: 10 * time.Millisecond}
	})

	reps := startReplicas(t, 3, dsn, e, p)
	p.started(t, reps)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want := map[int64][]string{} // each chat's answers, in order

	// 200 chats, two messages each, sent at once.
	for c := range int64(chats) {
		for m := range 2 {
			text := fmt.Sprintf("c%d m%d", c, m)
			p.say(loadChat+c, text)
			want[loadChat+c] = append(want[loadChat+c], "A:"+text)
		}
	}
	wait.Until(t, "every message of the 200 chats answered", func() error {
		for c := range int64(chats) {
			if got := p.answers(loadChat + c); len(got) < 2 {
				return fmt.Errorf("chat %d has %d answers %q", loadChat+c, len(got), got)
			}
		}
		return nil
	})

	// /stop sent to a replica that does not run the turn (where the platform lets the test
	// choose the replica), else to the one that runs it.
	across, stopped := p.stopMode()
	if stopped {
		if across {
			p.pin(0)
		}
		p.say(stopChat, "hold on")
		wait.For(t, "the model to be asked for the held answer", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return asked["hold on"] > 0
		})
		if across {
			p.pin(1)
		}
		asked := time.Now()
		p.say(stopChat, "/stop")
		wait.For(t, "the held answer stopped", func() bool {
			return slices.ContainsFunc(p.answers(stopChat), contains("stopped"))
		})
		if took := time.Since(asked); took > time.Second {
			t.Errorf("the stop took %v to reach the replica running the turn, want within 1 s", took)
		}
		if across {
			// The stopped reply may reach the chat before the replica's log line reaches the pipe.
			wait.For(t, "the replica running the turn to log the stop from the other replica", func() bool {
				return reps[0].logged("stopped a turn on another replica's request")
			})
		}
		p.pin(-1)
	}

	// Kill a replica while three turns wait in a tool call on it.
	victim := p.victim(t, reps)
	if victim < 0 {
		t.Fatal("no replica to kill")
	}
	p.pin(victim)
	for k := range int64(3) {
		p.say(killChat+k, fmt.Sprintf("kill k%d", k))
		want[killChat+k] = []string{fmt.Sprintf("A:kill k%d", k)}
	}
	running := func() int {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM tool_calls WHERE status = 'running'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	wait.For(t, "three tool calls running on the replica to kill", func() bool { return running() == 3 })
	p.pin(-1)
	reps[victim].kill()
	killed := time.Now()
	if took, limit := p.takenOver(t, reps, victim, killed); took > limit {
		t.Errorf("a survivor took over %v after the kill, want within %v", took, limit)
	}
	wait.Until(t, "the killed replica's messages answered by a survivor", func() error {
		for k := range int64(3) {
			if got := p.answers(killChat + k); len(got) == 0 {
				return fmt.Errorf("chat %d has no answer", killChat+k)
			}
		}
		return nil
	})
	if took := time.Since(killed); took > 30*time.Second {
		t.Errorf("the killed replica's messages were answered %v after the kill, want within 30 s", took)
	}
	for c := range int64(10) {
		text := fmt.Sprintf("after %d", c)
		p.say(afterChat+c, text)
		want[afterChat+c] = []string{"A:" + text}
	}
	wait.Until(t, "the messages sent after the kill answered", func() error {
		for c := range int64(10) {
			if got := p.answers(afterChat + c); len(got) == 0 {
				return fmt.Errorf("chat %d has no answer", afterChat+c)
			}
		}
		return nil
	})
	wait.For(t, "the killed replica's turns to end", func() bool { return running() == 0 })
	for i, r := range reps {
		if i != victim {
			r.term(t)
		}
	}

	// Every message answered exactly once, in order.
	var wrong []string
	for chat, w := range want {
		if got := p.answers(chat); !slices.Equal(got, w) {
			wrong = append(wrong, fmt.Sprintf("chat %d: answers %q, want %q", chat, got, w))
		}
	}
	reportSome(t, "chats whose messages were not each answered once, in order", wrong)
	if got := p.answers(stopChat); stopped && len(got) != 1 {
		t.Errorf("the stopped chat has answers %q, want the one stopped answer", got)
	}
	// Each second message waited for the first one's turn: its request carries the first
	// answer in the history.
	var overlapped []string
	for _, req := range e.llm.Requests() {
		last := lastUserText(req)
		// A message answered again after its replica died is in the model's context once.
		if strings.HasPrefix(last, "kill") {
			n := 0
			for _, m := range req.Messages {
				if m.Role == "user" {
					n += strings.Count(m.Content, last)
				}
			}
			if n != 1 {
				t.Errorf("the model was asked with %q %d times in the context, want once: the interrupted turn's copy and the message answered again both went in", last, n)
			}
		}
		var c int
		if _, err := fmt.Sscanf(last, "c%d m1", &c); err != nil {
			continue
		}
		if !slices.ContainsFunc(req.Messages, func(m llm.Message) bool {
			return m.Role == "assistant" && m.Content == fmt.Sprintf("A:c%d m0", c)
		}) {
			overlapped = append(overlapped, fmt.Sprintf("chat %d", loadChat+c))
		}
	}
	reportSome(t, "chats whose second message ran without the first answer in its history (the two turns ran at once, or the second first)", overlapped)
	if limited := p.rateLimited(); len(limited) != 0 {
		t.Errorf("the platform answered %d requests with 429, want none: the replicas together exceeded a budget; the first:\n%s",
			len(limited), strings.Join(limited[:min(5, len(limited))], "\n"))
	}

	// The database: final statuses, each message's turn once and whole.
	statuses := func(query string) map[string]int {
		rows, err := db.Query(query)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]int{}
		for rows.Next() {
			var s string
			var n int
			if err := rows.Scan(&s, &n); err != nil {
				t.Fatal(err)
			}
			out[s] = n
		}
		return out
	}
	if got := statuses(`SELECT status, count(*) FROM tool_calls GROUP BY status`); got["running"] != 0 || got["interrupted"] != 3 {
		t.Errorf("audit rows by status %v, want the killed replica's 3 interrupted and none running", got)
	}
	// The killed replica's turns were cut, then their messages answered again: a cut turn answered
	// again leaves the history as retried (its audit rows stay, interrupted).
	if got := statuses(`SELECT status, count(*) FROM turns GROUP BY status`); got["running"] != 0 || got["interrupted"]+got["retried"] != 3 || got["stopped"] > 1 {
		t.Errorf("turns by status %v, want none running, the killed replica's 3 interrupted or retried", got)
	}
	rows, err := db.Query(`SELECT t.status, u.content, t.instance_id, t.error,
		(SELECT role FROM messages WHERE turn_id = t.id ORDER BY seq DESC LIMIT 1)
		FROM turns t JOIN messages u ON u.turn_id = t.id AND u.role = 'user'`)
	if err != nil {
		t.Fatal(err)
	}
	okTurns := map[string]int{}
	ranOn := map[string]string{}
	replicasOf := map[string]map[string]bool{} // a message's turns' replicas
	turnsOf := map[string][]string{}           // a message's turns: status and error
	for rows.Next() {
		var status, text, instance, turnErr string
		var lastRole sql.NullString
		if err := rows.Scan(&status, &text, &instance, &turnErr, &lastRole); err != nil {
			t.Fatal(err)
		}
		turnsOf[text] = append(turnsOf[text], strings.TrimSpace(status+" "+turnErr))
		if replicasOf[text] == nil {
			replicasOf[text] = map[string]bool{}
		}
		replicasOf[text][instance] = true
		if status != "ok" {
			continue
		}
		okTurns[text]++
		ranOn[text] = instance
		if lastRole.String != "assistant" {
			t.Errorf("the turn of %q ends with a %q message, want the answer: history keeps whole rounds", text, lastRole.String)
		}
	}
	rows.Close()
	var lost []string
	for chat, w := range want {
		for _, a := range w {
			text := strings.TrimPrefix(a, "A:")
			if okTurns[text] != 1 {
				lost = append(lost, fmt.Sprintf("chat %d: %d finished turns of %q (its turns: %q)", chat, okTurns[text], text, turnsOf[text]))
			}
		}
	}
	reportSome(t, "messages without exactly one finished turn in the history", lost)
	// The killed replica's messages ran on two replicas: cut on the killed one, answered on a
	// survivor.
	for k := range 3 {
		if text := fmt.Sprintf("kill k%d", k); len(replicasOf[text]) != 2 {
			t.Errorf("%q ran on %d replicas (its turns: %q), want two: the killed one and a survivor", text, len(replicasOf[text]), turnsOf[text])
		}
	}
	if p.spreads() {
		instances, split := map[string]bool{}, 0
		for c := range chats {
			a, b := ranOn[fmt.Sprintf("c%d m0", c)], ranOn[fmt.Sprintf("c%d m1", c)]
			if a == "" || b == "" {
				continue // reported above
			}
			instances[a], instances[b] = true, true
			if a != b {
				split++
			}
		}
		if len(instances) != 3 || split < chats/2 {
			t.Errorf("the load ran on %d replicas, %d chats' two messages on two replicas; want all 3 replicas and most chats split", len(instances), split)
		}
	}
}

// startReplicas starts n replicas on the platform, their logs shown when the test fails, and
// returns once each counts all n: each replica counts the others at its next heartbeat and takes
// its share of the bot's budget then, and until it has, the deployment may send faster than the
// budget.
func startReplicas(t *testing.T, n int, dsn string, e *env, p replicaPlatform) []*childReplica {
	t.Helper()
	return startReplicasWith(t, n, dsn, e, p, nil)
}

// startReplicasWith is startReplicas whose replicas' configs more (when not nil) adds to.
func startReplicasWith(t *testing.T, n int, dsn string, e *env, p replicaPlatform, more func(*tomlConfig)) []*childReplica {
	t.Helper()
	var reps []*childReplica
	for i := range n {
		c := threeReplicaConfig(dsn, e)
		p.configure(t, i, c)
		if more != nil {
			more(c)
		}
		reps = append(reps, startChildReplica(t, c))
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, r := range reps {
				t.Logf("replica %d's log:\n%s", i, r.out)
			}
		}
	})
	for _, r := range reps {
		wait.For(t, "a replica to run and share the budget with the others", func() bool {
			return r.logged("bot running") && strings.Contains(r.out.String(),
				fmt.Sprintf(`msg="platform budgets shared among the live replicas" replicas=%d`, n))
		})
	}
	return reps
}

// threeReplicaConfig is a replica's config.toml: the database, e's model and MCP server (its
// sleep tool); the platform adds its section.
func threeReplicaConfig(dsn string, e *env) *tomlConfig {
	return (&tomlConfig{}).
		set("storage", "driver", "postgres", "dsn", dsn).
		set("models", "name", "primary", "base_url", e.llm.URL, "model", "test-model").
		set("agent", "system_prompt", "You are a test bot.").
		set("chat", "max_turns_in_flight", 512, "rate_limit_per_minute", 0).
		set("tools", "plugins", []string{}, "native", []string{}).
		set("mcp.servers", "name", "kit", "transport", "http", "url", e.mcp.URL, "local", true).
		set("admin", "enabled", false)
}

// lastUserText is the first paragraph of the last user message of a model request: the user's
// text, without what the bot may have joined to it (in a guild channel, the speaker's name in
// brackets before it).
func lastUserText(req llm.Request) string {
	last := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			last = m.Content
		}
	}
	first, _, _ := strings.Cut(last, "\n\n")
	if rest, ok := strings.CutPrefix(first, "["); ok {
		if _, text, ok := strings.Cut(rest, "] "); ok {
			return text
		}
	}
	return first
}

// reportSome fails t with how many problems of a kind there were and the first few of them.
func reportSome(t *testing.T, what string, problems []string) {
	t.Helper()
	if len(problems) == 0 {
		return
	}
	slices.Sort(problems)
	t.Errorf("%d %s, among them:\n%s", len(problems), what, strings.Join(problems[:min(5, len(problems))], "\n"))
}
