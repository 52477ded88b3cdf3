package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"relaybot/internal/testkit/wait"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relaybot/config"
	"relaybot/coord"
	dtk "relaybot/internal/testkit/discord"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/logbuf"
	"relaybot/store/storetest"
)

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// replica is one bot serve of a deployment, run in this process.
type replica struct {
	stop func() error
	logs *logbuf.Buffer
}

// startReplica runs bot serve with cfg until the test ends (or stop) and waits until it runs.
func startReplica(t *testing.T, cfg *config.Config) *replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{logs: &logbuf.Buffer{}}
	errc := make(chan error, 1)
	go func() { errc <- serve(ctx, cfg, slog.New(slog.NewTextHandler(r.logs, nil)), nil) }()
	r.stop = sync.OnceValue(func() error {
		cancel()
		return <-errc
	})
	t.Cleanup(func() { r.stop() })
	wait.For(t, "a replica to run", func() bool {
		select {
		case err := <-errc:
			errc <- err // for stop, which the test's cleanup calls
			t.Fatalf("replica did not start: %v\n%s", err, r.logs)
		default:
		}
		return strings.Contains(r.logs.String(), "bot running")
	})
	return r
}

// adminAddr is the address the replica's admin listener took, from its log.
func (r *replica) adminAddr(t *testing.T) string {
	t.Helper()
	var addr string
	wait.For(t, "the admin listener's address", func() bool {
		for _, line := range strings.Split(r.logs.String(), "\n") {
			if !strings.Contains(line, `msg="admin listening"`) {
				continue
			}
			for _, f := range strings.Fields(line) {
				if a, ok := strings.CutPrefix(f, "addr="); ok {
					addr = a
					return true
				}
			}
		}
		return false
	})
	return addr
}

// replicaTOML is the config.toml of one replica on the database dsn with e's model; the test
// adds the platforms and the admin listener.
func replicaTOML(dsn string, e *env) *tomlConfig {
	return (&tomlConfig{}).
		set("storage", "driver", "postgres", "dsn", dsn).
		set("models", "name", "primary", "base_url", e.llm.URL, "model", "test-model").
		set("agent", "system_prompt", "You are a test bot.", "stream_flush_chunks", 1).
		set("tools", "plugins", []string{}, "native", []string{})
}

// telegramReplica is replicaTOML with e's Telegram bot, an offset file of its own, the
// [telegram] keys of mode (pairs), and the admin listener off.
func telegramReplica(t *testing.T, dsn string, e *env, mode ...any) *tomlConfig {
	// These tests watch answers stream by edits; drafts and rich finals have tests of their own.
	return replicaTOML(dsn, e).
		set("telegram", "enabled", true, "token", e.tg.Token(), "api_endpoint", e.tg.Endpoint(),
			"offset_file", filepath.Join(t.TempDir(), "telegram.offset"), "drafts", "off", "rich", "off").
		set("telegram", mode...).
		set("admin", "enabled", false)
}

// polling is the [telegram] mode of a replica that polls.
var polling = []any{"mode", "polling"}

// webhookAt is the [telegram] mode of a replica that takes webhooks on addr, which Telegram
// posts to url (a proxy in front of the replicas).
func webhookAt(addr, url string) []any {
	return []any{"mode", "webhook", "webhook_listen", addr, "webhook_url", url, "webhook_secret", "s3cret-token"}
}

// TestTwoReplicasOnOnePostgresAnswerEveryWebhookUpdateOnce runs two bot serve replicas on one
// PostgreSQL database behind a proxy that hands every Telegram webhook update to both of them
// (first to each in turn), as a retry landing on the other replica would: every message is
// answered exactly once, both replicas are listed while they run, and a clean stop removes each
// from the list at once. Before the inbound ledger, each replica answered every update.
func TestTwoReplicasOnOnePostgresAnswerEveryWebhookUpdateOnce(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	dsn := storetest.PostgresDatabaseDSN(t)
	e := newEnv(t)
	addrs := []string{freeAddr(t), freeAddr(t)}
	var turn atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		first := int(turn.Add(1) % 2)
		status := http.StatusBadGateway
		for _, i := range []int{first, 1 - first} {
			req, _ := http.NewRequestWithContext(r.Context(), r.Method, "http://"+addrs[i]+r.URL.Path, bytes.NewReader(body))
			req.Header = r.Header.Clone()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if i == first || status != http.StatusOK {
				status = resp.StatusCode
			}
		}
		w.WriteHeader(status)
	}))
	defer proxy.Close()

	var reps []*replica
	for _, addr := range addrs {
		cfg := telegramReplica(t, dsn, e, webhookAt(addr, proxy.URL+"/hook")...).parse(t)
		reps = append(reps, startReplica(t, cfg))
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if ins, err := coord.Instances(context.Background(), db); err != nil || len(ins) != 2 {
		t.Fatalf("live instances = %d (%v), want the 2 replicas", len(ins), err)
	}

	const chats = 12
	for i := range chats {
		e.llm.Push(llm.Text("Answered."))
		e.say(int64(2000+i), "question")
	}
	for i := range chats {
		e.waitBotText(int64(2000+i), "the answer", contains("Answered."))
	}
	for i := range chats {
		if got := e.botTexts(int64(2000 + i)); len(got) != 1 {
			t.Errorf("chat %d got %d bot messages %q, want its message answered once", 2000+i, len(got), got)
		}
	}
	for _, r := range reps {
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
	if ins, err := coord.Instances(context.Background(), db); err != nil || len(ins) != 0 {
		t.Fatalf("live instances after both stopped = %d (%v), want none: a clean stop leaves at once", len(ins), err)
	}
}

// TestOnePollerAtATimeAndASurvivorTakesOverFromAKilledOne runs two replicas in polling mode on
// one PostgreSQL database, the first in a child process: only it polls (Telegram, like the
// testkit, answers a second poller with 409 Conflict, and no poll ends so), its message is
// answered once; killed (SIGKILL), the other replica takes over polling and answers the next
// message once. Before the poller lease both polled and cut each other off with 409s.
func TestOnePollerAtATimeAndASurvivorTakesOverFromAKilledOne(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	dsn := storetest.PostgresDatabaseDSN(t)
	e := newEnv(t)
	cfgPath := telegramReplica(t, dsn, e, polling...).write(t)
	childOut, kill := startChildServe(t, cfgPath)
	defer kill()
	wait.For(t, "the first replica to hold the poller lease", func() bool { return strings.Contains(childOut.String(), "this replica polls") })

	cfg := telegramReplica(t, dsn, e, polling...).parse(t)
	second := startReplica(t, cfg)

	e.llm.Push(llm.Text("First answer."))
	e.say(3001, "question")
	e.waitBotText(3001, "the first replica's answer", contains("First answer."))
	kill()

	e.llm.Push(llm.Text("Second answer."))
	e.say(3002, "question")
	e.waitBotText(3002, "the surviving replica's answer", contains("Second answer."))
	if !strings.Contains(second.logs.String(), "this replica polls") {
		t.Errorf("the second message was answered but the second replica never polled:\n%s", second.logs)
	}
	// A replica's own last getUpdates at its stop may cut its abandoned long poll short: that
	// 409 reaches nobody, so the calls are taken before the stop.
	calls := e.tg.Calls()
	if err := second.stop(); err != nil {
		t.Fatal(err)
	}
	for _, chat := range []int64{3001, 3002} {
		if got := e.botTexts(chat); len(got) != 1 {
			t.Errorf("chat %d got %d bot messages %q, want its message answered once", chat, len(got), got)
		}
	}
	for _, c := range calls {
		if c.Method == "getUpdates" && c.Code == http.StatusConflict {
			t.Errorf("a getUpdates ended in 409 Conflict (%s): two replicas polled at once", c.Description)
		}
	}
}

// TestTwoReplicasOnOneDiscordTokenAnswerEachMessageOnce runs two replicas with Discord on one
// PostgreSQL database and one gateway shard: one replica holds the shard, and each message is
// answered once. Before the inbound ledger and the shard leases both replicas received and
// answered every message.
func TestTwoReplicasOnOneDiscordTokenAnswerEachMessageOnce(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	dsn := storetest.PostgresDatabaseDSN(t)
	e := newEnv(t)
	dc := dtk.New(dtk.Config{})
	t.Cleanup(dc.Close)
	c := replicaTOML(dsn, e).
		set("discord", "enabled", true, "token", dc.Token(), "api_base", dc.APIBase(), "register_commands", false).
		set("admin", "enabled", false)
	var reps []*replica
	for range 2 {
		reps = append(reps, startReplica(t, c.parse(t)))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := dc.WaitReady(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	e.llm.SetHandler(func(llm.Request) llm.Reply { return llm.Text("Answered.") })
	const chats = 8
	for i := range chats {
		if _, err := dc.Post(dtk.UserMessage{ChannelID: fmt.Sprintf("5000000000000001%02d", i), AuthorID: "600", Content: "question"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range chats {
		ch := fmt.Sprintf("5000000000000001%02d", i)
		wait.For(t, "the answer in "+ch, func() bool { return len(dc.BotMessages(ch)) > 0 })
	}
	for _, r := range reps {
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range chats {
		ch := fmt.Sprintf("5000000000000001%02d", i)
		if got := dc.BotMessages(ch); len(got) != 1 {
			t.Errorf("DM %s got %d bot messages, want its message answered once", ch, len(got))
		}
	}
}

// switchProxy is a webhook's load balancer written here: it forwards each request to the
// address to names at that moment, and closes with the test.
func switchProxy(t *testing.T, to func() string) *httptest.Server {
	t.Helper()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, "http://"+to()+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	}))
	t.Cleanup(proxy.Close)
	return proxy
}

// webhookReplicas starts n replicas on the database dsn with the testkit Telegram in webhook
// mode behind a proxy written here, which hands every update to the replica target names (the
// first one until it is changed).
func webhookReplicas(t *testing.T, dsn string, e *env, n int) ([]*replica, *atomic.Int64) {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = freeAddr(t)
	}
	target := new(atomic.Int64)
	proxy := switchProxy(t, func() string { return addrs[target.Load()] })
	var reps []*replica
	for _, addr := range addrs {
		cfg := telegramReplica(t, dsn, e, webhookAt(addr, proxy.URL+"/hook")...).parse(t)
		r := startReplica(t, cfg)
		wait.For(t, "the replica to listen for stop requests and free conversations", func() bool {
			logs := r.logs.String()
			return strings.Contains(logs, "listening for stop requests") && strings.Contains(logs, "listening for free conversations")
		})
		reps = append(reps, r)
	}
	return reps, target
}

// TestMessagesOfOneChatOnTwoReplicasRunOneAfterTheOther sends the second message of a chat to
// another replica while the first one's answer still streams: its turn waits, the model sees
// it only with the first answer in its history, and the answers come in order. A /stop then
// reaching the replica that ran nothing is answered "Nothing to stop." (no turn runs anywhere).
func TestMessagesOfOneChatOnTwoReplicasRunOneAfterTheOther(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	dsn := storetest.PostgresDatabaseDSN(t)
	reps, target := webhookReplicas(t, dsn, e, 2)
	// A replica joining a live deployment takes messages only once the others count it: their
	// shares of the bot-wide budget already make room for its own.
	for i, r := range reps {
		if !strings.Contains(r.logs.String(), `msg="platform budgets shared among the live replicas" replicas=2`) {
			t.Fatalf("replica %d runs without counting the two replicas:\n%s", i, r.logs)
		}
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	hold := make(chan struct{})
	var mu sync.Mutex
	var asked [][]string // the user and assistant texts of each model request
	e.llm.SetHandler(func(r llm.Request) llm.Reply {
		var seen []string
		for _, m := range r.Messages {
			if m.Role == "user" || m.Role == "assistant" {
				seen = append(seen, m.Content)
			}
		}
		mu.Lock()
		asked = append(asked, seen)
		mu.Unlock()
		if seen[len(seen)-1] == "first question" {
			return llm.Reply{Chunks: []llm.Chunk{{Content: "First answer,"}, {Content: " finished.", Wait: hold}}}
		}
		return llm.Reply{Chunks: []llm.Chunk{{Content: "Second answer."}}}
	})
	const chat = 4002
	e.say(chat, "first question")
	e.waitBotText(chat, "the first answer streaming on the first replica", contains("First answer,"))
	target.Store(1)
	e.say(chat, "second question")
	wait.For(t, "the second message to wait for the conversation", func() bool {
		var n int
		return db.QueryRow(`SELECT COUNT(*) FROM turn_queue`).Scan(&n) == nil && n == 2
	})
	mu.Lock()
	early := len(asked)
	mu.Unlock()
	if early != 1 {
		t.Fatalf("the model was asked %d times while the first answer streamed; the second message must wait for it", early)
	}
	close(hold)
	e.waitBotText(chat, "the second answer", contains("Second answer."))
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 {
		t.Fatalf("model asked %d times, want 2", len(asked))
	}
	if got := strings.Join(asked[1], " | "); !strings.Contains(got, "first question | First answer, finished. | second question") {
		t.Errorf("the second turn's history %q does not hold the whole first round before the second question", got)
	}
	var order []string
	for _, text := range e.botTexts(chat) {
		switch {
		case strings.Contains(text, "First answer, finished."):
			order = append(order, "first")
		case strings.Contains(text, "Second answer."):
			order = append(order, "second")
		}
	}
	if strings.Join(order, ",") != "first,second" {
		t.Errorf("answers in the chat: %v, want first then second", order)
	}
	// The answer shows before its turn is saved and leaves the conversation: a /stop before that
	// would stop the ending turn.
	wait.For(t, "the second turn to leave the conversation", func() bool {
		var n int
		return db.QueryRow(`SELECT COUNT(*) FROM turn_queue`).Scan(&n) == nil && n == 0
	})
	e.say(chat, "/stop")
	e.waitBotText(chat, "the answer to a /stop with nothing running", contains("Nothing to stop."))
}

// TestStopSentToAReplicaThatDoesNotRunTheTurnStopsIt runs two replicas behind a webhook proxy
// that sends a chat's question to the first replica and its /stop to the second: the answer the
// first replica is streaming stops. Before, the second replica said "Nothing to stop." and the
// answer ran on.
func TestStopSentToAReplicaThatDoesNotRunTheTurnStopsIt(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	reps, target := webhookReplicas(t, storetest.PostgresDatabaseDSN(t), e, 2)
	hold := make(chan struct{})
	defer close(hold)
	e.llm.SetHandler(func(llm.Request) llm.Reply {
		return llm.Reply{Chunks: []llm.Chunk{{Content: "Streaming along"}, {Content: " forever", Wait: hold}}}
	})
	const chat = 4001
	e.say(chat, "talk")
	e.waitBotText(chat, "the first replica's streamed words", contains("Streaming along"))
	target.Store(1)
	e.say(chat, "/stop")
	e.waitBotText(chat, "the answer marked stopped", contains("stopped"))
	for _, got := range e.botTexts(chat) {
		if strings.Contains(got, "Nothing to stop") {
			t.Errorf("the replica that got /stop said %q while the other one ran the turn", got)
		}
	}
	if !strings.Contains(reps[0].logs.String(), "stopped a turn on another replica's request") {
		t.Errorf("the replica running the turn did not log the stop from the other replica")
	}
}

// TestTheAdminAPIOfAnyReplicaListsEveryReplica runs two replicas with the admin listener (and
// the web chat) on one PostgreSQL database: /api/v1/instances on either lists both, marks the
// one asked, and a replica that stops cleanly leaves the list at once.
func TestTheAdminAPIOfAnyReplicaListsEveryReplica(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	dsn := storetest.PostgresDatabaseDSN(t)
	e := newEnv(t)
	// Each admin listener takes a port of its own choosing and says which in the log: a port
	// picked free beforehand can be taken by another test's process before the replica binds it.
	var addrs []string
	var reps []*replica
	for range 2 {
		cfg := replicaTOML(dsn, e).set("admin", webChatAdmin...).parse(t)
		r := startReplica(t, cfg)
		reps = append(reps, r)
		addrs = append(addrs, r.adminAddr(t))
	}
	type item struct {
		ID           string `json:"id"`
		Self         bool   `json:"self"`
		TurnsRunning int    `json:"turns_running"`
	}
	list := func(addr string) []item {
		t.Helper()
		resp, err := http.Get("http://" + addr + "/api/v1/instances")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Items []item }
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /api/v1/instances: %s, %v", resp.Status, err)
		}
		return body.Items
	}
	var ids [2]string
	for i, addr := range addrs {
		items := list(addr)
		if len(items) != 2 {
			t.Fatalf("replica %d lists %d replicas %+v, want 2", i, len(items), items)
		}
		for _, it := range items {
			if it.Self {
				ids[i] = it.ID
			}
		}
	}
	if ids[0] == "" || ids[1] == "" || ids[0] == ids[1] {
		t.Fatalf("each replica should mark itself once, got %q and %q", ids[0], ids[1])
	}
	if err := reps[1].stop(); err != nil {
		t.Fatal(err)
	}
	if items := list(addrs[0]); len(items) != 1 || items[0].ID != ids[0] {
		t.Fatalf("after the second replica stopped, the first lists %+v, want only itself", items)
	}
}

// TestASurvivorEndsTheTurnsOfAKilledReplica kills (SIGKILL) a replica in the middle of streaming
// an answer, with another replica alive on the same database: once the killed one's lease runs
// out the survivor marks its turn interrupted, so the log ends in a final status without waiting
// for a restart of the killed one.
func TestASurvivorEndsTheTurnsOfAKilledReplica(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	dsn := storetest.PostgresDatabaseDSN(t)
	e := newEnv(t)
	survivorCfg := replicaTOML(dsn, e).set("admin", "enabled", true, "web_chat", true, "listen", freeAddr(t)).parse(t)
	startReplica(t, survivorCfg)

	cfgPath := telegramReplica(t, dsn, e, polling...).write(t)
	hold := make(chan struct{})
	defer close(hold)
	e.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Half an"}, {Content: " answer", Wait: hold}}})
	_, kill := startChildServe(t, cfgPath)
	defer kill()
	e.say(5001, "question")
	e.waitBotText(5001, "the killed replica's first words", contains("Half an"))

	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	status := func() string {
		var s string
		if err := db.QueryRow(`SELECT status FROM turns ORDER BY id DESC LIMIT 1`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := status(); got != "running" {
		t.Fatalf("the turn is %q while the replica runs it, want running", got)
	}
	kill()
	wait.For(t, "the survivor to end the killed replica's turn", func() bool { return status() == "interrupted" })
}

// TestAMessageAKilledReplicaWasAnsweringIsAnsweredByASurvivor sends a webhook update to a replica
// (a child process) and kills it (SIGKILL) in the middle of streaming the answer: a surviving
// replica takes the unanswered update over from the shared ledger and answers it, once. Before,
// the update was the dead replica's alone (Telegram had its 200) and the user got half an answer.
func TestAMessageAKilledReplicaWasAnsweringIsAnsweredByASurvivor(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	dsn := storetest.PostgresDatabaseDSN(t)
	e := newEnv(t)
	addrs := []string{freeAddr(t), freeAddr(t)} // the child, the survivor
	var target atomic.Int64
	proxy := switchProxy(t, func() string { return addrs[target.Load()] })
	webhook := func(addr string) *tomlConfig {
		return telegramReplica(t, dsn, e, webhookAt(addr, proxy.URL+"/hook")...)
	}

	hold := make(chan struct{})
	defer close(hold)
	e.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Half an"}, {Content: " answer", Wait: hold}}})
	cfgPath := webhook(addrs[0]).write(t)
	childOut, kill := startChildServe(t, cfgPath)
	defer kill()
	wait.For(t, "the child replica to run", func() bool { return strings.Contains(childOut.String(), "bot running") })
	cfg := webhook(addrs[1]).parse(t)
	survivor := startReplica(t, cfg)

	const chat = 6001
	e.say(chat, "question")
	e.waitBotText(chat, "the child's first words", contains("Half an"))
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	wait.For(t, "the child to record the message its reply streams into", func() bool {
		var n int
		return db.QueryRow(`SELECT COUNT(*) FROM reply_messages WHERE text = 'Half an'`).Scan(&n) == nil && n == 1
	})
	e.llm.Push(llm.Text("The whole answer."))
	target.Store(1)
	kill()
	e.waitBotText(chat, "the survivor's answer", contains("The whole answer."))
	e.waitBotText(chat, "the cut reply marked interrupted", contains("Half an\n\n— interrupted"))
	if err := survivor.stop(); err != nil {
		t.Fatal(err)
	}
	got := e.botTexts(chat)
	if want := []string{"Half an\n\n— interrupted", "The whole answer."}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("bot messages %q, want %q: the cut reply marked interrupted, then the message answered once more", got, want)
	}
}

// TestThreeReplicasShareTwoDiscordShardsAndASurvivorTakesOverAKilledOnes runs three replicas
// with Discord on one PostgreSQL database, the testkit Discord recommending two shards
// (discord.shards = "auto"). The first replica (a child process) starts alone and connects both
// shards; as the others join it gives shard 1 up to one of them, so each shard is connected by
// exactly one replica. Every guild message (on both shards) and every direct message is
// answered once. The first replica is killed (SIGKILL) in the middle of an answer in a guild of
// shard 0: a survivor identifies shard 0 within the wait's 30 s, answers the cut message once
// more, and answers new messages in shard 0's guilds once. Before, every replica connected the
// whole gateway and a message whose replica died was never answered.
func TestThreeReplicasShareTwoDiscordShardsAndASurvivorTakesOverAKilledOnes(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	dsn := storetest.PostgresDatabaseDSN(t)
	e := newEnv(t)
	dc := dtk.New(dtk.Config{Shards: 2, MaxConcurrency: 2})
	t.Cleanup(dc.Close)
	c := replicaTOML(dsn, e).
		set("discord", "enabled", true, "token", dc.Token(), "api_base", dc.APIBase(), "register_commands", false, "shards", "auto").
		set("admin", "enabled", false)

	hold := make(chan struct{})
	defer close(hold)
	var killed atomic.Bool
	e.llm.SetHandler(func(r llm.Request) llm.Reply {
		switch {
		case !strings.Contains(string(r.Body), "slow question"):
			return llm.Text("Answered.")
		case killed.Load():
			return llm.Text("The whole answer.")
		}
		return llm.Reply{Chunks: []llm.Chunk{{Content: "Half an"}, {Content: " answer", Wait: hold}}}
	})

	cfgPath := c.write(t)
	childOut, kill := startChildServe(t, cfgPath)
	defer kill()
	oneEach := func() bool { l := dc.LiveShards(); return l[0] == 1 && l[1] == 1 }
	wait.For(t, "the first replica to connect both shards", func() bool {
		return oneEach() && strings.Count(childOut.String(), "discord: shard connected") == 2
	})
	var reps []*replica
	for range 2 {
		reps = append(reps, startReplica(t, c.parse(t)))
	}
	holds := func(r *replica, shard int) bool {
		return strings.Contains(r.logs.String(), fmt.Sprintf(`msg="discord: this replica holds the shard" shard=%d`, shard))
	}
	wait.For(t, "a joining replica to take shard 1 over, each shard connected once", func() bool {
		return (holds(reps[0], 1) || holds(reps[1], 1)) && oneEach()
	})

	// Guild channels on both shards and direct messages, each asked once.
	var channels []string
	post := func(ch, guild, content string) {
		t.Helper()
		um := dtk.UserMessage{ChannelID: ch, GuildID: guild, AuthorID: "600", Content: content}
		if guild != "" {
			um.Content, um.MentionBot = "<@"+dc.BotID()+"> "+content, true
		}
		if _, err := dc.Post(um); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		for shard := range 2 {
			ch := fmt.Sprintf("51000000000000%d%02d", shard, i)
			post(ch, dtk.GuildOnShard(shard, 2, i), "question")
			channels = append(channels, ch)
		}
		ch := fmt.Sprintf("5200000000000000%02d", i)
		post(ch, "", "question")
		channels = append(channels, ch)
	}
	for _, ch := range channels {
		wait.For(t, "the answer in "+ch, func() bool { return len(dc.BotMessages(ch)) > 0 })
	}

	// The first replica holds shard 0: it takes the next message there and is killed mid-answer.
	if holds(reps[0], 0) || holds(reps[1], 0) {
		t.Fatal("a joining replica took shard 0, which the first replica should have kept")
	}
	const cut = "530000000000000001"
	guild0 := dtk.GuildOnShard(0, 2, 7)
	post(cut, guild0, "slow question")
	wait.For(t, "the first replica's first words", func() bool {
		m := dc.BotMessages(cut)
		return len(m) == 1 && strings.Contains(m[0].Content, "Half an")
	})
	before := dc.ShardIdentifies(0)
	killed.Store(true)
	kill()
	wait.For(t, "a survivor to identify shard 0", func() bool { return dc.ShardIdentifies(0) > before && oneEach() })
	wait.For(t, "the cut message answered again", func() bool {
		m := dc.BotMessages(cut)
		return len(m) == 2 && strings.Contains(m[1].Content, "The whole answer.")
	})
	const after = "530000000000000002"
	post(after, guild0, "question")
	channels = append(channels, after)
	wait.For(t, "the answer in shard 0's guild after the takeover", func() bool { return len(dc.BotMessages(after)) > 0 })
	if l := dc.LiveShards(); l[0] != 1 || l[1] != 1 {
		t.Errorf("live sessions by shard %v, want each shard connected by exactly one replica", l)
	}

	for _, r := range reps {
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
	for _, ch := range channels {
		if got := dc.BotMessages(ch); len(got) != 1 {
			t.Errorf("channel %s got %d bot messages, want its message answered once", ch, len(got))
		}
	}
	if m := dc.BotMessages(cut); len(m) != 2 || m[0].ReferenceID == "" || m[1].ReferenceID != m[0].ReferenceID {
		t.Errorf("the cut message's channel shows %+v, want the cut reply and one new answer to the same message", m)
	}
}
