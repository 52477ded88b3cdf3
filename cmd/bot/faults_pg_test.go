package main

import (
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	osuser "os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"relaybot/internal/testkit/llm"
	tgkit "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
)

// pgServer is a PostgreSQL server of the test's own, in a temporary folder, that the test stops
// and starts again (as .ci/run starts one: initdb, pg_ctl; as the postgres user when run as root).
type pgServer struct {
	bin, data string
	port      int
	asUser    string // run the binaries as this user ("" for the current one)
}

// startPostgres initialises and starts a server, or skips the test saying why it cannot.
func startPostgres(t *testing.T) *pgServer {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(bins) == 0 {
		t.Skip("no PostgreSQL binaries under /usr/lib/postgresql/*/bin: the fault tests start and stop a server of their own")
	}
	slices.Sort(bins)
	s := &pgServer{bin: filepath.Dir(bins[len(bins)-1])}
	if os.Geteuid() == 0 {
		if _, err := osuser.Lookup("postgres"); err != nil {
			t.Skip("running as root without a postgres user: initdb refuses to run as root")
		}
		s.asUser = "postgres"
	}
	data, err := os.MkdirTemp("", "relaybot-faults-pg.")
	if err != nil {
		t.Fatal(err)
	}
	s.data = data
	t.Cleanup(func() {
		_ = s.run("pg_ctl", "-D", s.data, "-m", "immediate", "-w", "stop")
		os.RemoveAll(s.data)
	})
	if s.asUser != "" {
		u, _ := osuser.Lookup(s.asUser)
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(s.data, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if err := s.run("initdb", "-D", s.data, "-A", "trust", "-U", "postgres"); err != nil {
		t.Fatalf("initdb: %v", err)
	}
	s.start(t)
	db, err := sql.Open("pgx", s.dsn("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE bot"); err != nil {
		t.Fatal(err)
	}
	return s
}

// run runs one of the server's binaries.
func (s *pgServer) run(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	if s.asUser != "" {
		line := filepath.Join(s.bin, name)
		for _, a := range args {
			line += " '" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		cmd = exec.Command("su", s.asUser, "-s", "/bin/sh", "-c", line)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, out)
	}
	return nil
}

func (s *pgServer) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// start starts the server and waits until it accepts connections.
func (s *pgServer) start(t *testing.T) {
	t.Helper()
	if err := s.run("pg_ctl", "-D", s.data, "-l", filepath.Join(s.data, "server.log"), "-w", "-o",
		fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", s.port, s.data), "start"); err != nil {
		t.Fatal(err)
	}
}

// stop stops the server, closing every client's connection (a managed database failing over).
func (s *pgServer) stop(t *testing.T) {
	t.Helper()
	if err := s.run("pg_ctl", "-D", s.data, "-m", "fast", "-w", "stop"); err != nil {
		t.Fatal(err)
	}
}

// faultScenario is one fault of TestFaultsAnswerEachMessageOnce.
type faultScenario struct {
	name     string
	replicas int
	webhook  bool
	// fault is applied once every turn is mid-way; heal ends it. reps are the replicas,
	// victim the one the fault's turns were sent to.
	fault, heal func(t *testing.T, pg *pgServer, reps []*childReplica, victim int)
}

// TestFaultsAnswerEachMessageOnce runs turns whose first round calls a side-effecting MCP tool
// (record, which counts its executions by the model's call id) and whose second round streams the
// answer, and breaks the deployment in the middle of them: (a) PostgreSQL stopped for 10 s under
// one replica, (b) the same under three replicas with turns on each, (c) the replica running the
// turns paused (SIGSTOP) for 10 s among three. Some turns are in the model's first round when the
// fault comes (their tool call starts during it), the others have run their tool and stream the
// answer; more messages arrive during the fault. Afterwards every message has exactly one answer
// (no second message), each model tool call ran at most once and each message's tool at most once
// (a survivor answering a message again goes on from the calls its cut turn finished), nothing is
// left running, the platform answered no request with 429, and every message has one finished
// turn, whole, in the history.
func TestFaultsAnswerEachMessageOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs bot serve processes against a PostgreSQL server it stops")
	}
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	stopPG := func(t *testing.T, pg *pgServer, _ []*childReplica, _ int) { pg.stop(t) }
	startPG := func(t *testing.T, pg *pgServer, _ []*childReplica, _ int) { pg.start(t) }
	scenarios := []faultScenario{
		{name: "a: postgres stopped under one replica", replicas: 1, fault: stopPG, heal: startPG},
		{name: "b: postgres stopped under three replicas", replicas: 3, webhook: true, fault: stopPG, heal: startPG},
		{name: "c: the replica running the turns paused", replicas: 3, webhook: true,
			fault: func(t *testing.T, _ *pgServer, reps []*childReplica, victim int) {
				if err := reps[victim].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
			},
			heal: func(t *testing.T, _ *pgServer, reps []*childReplica, victim int) {
				if err := reps[victim].cmd.Process.Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel() // each scenario has its own PostgreSQL server and fake world
			runFault(t, sc)
		})
	}
}

func runFault(t *testing.T, sc faultScenario) {
	pg := startPostgres(t)
	dsn := pg.dsn("bot")
	e := newEnv(t)
	e.kit.AddRecordTool()
	tg, err := tgkit.New(tgkit.Options{PaidPerSecond: budget})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Close)
	e.tg = tg
	p := &telegramPlatform{e: e, webhook: sc.webhook}
	if p.webhook {
		p.rr = newRoundRobin(t)
	}

	gate := make(chan struct{})   // holds the first round of the "early" messages
	finish := make(chan struct{}) // holds the end of every answer
	var closeOnce sync.Once
	release := func() { closeOnce.Do(func() { close(gate); close(finish) }) }
	defer release()
	var mu sync.Mutex
	asked := map[string]int{}  // first-round requests by message
	second := map[string]int{} // second-round requests by message
	e.llm.SetHandler(func(req llm.Request) llm.Reply {
		last := lastUserText(req)
		afterTool := len(req.Messages) > 0 && req.Messages[len(req.Messages)-1].Role == "tool"
		mu.Lock()
		defer mu.Unlock()
		if afterTool {
			second[last]++
			r := llm.Reply{Chunks: []llm.Chunk{{Content: "A:"}, {Content: last}}}
			if !strings.HasPrefix(last, "during") {
				r.Chunks[1].Wait = finish
			}
			return r
		}
		asked[last]++
		id := fmt.Sprintf("call_%s_%d", strings.ReplaceAll(last, " ", "_"), asked[last])
		r := llm.ToolCalls(llm.Call{ID: id, Name: "record", Args: []string{fmt.Sprintf(`{"key":%q}`, id)}})
		if strings.HasPrefix(last, "early") {
			r.Chunks = append([]llm.Chunk{{Content: "", Wait: gate}}, r.Chunks...)
		}
		return r
	})

	reps := startReplicas(t, sc.replicas, dsn, e, p)
	p.started(t, reps)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	defer func() {
		if !t.Failed() {
			return
		}
		for _, q := range []string{`SELECT id, status, conversation_id, instance_id FROM turns`, `SELECT seq, conv_key, state, instance_id FROM turn_queue`} {
			rows, err := db.Query(q)
			if err != nil {
				t.Logf("%s: %v", q, err)
				continue
			}
			cols, _ := rows.Columns()
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				_ = rows.Scan(ptrs...)
				t.Logf("%s: %v", q, vals)
			}
			rows.Close()
		}
	}()

	const earlyChat, lateChat, duringChat = 51_000, 52_000, 53_000
	const perKind = 3
	victim := p.victim(t, reps)
	if sc.webhook && sc.name[0] == 'c' {
		p.pin(victim) // the paused replica runs every turn of the fault
	}
	want := map[int64]string{}
	for k := range int64(perKind) {
		for _, m := range []struct {
			chat int64
			text string
		}{{earlyChat + k, fmt.Sprintf("early %d", k)}, {lateChat + k, fmt.Sprintf("late %d", k)}} {
			p.say(m.chat, m.text)
			want[m.chat] = "A:" + m.text
		}
	}
	wait.Until(t, "every turn in the middle: early ones in their first round, late ones streaming the answer", func() error {
		mu.Lock()
		defer mu.Unlock()
		for k := range perKind {
			if asked[fmt.Sprintf("early %d", k)] == 0 || second[fmt.Sprintf("late %d", k)] == 0 {
				return fmt.Errorf("first rounds %v, second rounds %v; the early chats' answers %q", asked, second, p.answers(earlyChat))
			}
		}
		return nil
	})
	p.pin(-1)
	faulted := time.Now()
	sc.fault(t, pg, reps, victim)
	release() // the early turns' tool calls and the late answers now come during the fault
	for k := range int64(perKind) {
		text := fmt.Sprintf("during %d", k)
		p.say(duringChat+k, text)
		want[duringChat+k] = "A:" + text
	}
	if d := 10*time.Second - time.Since(faulted); d > 0 {
		time.Sleep(d) // the fault's length: what the test is about, not a wait for an outcome
	}
	sc.heal(t, pg, reps, victim)

	wait.Until(t, "every message answered", func() error {
		for chat := range want {
			if got := p.answers(chat); len(got) == 0 {
				return fmt.Errorf("chat %d has no answer", chat)
			}
		}
		return nil
	})
	// Every write of the message path landed, none dropped during the fault: no turn, tool call or
	// model call left running, every message's ledger row done, no reply left in flight.
	running := func() (string, error) {
		var turns, calls, models, ledger, replies int
		err := db.QueryRow(`SELECT (SELECT count(*) FROM turns WHERE status = 'running'),
			(SELECT count(*) FROM tool_calls WHERE status = 'running'),
			(SELECT count(*) FROM llm_calls WHERE status = 'running'),
			(SELECT count(*) FROM inbound_ledger WHERE NOT done),
			(SELECT count(*) FROM reply_messages)`).Scan(&turns, &calls, &models, &ledger, &replies)
		if err != nil || turns+calls+models+ledger+replies == 0 {
			return "", err
		}
		return fmt.Sprintf("%d turns, %d tool calls and %d model calls running, %d messages not done in the ledger, %d replies in flight",
			turns, calls, models, ledger, replies), nil
	}
	wait.Until(t, "nothing left running", func() error {
		left, err := running()
		if err == nil && left != "" {
			err = errors.New(left)
		}
		return err
	})
	for _, r := range reps {
		r.term(t)
	}

	var wrong []string
	for chat, w := range want {
		if got := p.answers(chat); !slices.Equal(got, []string{w}) {
			wrong = append(wrong, fmt.Sprintf("chat %d: answers %q, want %q once", chat, got, w))
		}
	}
	reportSome(t, "chats not answered exactly once", wrong)
	var twice, never []string
	ran := map[string]int{} // executions by message
	for key, n := range e.kit.Records() {
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s ran %d times", key, n))
		}
		msg := strings.TrimPrefix(key[:strings.LastIndex(key, "_")], "call_")
		ran[strings.ReplaceAll(msg, "_", " ")] += n
	}
	reportSome(t, "model tool calls executed more than once", twice)
	var again []string
	for _, w := range want {
		switch text := strings.TrimPrefix(w, "A:"); {
		case ran[text] == 0:
			never = append(never, text)
		case ran[text] > 1:
			again = append(again, fmt.Sprintf("%q: its side effect happened %d times", text, ran[text]))
		}
	}
	reportSome(t, "messages whose tool call never ran (its answer was given without it)", never)
	reportSome(t, "messages whose tool ran more than once (a survivor's new model call ran again a call that had finished)", again)
	if limited := p.rateLimited(); len(limited) != 0 {
		t.Errorf("the platform answered %d requests with 429, want none; the first:\n%s", len(limited), strings.Join(limited[:min(5, len(limited))], "\n"))
	}
	rows, err := db.Query(`SELECT u.content, t.status,
		(SELECT role FROM messages WHERE turn_id = t.id ORDER BY seq DESC LIMIT 1)
		FROM turns t JOIN messages u ON u.turn_id = t.id AND u.role = 'user'`)
	if err != nil {
		t.Fatal(err)
	}
	ok := map[string]int{}
	turnsOf := map[string][]string{}
	for rows.Next() {
		var text, status string
		var lastRole sql.NullString
		if err := rows.Scan(&text, &status, &lastRole); err != nil {
			t.Fatal(err)
		}
		turnsOf[text] = append(turnsOf[text], status)
		if status == "ok" {
			ok[text]++
			if lastRole.String != "assistant" {
				t.Errorf("the turn of %q ends with a %q message, want the answer", text, lastRole.String)
			}
		}
	}
	rows.Close()
	var lost []string
	for _, w := range want {
		text := strings.TrimPrefix(w, "A:")
		if ok[text] != 1 {
			lost = append(lost, fmt.Sprintf("%q: %d finished turns (its turns: %q)", text, ok[text], turnsOf[text]))
		}
	}
	reportSome(t, "messages without exactly one finished turn in the history", lost)
	took := 0
	for _, r := range reps {
		if r.logged("took over the work of replicas whose lease stayed expired") {
			took++
		}
	}
	t.Logf("%s: %d replicas took work over; tool executions %v", sc.name, took, e.kit.Records())
}
