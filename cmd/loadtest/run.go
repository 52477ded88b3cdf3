package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"relaybot/internal/testkit/llm"
	testmcp "relaybot/internal/testkit/mcp"
	tgkit "relaybot/internal/testkit/telegram"
)

// botStopGrace is how long the bot may take to stop after SIGTERM (its shutdown grace is 30 s).
const botStopGrace = 60 * time.Second

// Run runs one load as o says and returns its report. The report is returned with the error when
// the run got far enough to measure something (a missing row, a bot that did not stop cleanly).
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	dir := o.WorkDir
	if dir == "" {
		d, err := os.MkdirTemp("", "relaybot-loadtest-")
		if err != nil {
			return nil, fmt.Errorf("making a work folder: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("making the work folder: %w", err)
	}
	bin := o.Bot
	if bin == "" {
		o.Log.Info("building the bot")
		b, err := buildBot(ctx, o.Src, dir)
		if err != nil {
			return nil, err
		}
		bin = b
	}

	rec := newRecorder(o.Chats, strings.Repeat(o.Token, o.Tokens))

	// The fake model.
	model := llm.NewServer()
	defer model.Close()
	toolName, toolArgs := "current_time", `{}`
	if o.ToolLatency > 0 {
		toolName, toolArgs = "sleep", fmt.Sprintf(`{"seconds":%g}`, o.ToolLatency.Seconds())
	}
	gen := llm.Generator(llm.Generate{Tokens: o.Tokens, Token: o.Token, Rate: o.Rate, ToolShare: o.ToolShare,
		ToolName: toolName, ToolArgs: toolArgs})
	plain := llm.Generator(llm.Generate{Tokens: o.Tokens, Token: o.Token, Rate: o.Rate})
	model.SetHandler(rec.handler(gen, plain))
	model.OnStreamed(rec.onStreamed)

	// The fake Telegram, with Telegram's limits.
	tgOpts := tgkit.Options{OnCall: rec.onCall, GlobalPerSecond: o.GlobalPerSecond}
	if o.GlobalPerSecond > 30 {
		tgOpts.GlobalPerSecond, tgOpts.PaidPerSecond = 30, o.GlobalPerSecond
	}
	tg, err := tgkit.New(tgOpts)
	if err != nil {
		return nil, err
	}
	defer tg.Close()

	// The MCP server of the slow tool.
	mcpURL := ""
	if o.ToolLatency > 0 {
		url, stop, err := startMCP()
		if err != nil {
			return nil, err
		}
		defer stop()
		mcpURL = url
	}

	cfgPath := filepath.Join(dir, "config.toml")
	dbPath := filepath.Join(dir, "bot.db")
	for _, f := range []string{dbPath, dbPath + "-wal", dbPath + "-shm", filepath.Join(dir, "telegram.offset")} {
		// A database of an earlier run in a kept folder would spoil the counts.
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("removing the database of an earlier run: %w", err)
		}
	}
	driver, dsn := "sqlite", dbPath
	if o.DB == "postgres" {
		pgDSN, drop, err := freshSchema(ctx, o.PostgresDSN)
		if err != nil {
			return nil, err
		}
		defer drop()
		driver, dsn = "postgres", pgDSN
	}
	admin, err := newAdminEndpoint()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfgPath, []byte(botConfig(o, driver, dsn, filepath.Join(dir, "telegram.offset"), model.URL, tg, mcpURL, admin)), 0o600); err != nil {
		return nil, fmt.Errorf("writing the bot config: %w", err)
	}
	logPath := filepath.Join(dir, "bot.log")
	o.Log.Info("starting the bot", "bin", bin, "config", cfgPath, "log", logPath)
	bot, err := startBot(ctx, bin, cfgPath, logPath, admin)
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = bot.stop(botStopGrace)
		}
	}()

	rep := &Report{
		Chats: o.Chats, TurnsPerChat: o.Turns, ThinkMS: o.Think.Milliseconds(), Rate: o.Rate, Tokens: o.Tokens, ToolShare: o.ToolShare,
		ToolLatencyMS: o.ToolLatency.Milliseconds(), Tool: toolName, LoadAvgStart: loadAvg(),
		GlobalPerSecond: o.GlobalPerSecond, Database: driver,
		GoroutinesIdle: -1, GoroutinesAfter: -1,
	}
	if o.Turns == 0 {
		rep.Duration = o.Duration.String()
	}
	if n, err := bot.goroutines(ctx); err == nil {
		rep.GoroutinesIdle = n
	}
	idleRSS, _, _ := procMem(bot.pid())
	rep.IdleRSSMB = mb(idleRSS)
	if anon, err := procAnon(bot.pid()); err == nil {
		rep.IdleAnonMB = mb(anon)
	}

	var profWG sync.WaitGroup
	loadDone := make(chan struct{})
	if o.ProfileDir != "" && bot.profiles {
		if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
			return nil, fmt.Errorf("making the profile folder: %w", err)
		}
		profWG.Add(1)
		go func() {
			defer profWG.Done()
			rep.Profiles = append(rep.Profiles, profileCPU(ctx, bot, o.ProfileDir, loadDone, o.Log)...)
		}()
	}

	// The load.
	cpu0, err := procCPU(bot.pid())
	if err != nil {
		return nil, err
	}
	busy0, total0 := machineCPU()
	self0 := selfCPU()
	start := time.Now()
	// A bot that dies ends the load at once instead of every chat waiting out its turn timeout.
	driveCtx, stopDrive := context.WithCancel(ctx)
	go func() {
		select {
		case <-bot.exited:
			stopDrive()
		case <-driveCtx.Done():
		}
	}()
	anonPeak := make(chan int64, 1)
	go func() { anonPeak <- peakAnon(bot.pid(), loadDone) }()
	d := newDriver(o, rec, tg, bot)
	results := d.run(driveCtx, start)
	stopDrive()
	loadWall := time.Since(start)
	close(loadDone)
	rep.PeakAnonMB = mb(<-anonPeak)
	cpu1, err := procCPU(bot.pid())
	if err != nil {
		select {
		case <-bot.exited:
			return nil, fmt.Errorf("the bot exited during the load (%v); see %s", bot.err, logPath)
		default:
		}
		return nil, err
	}
	busy1, total1 := machineCPU()
	self1 := selfCPU()
	_, hwm, _ := procMem(bot.pid())
	profWG.Wait()
	rep.LoadAvgEnd = loadAvg()
	if t := total1 - total0; t > 0 {
		rep.MachineBusyPct = 100 * float64(busy1-busy0) / float64(t)
		rep.OthersCPUPct = max(0, 100*float64(busy1-busy0-(cpu1-cpu0)-(self1-self0))/float64(t))
	}
	rep.LoadToolCPUSeconds = (self1 - self0).Seconds()

	if o.ProfileDir != "" && bot.profiles {
		file := filepath.Join(o.ProfileDir, "heap.pprof")
		if err := bot.save(ctx, "/debug/pprof/heap", file); err != nil {
			o.Log.Warn("bot heap profile", "err", err)
		} else {
			rep.Profiles = append(rep.Profiles, file)
		}
	}
	rep.GoroutinesAfter = settleGoroutines(ctx, bot, rep.GoroutinesIdle)
	if bot.profiles {
		if dump, err := bot.get(ctx, "/debug/pprof/goroutine?debug=1"); err == nil {
			rep.GoroutinesKeepAlive = keepAliveGoroutines(dump)
			if o.ProfileDir != "" {
				file := filepath.Join(o.ProfileDir, "goroutines.txt")
				if err := os.WriteFile(file, dump, 0o644); err == nil {
					rep.Profiles = append(rep.Profiles, file)
				}
			}
		}
	}

	stopped = true
	var runErr error
	if err := bot.stop(botStopGrace); err != nil {
		runErr = fmt.Errorf("bot serve: %w (log: %s)", err, logPath)
	}

	rep.fill(rec, results, loadWall, cpu1-cpu0, hwm, idleRSS, d.peakInFlight.Load())
	if err := rep.countDB(ctx, driver, dsn, int64(len(results)), rec.toolReplies.Load()); err != nil {
		runErr = errors.Join(runErr, err)
	}
	if o.Baseline {
		if err := rep.baseline(ctx, o, model.URL); err != nil {
			runErr = errors.Join(runErr, err)
		}
	}
	return rep, errors.Join(runErr, rep.check())
}

// profileCPU saves the bot's CPU profile in slices of 5 s (cpu-01.pprof, ...) until done is
// closed, at most 12 of them; `go tool pprof` merges the files given together.
func profileCPU(ctx context.Context, bot *botProcess, dir string, done <-chan struct{}, log *slog.Logger) []string {
	var files []string
	for i := 1; i <= 12; i++ {
		select {
		case <-done:
			return files
		default:
		}
		file := filepath.Join(dir, fmt.Sprintf("cpu-%02d.pprof", i))
		if err := bot.save(ctx, "/debug/pprof/profile?seconds=5", file); err != nil {
			log.Warn("bot cpu profile", "err", err)
			return files
		}
		files = append(files, file)
	}
	return files
}

// settleGoroutines waits up to 10 s for the bot's goroutines to drop back to idle (idle
// keep-alive connections close, timers fire) and returns the last count.
func settleGoroutines(ctx context.Context, bot *botProcess, idle int) int {
	deadline := time.Now().Add(10 * time.Second)
	last, stable := -1, 0
	for {
		n, err := bot.goroutines(ctx)
		if err != nil {
			return last
		}
		if n == last {
			stable++
		} else {
			stable = 0
		}
		last = n
		if (idle >= 0 && n <= idle) || stable >= 4 || time.Now().After(deadline) {
			return n
		}
		t := time.NewTimer(500 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return n
		case <-t.C:
		}
	}
}

// startMCP serves the testkit's MCP tools (sleep among them) over streamable HTTP on loopback.
func startMCP() (url string, stop func(), err error) {
	kit := testmcp.New("load")
	h := server.NewStreamableHTTPServer(kit.Server)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("MCP server: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return "http://" + ln.Addr().String() + "/mcp", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.Shutdown(ctx)
		_ = srv.Close()
		<-done
	}, nil
}

// botConfig is the bot's config.toml for the run. The admin listener serves the load tool only
// (goroutines from /metrics, profiles from /debug/pprof/): no web chat.
func botConfig(o Options, driver, dsn, offsetFile, modelURL string, tg *tgkit.Server, mcpURL string, admin adminEndpoint) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# Written by cmd/loadtest.
[storage]
driver = %q
dsn = %q
retention_days = 0

[[models]]
name = "load"
base_url = %q
api_key = "load-test"
model = "load-model"
supports_tools = true
timeout_sec = 600

[agent]
system_prompt = "You are a load test bot."

[chat]
max_turns_in_flight = %d
rate_limit_per_minute = 0
turn_timeout_sec = 900
shutdown_grace_sec = 30

[tools]
plugins = []
native = ["current_time"]

[telegram]
enabled = true
token = %q
api_endpoint = %q
stream = true
global_per_second = %d
paid_broadcast = %t
offset_file = %q

[admin]
enabled = true
listen = %q
token = %q
web_chat = false

[log]
level = "info"
`, driver, dsn, modelURL, max(64, o.Chats), tg.Token(), tg.Endpoint(), o.GlobalPerSecond, o.GlobalPerSecond > 30, offsetFile, admin.addr, admin.token)
	if mcpURL != "" {
		fmt.Fprintf(&b, `
[[mcp.servers]]
name = "load"
transport = "http"
url = %q
tool_call_timeout_sec = 300
`, mcpURL)
	}
	return b.String()
}

// driver runs the chats.
type driver struct {
	o   Options
	rec *recorder
	tg  *tgkit.Server
	bot *botProcess

	sent, done, timedOut   atomic.Int64
	inFlight, peakInFlight atomic.Int64

	mu      sync.Mutex
	results []turnResult
}

func newDriver(o Options, rec *recorder, tg *tgkit.Server, bot *botProcess) *driver {
	return &driver{o: o, rec: rec, tg: tg, bot: bot}
}

// run drives every chat until its turns are done (or the duration ended and its last answer
// came), printing progress, and returns the turns' results.
func (d *driver) run(ctx context.Context, start time.Time) []turnResult {
	stopAt := start.Add(d.o.Duration)
	var wg sync.WaitGroup
	for _, c := range d.rec.chats {
		wg.Add(1)
		offset := time.Duration(0)
		if d.o.Chats > 1 {
			offset = d.o.Ramp * time.Duration(c.idx) / time.Duration(d.o.Chats)
		}
		go func() {
			defer wg.Done()
			d.chat(ctx, c, start.Add(offset), stopAt)
		}()
	}
	all := make(chan struct{})
	go func() {
		wg.Wait()
		close(all)
	}()
	d.progress(ctx, start, all)
	return d.results
}

// chat drives one chat: a message, the wait for its whole answer, the next message.
func (d *driver) chat(ctx context.Context, c *chatRun, at, stopAt time.Time) {
	if wait := time.Until(at); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	for turn := 0; ; turn++ {
		if turn > 0 && d.o.Think > 0 {
			t := time.NewTimer(d.o.Think)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if d.o.Turns > 0 && turn >= d.o.Turns || d.o.Turns == 0 && !time.Now().Before(stopAt) || ctx.Err() != nil {
			return
		}
		now := time.Now()
		done := c.begin(turn, now)
		d.tg.Send(tgkit.Inbound{
			Chat: tgkit.Chat{ID: c.id, Type: "private"},
			From: tgkit.User{ID: c.id, FirstName: "Load", Username: fmt.Sprintf("load%d", c.idx)},
			Text: userText(c.idx, turn),
		})
		d.sent.Add(1)
		n := d.inFlight.Add(1)
		for {
			p := d.peakInFlight.Load()
			if n <= p || d.peakInFlight.CompareAndSwap(p, n) {
				break
			}
		}
		t := time.NewTimer(d.o.TurnTimeout)
		timedOut := false
		select {
		case <-done:
		case <-t.C:
			timedOut = true
		case <-ctx.Done():
			timedOut = true
		}
		t.Stop()
		res := c.end(timedOut)
		d.inFlight.Add(-1)
		if timedOut {
			d.timedOut.Add(1)
		} else {
			d.done.Add(1)
		}
		d.mu.Lock()
		d.results = append(d.results, res)
		d.mu.Unlock()
		if timedOut {
			return
		}
	}
}

// progress prints a line a second to o.Progress until all is closed.
func (d *driver) progress(ctx context.Context, start time.Time, all <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastDone := int64(0)
	lastCPU, _ := procCPU(d.bot.pid())
	for {
		select {
		case <-all:
			return
		case <-ctx.Done():
			<-all // every chat returns once ctx ended
			return
		case <-tick.C:
		}
		if d.o.Progress == nil {
			continue
		}
		done := d.done.Load()
		cpu, _ := procCPU(d.bot.pid())
		rss, _, _ := procMem(d.bot.pid())
		fmt.Fprintf(d.o.Progress, "%5.0fs  sent %d  done %d  in flight %d  timed out %d  turns/s %d  429s %d  bot cpu %3.0f%%  rss %.1f MB\n",
			time.Since(start).Seconds(), d.sent.Load(), done, d.inFlight.Load(), d.timedOut.Load(), done-lastDone,
			d.rec.http429.Load(), 100*(cpu-lastCPU).Seconds(), mb(rss))
		lastDone, lastCPU = done, cpu
	}
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// sortedTimes returns ts sorted (the fakes' hooks append them from concurrent requests).
func sortedTimes(ts []time.Time) []time.Time {
	out := slices.Clone(ts)
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// freshSchema makes an empty schema for the run in the PostgreSQL database at base, so earlier
// runs' rows do not spoil the counts, and returns a DSN whose search_path is it and a function
// that drops it.
func freshSchema(ctx context.Context, base string) (string, func(), error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("postgres-dsn is not a URL: %w", err)
	}
	db, err := sql.Open("pgx", base)
	if err != nil {
		return "", nil, fmt.Errorf("opening PostgreSQL: %w", err)
	}
	schema := fmt.Sprintf("loadtest_%d", time.Now().UnixNano())
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		db.Close()
		return "", nil, fmt.Errorf("creating schema %s: %w", schema, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = db.ExecContext(dctx, "DROP SCHEMA "+schema+" CASCADE")
		db.Close()
	}, nil
}
