package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// isolate puts the reader in a process group of its own, killed whole when the context ends,
// and killed by the kernel if the bot dies first.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// confine caps this process: its data segment (the Go heap and every private mapping it
// writes) at what it uses now plus lim.Memory, and its processor time at lim.CPU, after which
// the kernel kills it. Past the cap an allocation fails and the Go runtime ends the process.
func confine(lim Limits) error {
	softLimit(lim)
	base, err := dataSize()
	if err != nil {
		base = unknownBase // no /proc: a generous guess at what the runtime holds at start
	}
	mem := uint64(base) + uint64(lim.Memory)*raceFactor
	if err := syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: mem, Max: mem}); err != nil {
		return fmt.Errorf("memory cap: %w", err)
	}
	cpu := uint64(max(1, (lim.CPU+999_999_999)/1_000_000_000))
	if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: cpu, Max: cpu}); err != nil {
		return fmt.Errorf("processor cap: %w", err)
	}
	return nil
}

// unknownBase stands for the data segment at start when /proc cannot tell it.
const unknownBase = 128 << 20

// dataSize is this process's data segment now (VmData), in bytes.
func dataSize() (int64, error) {
	f, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(f))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmData:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmData %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmData in /proc/self/status")
}
