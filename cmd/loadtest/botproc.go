package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// moduleRoot returns src, or the folder of the module the current directory belongs to.
func moduleRoot(ctx context.Context, src string) (string, error) {
	if src != "" {
		return filepath.Abs(src)
	}
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root (go env GOMOD): %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the relaybot module: give -src or -bot")
	}
	return filepath.Dir(gomod), nil
}

// buildBot builds ./cmd/bot of the module at src into dir and returns the binary's path.
func buildBot(ctx context.Context, src, dir string) (string, error) {
	root, err := moduleRoot(ctx, src)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "bot")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/bot")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the bot in %s: %w\n%s", root, err, out)
	}
	return bin, nil
}

// adminEndpoint is the bot's admin listener: the token made for the run, and the address the
// listener took (the config asks for port 0; the bot logs the port it got).
type adminEndpoint struct {
	addr, token string
}

// botProcess is a running `bot serve`.
type botProcess struct {
	cmd   *exec.Cmd
	admin adminEndpoint
	// webhook is the address of the bot's Telegram webhook server, in webhook mode.
	webhook string
	// profiles is whether the admin listener serves /debug/pprof/ (a bot binary given with -bot
	// may predate it).
	profiles bool
	ready    chan struct{}
	exited   chan struct{}
	err      error // the exit error, once exited is closed
	client   *http.Client
}

// logAddr returns the addr= field of a bot log line whose message is msg.
func logAddr(line, msg string) (string, bool) {
	if !strings.Contains(line, `msg="`+msg+`"`) {
		return "", false
	}
	for _, f := range strings.Fields(line) {
		if a, ok := strings.CutPrefix(f, "addr="); ok {
			return a, true
		}
	}
	return "", false
}

// startBot runs bin serve -config cfgPath, its log going to logPath, and returns once the bot
// logged that it runs and where its admin listener (and, when webhook is set, its Telegram
// webhook server) listens, and the admin listener answers; or it failed, or ctx ended.
func startBot(ctx context.Context, bin, cfgPath, logPath, token string, webhook bool) (*botProcess, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating the bot log: %w", err)
	}
	cmd := exec.Command(bin, "serve", "-config", cfgPath)
	cmd.Stdout = logFile
	// Should the load tool die, the bot gets a SIGTERM rather than running on.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &botProcess{cmd: cmd, admin: adminEndpoint{token: token}, ready: make(chan struct{}), exited: make(chan struct{}),
		client: &http.Client{Timeout: 2 * time.Minute}}
	// The scanner writes the addresses before it closes ready; they are read after ready.
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		running, closed := false, false
		for sc.Scan() {
			line := sc.Text()
			_, _ = logFile.WriteString(line + "\n")
			if closed {
				continue
			}
			if a, ok := logAddr(line, "admin listening"); ok {
				p.admin.addr = a
			}
			if a, ok := logAddr(line, "telegram: webhook listening"); ok {
				p.webhook = a
			}
			running = running || strings.Contains(line, `msg="bot running"`)
			if running && p.admin.addr != "" && (!webhook || p.webhook != "") {
				closed = true
				close(p.ready)
			}
		}
		_, _ = io.Copy(logFile, pipe)
	}()
	go func() {
		<-scanned
		p.err = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	wait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	select {
	case <-p.ready:
	case <-p.exited:
		return nil, fmt.Errorf("the bot exited before it ran (%v); see %s", p.err, logPath)
	case <-wait.Done():
		p.stop(5 * time.Second)
		return nil, fmt.Errorf("the bot did not start within 2m: %w; see %s", wait.Err(), logPath)
	}
	// The admin listener logs its address before it serves: wait for it to answer.
	if err := p.waitAdmin(wait); err != nil {
		p.stop(5 * time.Second)
		return nil, fmt.Errorf("the bot's admin listener on %s: %w; see %s", p.admin.addr, err, logPath)
	}
	_, err = p.get(ctx, "/debug/pprof/")
	p.profiles = err == nil
	return p, nil
}

// waitAdmin polls the admin listener's /healthz until it answers 200, the bot exits or ctx ends.
func (p *botProcess) waitAdmin(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := p.get(ctx, "/healthz")
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("the bot exited (%v)", p.err)
		case <-ctx.Done():
			return fmt.Errorf("no answer (%v): %w", err, ctx.Err())
		case <-tick.C:
		}
	}
}

// pid is the bot's process id.
func (p *botProcess) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM and waits up to grace for the bot to exit, then kills it. It returns the
// bot's exit error (nil for a clean exit).
func (p *botProcess) stop(grace time.Duration) error {
	select {
	case <-p.exited:
		return p.err
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
		return p.err
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("the bot did not stop within %v of SIGTERM and was killed", grace)
	}
}

// get fetches a path of the bot's admin listener with its token.
func (p *botProcess) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.admin.addr+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+p.admin.token)
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("admin %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("admin %s: %s", path, resp.Status)
	}
	return body, nil
}

// goroutines asks the bot how many goroutines it has: go_goroutines of its /metrics.
func (p *botProcess) goroutines(ctx context.Context) (int, error) {
	body, err := p.get(ctx, "/metrics")
	if err != nil {
		return 0, err
	}
	return metricGoroutines(body)
}

// metricGoroutines reads the go_goroutines sample of a Prometheus text exposition.
func metricGoroutines(exposition []byte) (int, error) {
	for line := range strings.Lines(string(exposition)) {
		v, ok := strings.CutPrefix(line, "go_goroutines")
		if !ok || v == "" || (v[0] != ' ' && v[0] != '{') {
			continue
		}
		if v[0] == '{' { // a replica labels every series with its instance
			_, v, ok = strings.Cut(v, "} ")
			if !ok {
				return 0, fmt.Errorf("unexpected go_goroutines sample %q", strings.TrimSpace(line))
			}
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected go_goroutines sample %q", strings.TrimSpace(line))
		}
		return int(n), nil
	}
	return 0, errors.New("the bot's /metrics has no go_goroutines")
}

// save writes a path of the bot's admin listener (a profile) to file.
func (p *botProcess) save(ctx context.Context, path, file string) error {
	body, err := p.get(ctx, path)
	if err != nil {
		return err
	}
	return os.WriteFile(file, body, 0o644)
}

// keepAliveGoroutines counts, in a goroutine profile (debug=1), the goroutines of idle HTTP
// keep-alive connections (two per connection: net/http's persistConn read and write loops). They
// are pooled, not leaked: the transport closes them after its idle timeout.
func keepAliveGoroutines(dump []byte) int {
	n := 0
	for _, block := range strings.Split(string(dump), "\n\n") {
		if !strings.Contains(block, "persistConn).readLoop") && !strings.Contains(block, "persistConn).writeLoop") {
			continue
		}
		count, _, _ := strings.Cut(block, " @ ")
		if i := strings.LastIndexByte(count, '\n'); i >= 0 {
			count = count[i+1:] // the first block follows the profile's header line
		}
		if c, err := strconv.Atoi(strings.TrimSpace(count)); err == nil {
			n += c
		}
	}
	return n
}
