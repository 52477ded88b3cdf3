package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// inheritedEnv names the variables of the bot's environment a stdio server gets; the rest (the
// bot's tokens among them) stays out. ServerConfig.Env adds to them.
var inheritedEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "TMPDIR", "TZ", "SYSTEMROOT"}

// Stop grace periods: after stdin closes, then after SIGTERM, before SIGKILL.
const (
	stopGrace = 2 * time.Second
	termGrace = 3 * time.Second
)

// stderrKeep is how much of a stdio server's stderr is kept for the error when it dies.
const stderrKeep = 2048

// process is a running stdio server.
type process struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  *os.File
	exited  chan struct{} // closed once Wait returned
	waitErr error
	stderr  *tailBuffer
	errDone chan struct{} // closed when stderr is drained
	stopped sync.Once
}

func startProcess(cfg ServerConfig) (*process, error) {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = processEnv(cfg.Env)
	setProcessGroup(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		stdin.Close()
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		stdin.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		stdin.Close()
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return nil, fmt.Errorf("start %s: %w", cfg.Command, err)
	}
	outW.Close()
	errW.Close()
	p := &process{
		cmd: cmd, stdin: stdin, stdout: outR,
		exited: make(chan struct{}), stderr: &tailBuffer{max: stderrKeep}, errDone: make(chan struct{}),
	}
	go func() {
		defer close(p.errDone)
		_, _ = io.Copy(p.stderr, errR)
		errR.Close()
	}()
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// exitErr describes how the process ended, with the end of its stderr; nil while it runs.
func (p *process) exitErr() error {
	select {
	case <-p.exited:
	default:
		return nil
	}
	select {
	case <-p.errDone:
	case <-time.After(100 * time.Millisecond):
	}
	err := p.waitErr
	if err == nil {
		err = errors.New("exit status 0")
	}
	if tail := p.stderr.String(); tail != "" {
		return fmt.Errorf("process exited: %w; stderr: %s", err, tail)
	}
	return fmt.Errorf("process exited: %w", err)
}

// stop ends the process: stdin is closed (the transport already did), then SIGTERM, then
// SIGKILL, each after a grace period; what is left of its process group is killed.
func (p *process) stop() {
	p.stopped.Do(func() {
		_ = p.stdin.Close()
		if !p.waitExit(stopGrace) {
			signalGroup(p.cmd, false)
			if !p.waitExit(termGrace) {
				signalGroup(p.cmd, true)
				<-p.exited
			}
		}
		signalGroup(p.cmd, true)
		p.stdout.Close()
	})
}

func (p *process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

func processEnv(extra map[string]string) []string {
	var env []string
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(string(bytes.ToValidUTF8(b.buf, nil)))
}
