package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// dropFromPageCache writes the file's dirty pages back and drops its pages from the page cache
// (those no process maps now), so that the bot starts as after a fresh deploy, its executable
// read anew from disk. How a binary came into the page cache decides how much of it a process
// maps: the Go linker writes its output through a shared mapping, which leaves it in large
// folios the kernel maps whole, and a freshly built bot idled 8 MB of file pages higher than
// the same bytes read from disk (42.8 against 34.3 MB).
func dropFromPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("dropping %s from the page cache: %w", path, err)
	}
	defer f.Close()
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("dropping %s from the page cache: statfs: %w", path, err)
	}
	if st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC {
		return fmt.Errorf("dropping %s from the page cache: it is on tmpfs, whose pages are the file", path)
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("dropping %s from the page cache: fdatasync: %w", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("dropping %s from the page cache: fadvise: %w", path, err)
	}
	return nil
}

// clockTick is the unit of utime and stime in /proc/PID/stat (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// procCPU returns the CPU time (user + system) process pid has used, from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading cpu time of process %d: %w", pid, err)
	}
	// The command name may hold spaces and parentheses: the fields start after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("process %d: unexpected /proc stat format", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("process %d: short /proc stat line", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("process %d: unreadable utime/stime %q %q", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * clockTick, nil
}

// procMem returns the resident set size now and at its peak (VmRSS and VmHWM), in bytes.
func procMem(pid int) (rss, peak int64, err error) {
	fh, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("reading memory of process %d: %w", pid, err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		line := sc.Text()
		var dst *int64
		switch {
		case strings.HasPrefix(line, "VmRSS:"):
			dst = &rss
		case strings.HasPrefix(line, "VmHWM:"):
			dst = &peak
		default:
			continue
		}
		f := strings.Fields(line)
		if len(f) >= 2 {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			*dst = kb << 10
		}
	}
	return rss, peak, sc.Err()
}

// procAnon returns the process's anonymous resident memory (its heap, stacks and runtime), the
// part of RSS that is its own: the rest is file pages of the executable and libraries, clean and
// shared with the page cache.
func procAnon(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading memory of process %d: %w", pid, err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("process %d: no RssAnon in /proc status", pid)
}

// peakAnon samples the process's anonymous resident memory every 100 ms until done is closed and
// returns the largest sample (0 when none could be read). The kernel keeps a peak of the whole
// RSS only, whose file pages depend on how the executable sits in the page cache.
func peakAnon(pid int, done <-chan struct{}) int64 {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var peak int64
	for {
		if anon, err := procAnon(pid); err == nil {
			peak = max(peak, anon)
		}
		select {
		case <-done:
			return peak
		case <-tick.C:
		}
	}
}

// selfCPU is the CPU time (user + system) this process has used, from getrusage.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAvg is the first line of /proc/loadavg (1, 5 and 15 minute load averages, ...).
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(data))
}

// machineCPU returns the busy and total CPU time of the whole machine (all cores) from the first
// line of /proc/stat; the difference of two readings tells how loaded the machine was.
func machineCPU() (busy, total time.Duration) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	for i, s := range f[1:] {
		n, _ := strconv.ParseInt(s, 10, 64)
		d := time.Duration(n) * clockTick
		if i >= 8 { // guest time is already counted in user time
			break
		}
		total += d
		if i != 3 && i != 4 { // idle and iowait
			busy += d
		}
	}
	return busy, total
}
