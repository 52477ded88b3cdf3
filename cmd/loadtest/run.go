package main

import (
	"context"
	"crypto/rand"
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
	"relaybot/internal/testkit/otlp"
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
	r := &run{o: o}
	defer r.close()
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	if err := r.startBots(ctx); err != nil {
		return nil, err
	}
	rep := r.newReport()
	r.measureIdle(ctx, rep)
	l, err := r.load(ctx, rep)
	if err != nil {
		return nil, err
	}
	r.afterLoad(ctx, rep)
	runErr := r.stopBots()
	rep.fill(r.rec, l.results, l.wall, l.cpu, l.hwm, l.idleRSS, l.peakInFlight)
	if r.traces != nil {
		rep.OTelSpans = r.traces.Count()
	}
	rep.countAnswers(r.rec, r.tg, l.results)
	if err := rep.countDB(ctx, r.driver, r.dsn, int64(len(l.results)), r.rec.toolReplies.Load()); err != nil {
		runErr = errors.Join(runErr, err)
	}
	if o.Baseline {
		if err := rep.baseline(ctx, o, r.model.URL); err != nil {
			runErr = errors.Join(runErr, err)
		}
	}
	return rep, errors.Join(runErr, rep.check())
}

// run is one load run: the fakes, the database and the bots, and what closes them.
type run struct {
	o        Options
	dir      string // the work folder
	bin      string // the bot binary
	toolName string
	rec      *recorder
	model    *llm.Server
	tg       *tgkit.Server
	mcpURL   string         // the slow tool's MCP server, when -tool-latency is set
	traces   *otlp.Receiver // the collector of the bots' traces, with -otel
	driver   string
	dsn      string
	pg       *pgSchema     // the run's PostgreSQL schema, with -db postgres
	proxy    *webhookProxy // the round-robin webhook proxy, in webhook mode
	names    []string      // each replica's config, log and offset file are named after it
	bots     []*botProcess
	cold     bool // the bot binary was dropped from the page cache before the bots started
	stopped  bool
	closers  []func() // run in reverse by close
}

// close stops what setup and startBots started, the last first.
func (r *run) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// setup makes the work folder, builds the bot unless given, and starts the fakes, the slow
// tool's MCP server, the trace collector, the database and the webhook proxy the run needs.
func (r *run) setup(ctx context.Context) error {
	o := r.o
	r.dir = o.WorkDir
	if r.dir == "" {
		d, err := os.MkdirTemp("", "relaybot-loadtest-")
		if err != nil {
			return fmt.Errorf("making a work folder: %w", err)
		}
		r.closers = append(r.closers, func() { os.RemoveAll(d) })
		r.dir = d
	} else if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return fmt.Errorf("making the work folder: %w", err)
	}
	r.bin = o.Bot
	if r.bin == "" {
		o.Log.Info("building the bot")
		b, err := buildBot(ctx, o.Src, r.dir)
		if err != nil {
			return err
		}
		r.bin = b
	}
	if err := dropFromPageCache(r.bin); err != nil {
		o.Log.Warn("the bot's idle memory depends on how its binary sits in the page cache", "err", err)
	} else {
		r.cold = true
	}
	if err := r.startFakes(); err != nil {
		return err
	}
	return r.prepareStorage(ctx)
}

// startFakes starts the fake model, the fake Telegram (with Telegram's limits), the MCP server
// of the slow tool and the collector of the bots' traces.
func (r *run) startFakes() error {
	o := r.o
	r.rec = newRecorder(o.Chats, strings.Repeat(o.Token, o.Tokens), o.surfaceOf)
	r.model = llm.NewServer()
	r.closers = append(r.closers, r.model.Close)
	toolName, toolArgs := "current_time", `{}`
	if o.ToolLatency > 0 {
		toolName, toolArgs = "sleep", fmt.Sprintf(`{"seconds":%g}`, o.ToolLatency.Seconds())
	}
	r.toolName = toolName
	gen := llm.Generator(llm.Generate{Tokens: o.Tokens, Token: o.Token, Rate: o.Rate, ToolShare: o.ToolShare,
		ToolName: toolName, ToolArgs: toolArgs})
	plain := llm.Generator(llm.Generate{Tokens: o.Tokens, Token: o.Token, Rate: o.Rate})
	r.model.SetHandler(r.rec.handler(gen, plain))
	r.model.OnStreamed(r.rec.onStreamed)

	tgOpts := tgkit.Options{OnCall: r.rec.onCall, GlobalPerSecond: o.GlobalPerSecond}
	if o.GlobalPerSecond > 30 {
		tgOpts.GlobalPerSecond, tgOpts.PaidPerSecond = 30, o.GlobalPerSecond
	}
	tg, err := tgkit.New(tgOpts)
	if err != nil {
		return err
	}
	r.tg = tg
	r.closers = append(r.closers, tg.Close)
	if o.ToolLatency > 0 {
		url, stop, err := startMCP()
		if err != nil {
			return err
		}
		r.closers = append(r.closers, stop)
		r.mcpURL = url
	}
	if o.OTel {
		r.traces = otlp.New()
		r.traces.CountOnly()
		r.closers = append(r.closers, r.traces.Close)
	}
	return nil
}

// prepareStorage removes an earlier run's database and offsets from a kept work folder (they
// would spoil the counts), makes the PostgreSQL schema with -db postgres, and starts the webhook
// proxy in webhook mode.
func (r *run) prepareStorage(ctx context.Context) error {
	o := r.o
	dbPath := filepath.Join(r.dir, "bot.db")
	leftovers := []string{dbPath, dbPath + "-wal", dbPath + "-shm", dbPath + ".lock"}
	r.names = make([]string, o.Replicas)
	for i := range r.names {
		r.names[i] = "bot"
		if o.Replicas > 1 {
			r.names[i] = fmt.Sprintf("bot-%d", i+1)
		}
		leftovers = append(leftovers, filepath.Join(r.dir, r.names[i]+".offset"))
	}
	leftovers = append(leftovers, filepath.Join(r.dir, "telegram.offset"))
	for _, f := range leftovers {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing the database of an earlier run: %w", err)
		}
	}
	r.driver, r.dsn = "sqlite", dbPath
	if o.DB == "postgres" {
		pgDSN, schema, err := freshSchema(ctx, o.PostgresDSN)
		if err != nil {
			return err
		}
		r.closers = append(r.closers, schema.drop)
		r.driver, r.dsn, r.pg = "postgres", pgDSN, schema
	}
	if o.Telegram == "webhook" {
		proxy, err := startWebhookProxy()
		if err != nil {
			return err
		}
		r.closers = append(r.closers, proxy.close)
		r.proxy = proxy
	}
	return nil
}

// startBots writes each replica's config and starts it; the bots are stopped by close unless
// stopBots did.
func (r *run) startBots(ctx context.Context) error {
	o := r.o
	token, secret := rand.Text(), rand.Text()
	r.closers = append(r.closers, func() {
		if !r.stopped {
			stopAll(r.bots)
		}
	})
	var hooks []string
	for _, name := range r.names {
		cfgPath := filepath.Join(r.dir, name+".toml")
		if o.Replicas == 1 {
			cfgPath = filepath.Join(r.dir, "config.toml")
		}
		tgMode := ""
		if r.proxy != nil {
			tgMode = fmt.Sprintf("mode = \"webhook\"\nwebhook_listen = \"127.0.0.1:0\"\nwebhook_url = %q\nwebhook_secret = %q\n", r.proxy.url(), secret)
		}
		cfg := botConfig(o, r.driver, r.dsn, filepath.Join(r.dir, name+".offset"), r.model.URL, r.tg, r.mcpURL, token, tgMode)
		if r.traces != nil {
			cfg += fmt.Sprintf("\n[otel]\nenabled = true\nendpoint = %q\n", r.traces.URL)
		}
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			return fmt.Errorf("writing the bot config: %w", err)
		}
		logPath := filepath.Join(r.dir, name+".log")
		o.Log.Info("starting the bot", "bin", r.bin, "config", cfgPath, "log", logPath)
		bot, err := startBot(ctx, r.bin, cfgPath, logPath, token, r.proxy != nil)
		if err != nil {
			return err
		}
		r.bots = append(r.bots, bot)
		hooks = append(hooks, bot.webhook)
	}
	if r.proxy != nil {
		r.proxy.setBackends(hooks)
	}
	return nil
}

// logPath names the bots' log files.
func (r *run) logPath() string {
	if r.o.Replicas > 1 {
		return filepath.Join(r.dir, "bot-*.log")
	}
	return filepath.Join(r.dir, r.names[0]+".log")
}

// newReport is the report's description of the run.
func (r *run) newReport() *Report {
	o := r.o
	rep := &Report{
		Chats: o.Chats, ChatType: o.ChatType, TurnsPerChat: o.Turns, ThinkMS: o.Think.Milliseconds(), Rate: o.Rate, Tokens: o.Tokens,
		ToolShare: o.ToolShare, ToolLatencyMS: o.ToolLatency.Milliseconds(), Tool: r.toolName, LoadAvgStart: loadAvg(),
		GlobalPerSecond: o.GlobalPerSecond, Database: r.driver, Replicas: o.Replicas, Telegram: o.Telegram,
		GoroutinesIdle: -1, GoroutinesAfter: -1, IdleColdStart: r.cold,
	}
	if o.Turns == 0 {
		rep.Duration = o.Duration.String()
	}
	return rep
}

// measureIdle reads the idle bots' goroutines and memory.
func (r *run) measureIdle(ctx context.Context, rep *Report) {
	if n, err := sumGoroutines(ctx, r.bots); err == nil {
		rep.GoroutinesIdle = n
	}
	idleRSS, _, _ := sumMem(r.bots)
	rep.IdleRSSMB = mb(idleRSS)
	var idleAnon int64
	for _, b := range r.bots {
		if anon, err := procAnon(b.pid()); err == nil {
			idleAnon += anon
		}
	}
	rep.IdleAnonMB = mb(idleAnon)
}

// loadResult is what the load measured beside the report's machine figures.
type loadResult struct {
	results      []turnResult
	wall, cpu    time.Duration
	hwm, idleRSS int64 // the bots' peak and idle RSS, summed
	peakInFlight int64
}

// load drives the chats and measures the bots' CPU, the machine's and the PostgreSQL server's
// during it, the first replica's anonymous peak and, with -profile, its CPU profile.
func (r *run) load(ctx context.Context, rep *Report) (loadResult, error) {
	o, bots := r.o, r.bots
	var l loadResult
	l.idleRSS, _, _ = sumMem(bots)
	var profWG sync.WaitGroup
	loadDone := make(chan struct{})
	if o.ProfileDir != "" && bots[0].profiles {
		if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
			return l, fmt.Errorf("making the profile folder: %w", err)
		}
		profWG.Go(func() {
			rep.Profiles = append(rep.Profiles, profileCPU(ctx, bots[0], o.ProfileDir, loadDone, o.Log)...)
		})
	}
	cpu0, err := replicaCPU(bots)
	if err != nil {
		return l, err
	}
	var pg0 map[int]time.Duration
	var pgErr error
	if r.pg != nil {
		pg0, pgErr = r.pg.backendCPU(ctx)
	}
	busy0, total0 := machineCPU()
	self0 := selfCPU()
	start := time.Now()
	d, results, wall := r.drive(ctx, start, loadDone)
	l.results, l.wall, l.peakInFlight = results, wall, d.peakInFlight.Load()
	rep.PeakAnonMB = mb(d.anonPeak)
	cpu1, err := replicaCPU(bots)
	if err != nil {
		return l, r.exitedErr(err)
	}
	busy1, total1 := machineCPU()
	self1 := selfCPU()
	rep.DBServerCPUSeconds = -1
	if r.pg != nil && pgErr == nil {
		if pg1, err := r.pg.backendCPU(ctx); err == nil {
			rep.DBServerCPUSeconds = backendDelta(pg0, pg1).Seconds()
		}
	}
	_, l.hwm, _ = sumMem(bots)
	profWG.Wait()
	rep.LoadAvgEnd = loadAvg()
	for i := range bots {
		l.cpu += cpu1[i] - cpu0[i]
		rep.ReplicaCPUSeconds = append(rep.ReplicaCPUSeconds, (cpu1[i] - cpu0[i]).Seconds())
	}
	if t := total1 - total0; t > 0 {
		rep.MachineBusyPct = 100 * float64(busy1-busy0) / float64(t)
		rep.OthersCPUPct = max(0, 100*float64(busy1-busy0-l.cpu-(self1-self0))/float64(t))
	}
	rep.LoadToolCPUSeconds = (self1 - self0).Seconds()
	return l, nil
}

// drive runs the chats from start, ending at once when a bot dies (instead of every chat
// waiting out its turn timeout), closes loadDone when they are done and returns the driver,
// the turns and the load's wall time. While they run it samples the bot's anonymous memory at
// its peak (driver.anonPeak), with one replica only: the table's memory figures are for one
// process.
func (r *run) drive(ctx context.Context, start time.Time, loadDone chan struct{}) (*driver, []turnResult, time.Duration) {
	driveCtx, stopDrive := context.WithCancel(ctx)
	for _, b := range r.bots {
		go func() {
			select {
			case <-b.exited:
				stopDrive()
			case <-driveCtx.Done():
			}
		}()
	}
	anonPeak := make(chan int64, 1)
	if len(r.bots) == 1 {
		go func() { anonPeak <- peakAnon(r.bots[0].pid(), loadDone) }()
	} else {
		anonPeak <- 0
	}
	d := newDriver(r.o, r.rec, r.tg, r.bots)
	results := d.run(driveCtx, start)
	stopDrive()
	wall := time.Since(start)
	close(loadDone)
	d.anonPeak = <-anonPeak
	return d, results, wall
}

// exitedErr names the bot that exited during the load, if one did, instead of err.
func (r *run) exitedErr(err error) error {
	for _, b := range r.bots {
		select {
		case <-b.exited:
			return fmt.Errorf("a bot exited during the load (%v); see %s", b.err, r.logPath())
		default:
		}
	}
	return err
}

// afterLoad saves the heap profile with -profile and counts the goroutines left once they
// settle, and those of idle keep-alive connections among them.
func (r *run) afterLoad(ctx context.Context, rep *Report) {
	o, bots := r.o, r.bots
	if o.ProfileDir != "" && bots[0].profiles {
		file := filepath.Join(o.ProfileDir, "heap.pprof")
		if err := bots[0].save(ctx, "/debug/pprof/heap", file); err != nil {
			o.Log.Warn("bot heap profile", "err", err)
		} else {
			rep.Profiles = append(rep.Profiles, file)
		}
	}
	rep.GoroutinesAfter = 0
	for _, b := range bots {
		idle := -1
		if rep.GoroutinesIdle >= 0 {
			idle = rep.GoroutinesIdle / len(bots)
		}
		rep.GoroutinesAfter += settleGoroutines(ctx, b, idle)
		if !b.profiles {
			continue
		}
		if dump, err := b.get(ctx, "/debug/pprof/goroutine?debug=1"); err == nil {
			rep.GoroutinesKeepAlive += keepAliveGoroutines(dump)
			if o.ProfileDir != "" && b == bots[0] {
				file := filepath.Join(o.ProfileDir, "goroutines.txt")
				if err := os.WriteFile(file, dump, 0o644); err == nil {
					rep.Profiles = append(rep.Profiles, file)
				}
			}
		}
	}
}

// stopBots stops the bots and returns their stop errors, naming their logs.
func (r *run) stopBots() error {
	r.stopped = true
	var runErr error
	for i, err := range stopAll(r.bots) {
		if err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("bot serve: %w (log: %s)", err, filepath.Join(r.dir, r.names[i]+".log")))
		}
	}
	return runErr
}

// stopAll stops the bots at once (each finishing its turns within its grace) and returns each
// one's stop error.
func stopAll(bots []*botProcess) []error {
	errs := make([]error, len(bots))
	var wg sync.WaitGroup
	for i, b := range bots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.stop(botStopGrace)
		}()
	}
	wg.Wait()
	return errs
}

// replicaCPU returns the CPU time each bot has used.
func replicaCPU(bots []*botProcess) ([]time.Duration, error) {
	out := make([]time.Duration, len(bots))
	for i, b := range bots {
		c, err := procCPU(b.pid())
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// sumMem returns the bots' resident set sizes now and at their peaks, summed.
func sumMem(bots []*botProcess) (rss, peak int64, err error) {
	for _, b := range bots {
		r, p, e := procMem(b.pid())
		rss, peak, err = rss+r, peak+p, errors.Join(err, e)
	}
	return rss, peak, err
}

// sumGoroutines returns the bots' goroutines, summed.
func sumGoroutines(ctx context.Context, bots []*botProcess) (int, error) {
	n := 0
	for _, b := range bots {
		g, err := b.goroutines(ctx)
		if err != nil {
			return 0, err
		}
		n += g
	}
	return n, nil
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

// botConfig is a replica's config.toml for the run, telegramMode the lines that set the Telegram
// mode (empty: polling). The admin listener, on a port of its choosing, serves the load tool only
// (goroutines from /metrics, profiles from /debug/pprof/): no web chat.
func botConfig(o Options, driver, dsn, offsetFile, modelURL string, tg *tgkit.Server, mcpURL, adminToken, telegramMode string) string {
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
# Plain finals, comparable with earlier runs (the recorder reads each answer's text); rich
# finals are measured by loadtest stream -modes telegram-rich.
rich = "off"
global_per_second = %d
paid_broadcast = %t
offset_file = %q
%s
[admin]
enabled = true
listen = "127.0.0.1:0"
token = %q
web_chat = false

[log]
level = "info"
`, driver, dsn, modelURL, max(64, o.Chats), tg.Token(), tg.Endpoint(), o.GlobalPerSecond, o.GlobalPerSecond > 30, offsetFile, telegramMode, adminToken)
	if mcpURL != "" {
		fmt.Fprintf(&b, `
[[mcp.servers]]
name = "load"
transport = "http"
url = %q
local = true
tool_call_timeout_sec = 300
`, mcpURL)
	}
	return b.String()
}

// driver runs the chats.
type driver struct {
	o    Options
	rec  *recorder
	tg   *tgkit.Server
	bots []*botProcess

	sent, done, timedOut   atomic.Int64
	inFlight, peakInFlight atomic.Int64
	anonPeak               int64 // the bot's anonymous memory at its peak, once run returned

	mu      sync.Mutex
	results []turnResult
}

func newDriver(o Options, rec *recorder, tg *tgkit.Server, bots []*botProcess) *driver {
	return &driver{o: o, rec: rec, tg: tg, bots: bots}
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
		d.tg.Send(d.message(c, turn))
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

// message is chat c's message of turn: in a group it mentions the bot, which answers only
// when addressed there.
func (d *driver) message(c *chatRun, turn int) tgkit.Inbound {
	user := tgkit.User{ID: baseChatID + int64(c.idx), FirstName: "Load", Username: fmt.Sprintf("load%d", c.idx)}
	if c.surface == surfaceGroup {
		return tgkit.Inbound{Chat: tgkit.Chat{ID: c.id, Type: "supergroup", Title: fmt.Sprintf("load %d", c.idx)}, From: user,
			Text: "@" + d.tg.BotUsername() + " " + userText(c.idx, turn)}
	}
	return tgkit.Inbound{Chat: tgkit.Chat{ID: c.id, Type: "private"}, From: user, Text: userText(c.idx, turn)}
}

// progress prints a line a second to o.Progress until all is closed.
func (d *driver) progress(ctx context.Context, start time.Time, all <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastDone := int64(0)
	lastCPU := d.cpu()
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
		cpu := d.cpu()
		rss, _, _ := sumMem(d.bots)
		fmt.Fprintf(d.o.Progress, "%5.0fs  sent %d  done %d  in flight %d  timed out %d  turns/s %d  429s %d  bot cpu %3.0f%%  rss %.1f MB\n",
			time.Since(start).Seconds(), d.sent.Load(), done, d.inFlight.Load(), d.timedOut.Load(), done-lastDone,
			d.rec.http429.Load(), 100*(cpu-lastCPU).Seconds(), mb(rss))
		lastDone, lastCPU = done, cpu
	}
}

// cpu is the CPU time the bots have used, summed; a bot whose /proc cannot be read counts 0.
func (d *driver) cpu() time.Duration {
	var sum time.Duration
	for _, b := range d.bots {
		c, _ := procCPU(b.pid())
		sum += c
	}
	return sum
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// sortedTimes returns ts sorted (the fakes' hooks append them from concurrent requests).
func sortedTimes(ts []time.Time) []time.Time {
	out := slices.Clone(ts)
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// pgSchema is the run's schema in the PostgreSQL database.
type pgSchema struct {
	db   *sql.DB
	name string
}

// freshSchema makes an empty schema for the run in the PostgreSQL database at base, so earlier
// runs' rows do not spoil the counts, and returns a DSN whose search_path is it (and whose
// application_name is its name, to find the run's server processes) and the schema, whose drop
// removes it.
func freshSchema(ctx context.Context, base string) (string, *pgSchema, error) {
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
	q.Set("application_name", schema)
	u.RawQuery = q.Encode()
	return u.String(), &pgSchema{db: db, name: schema}, nil
}

// drop removes the schema and closes the connection.
func (s *pgSchema) drop() {
	dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = s.db.ExecContext(dctx, "DROP SCHEMA "+s.name+" CASCADE")
	s.db.Close()
}

// backendCPU returns the CPU time each PostgreSQL server process serving the bots has used so
// far (the backends of connections whose application_name is the schema's name), read from
// /proc: it works only when the server runs on this machine, as a developer's does.
func (s *pgSchema) backendCPU(ctx context.Context) (map[int]time.Duration, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", s.name)
	if err != nil {
		return nil, fmt.Errorf("listing the bots' PostgreSQL backends: %w", err)
	}
	defer rows.Close()
	out := map[int]time.Duration{}
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return nil, err
		}
		c, err := procCPU(pid)
		if err != nil {
			return nil, fmt.Errorf("PostgreSQL backends are not on this machine: %w", err)
		}
		out[pid] = c
	}
	return out, rows.Err()
}

// backendDelta is the CPU the backends used between two readings; a backend that closed
// between them is missed.
func backendDelta(before, after map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, c := range after {
		d += c - before[pid]
	}
	return d
}
