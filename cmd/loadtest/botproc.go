package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pprofEnv names the loopback address the profiling build of the bot serves net/http/pprof on.
const pprofEnv = "RELAYBOT_LOADTEST_PPROF"

// pprofOverlay is added to package main of cmd/bot (through go build -overlay, never written into
// the source tree) when the load tool builds the bot: with pprofEnv set, the bot serves
// /debug/pprof on that address. The admin listener offers no pprof and no goroutine count, and
// the tool needs both.
const pprofOverlay = `package main

import (
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
)

// The load tool's build only: serve net/http/pprof on ` + pprofEnv + ` when it is set.
func init() {
	addr := os.Getenv("` + pprofEnv + `")
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return
	}
	go func() { _ = http.Serve(ln, http.DefaultServeMux) }()
}
`

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

// buildBot builds ./cmd/bot of the module at src into dir, with the pprof overlay, and returns
// the binary's path.
func buildBot(ctx context.Context, src, dir string) (string, error) {
	root, err := moduleRoot(ctx, src)
	if err != nil {
		return "", err
	}
	overlayGo := filepath.Join(dir, "loadtest_pprof.go")
	if err := os.WriteFile(overlayGo, []byte(pprofOverlay), 0o600); err != nil {
		return "", fmt.Errorf("writing the pprof overlay: %w", err)
	}
	ovl, err := json.Marshal(map[string]map[string]string{
		"Replace": {filepath.Join(root, "cmd", "bot", "zz_loadtest_pprof.go"): overlayGo},
	})
	if err != nil {
		return "", err
	}
	ovlPath := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ovlPath, ovl, 0o600); err != nil {
		return "", fmt.Errorf("writing the overlay: %w", err)
	}
	bin := filepath.Join(dir, "bot")
	cmd := exec.CommandContext(ctx, "go", "build", "-overlay", ovlPath, "-o", bin, "./cmd/bot")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the bot in %s: %w\n%s", root, err, out)
	}
	return bin, nil
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free loopback port: %w", err)
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// botProcess is a running `bot serve`.
type botProcess struct {
	cmd    *exec.Cmd
	pprof  string // loopback address of net/http/pprof, "" when the binary has none
	ready  chan struct{}
	exited chan struct{}
	err    error // the exit error, once exited is closed
	client *http.Client
}

// startBot runs bin serve -config cfgPath, its log going to logPath, and returns once the bot
// logged that it runs (or failed, or ctx ended).
func startBot(ctx context.Context, bin, cfgPath, logPath string) (*botProcess, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating the bot log: %w", err)
	}
	cmd := exec.Command(bin, "serve", "-config", cfgPath)
	cmd.Env = append(os.Environ(), pprofEnv+"="+addr)
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
	p := &botProcess{cmd: cmd, pprof: addr, ready: make(chan struct{}), exited: make(chan struct{}),
		client: &http.Client{Timeout: 2 * time.Minute}}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		ready := false
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = logFile.Write(append(line, '\n'))
			if !ready && strings.Contains(string(line), "bot running") {
				ready = true
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
	// The pprof listener starts in init, before main: it answers by now if the build has it.
	if _, err := p.goroutines(ctx); err != nil {
		p.pprof = ""
	}
	return p, nil
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

// get fetches a pprof path from the bot.
func (p *botProcess) get(ctx context.Context, path string) ([]byte, error) {
	if p.pprof == "" {
		return nil, errors.New("the bot binary serves no pprof (built without the load tool's overlay)")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.pprof+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("pprof %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("pprof %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("pprof %s: %s", path, resp.Status)
	}
	return body, nil
}

// goroutines asks the bot how many goroutines it has, from the goroutine profile's header
// ("goroutine profile: total N").
func (p *botProcess) goroutines(ctx context.Context) (int, error) {
	body, err := p.get(ctx, "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(body), "\n")
	n, err := strconv.Atoi(strings.TrimPrefix(line, "goroutine profile: total "))
	if err != nil {
		return 0, fmt.Errorf("unexpected goroutine profile header %q", line)
	}
	return n, nil
}

// save writes a pprof path of the bot to file.
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
