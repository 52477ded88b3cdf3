package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"relaybot/internal/testkit/files"
	"relaybot/internal/testkit/wait"
	"relaybot/media"
	"relaybot/media/audio"
	"relaybot/media/sandbox"
)

// TestMain lets the test binary be the reader, as the bot's binary is.
func TestMain(m *testing.M) {
	sandbox.Main()
	os.Exit(m.Run())
}

// tight are limits small enough for the hostile files to break them fast, and generous enough
// for a real document on a busy CI machine.
var tight = sandbox.Limits{Memory: 128 << 20, CPU: 3 * time.Second, Wall: 60 * time.Second, Inflated: 16 << 20}

func newReader(t testing.TB, lim sandbox.Limits) *sandbox.Reader {
	t.Helper()
	r, err := sandbox.New(lim)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Every hostile PDF of issue 36 is one file that cannot be read: the test process (the bot)
// lives on, its memory untouched, and the next file reads.
func TestHostilePDFsAreRefusedAndTheCallerLivesOn(t *testing.T) {
	r := newReader(t, tight)
	ctx := context.Background()
	// The crash and xref PDFs kill the reader outright (the fatal error); the others break a
	// limit the reader names.
	named := map[string]bool{"kids loop": true, "huge count": true, "flate bomb": true}
	for name, data := range files.HostilePDFs() {
		t.Run(name, func(t *testing.T) {
			doc, err := r.ReadDocument(ctx, name+".pdf", "application/pdf", data)
			var lim *media.LimitError
			if !errors.As(err, &lim) {
				t.Fatalf("the hostile PDF read as %q, %v; want a broken limit", doc.Text, err)
			}
			if named[name] && strings.Contains(lim.What, "stopped") {
				t.Fatalf("got %v, want the limit it broke named", err)
			}
			t.Logf("%s: %v", name, err)
		})
	}
	// 4 million glyphs (28 MB inflated, under this reader's inflate cap) grow the library's
	// heap past the memory cap (a GB without it): the reader dies of it and says so (or of
	// the processor time, under the race detector's slower heap).
	roomy := tight
	roomy.Inflated = 64 << 20
	var lim *media.LimitError
	if _, err := newReader(t, roomy).ReadDocument(ctx, "text.pdf", "application/pdf", files.TextBombPDF(4<<20)); !errors.As(err, &lim) || !strings.Contains(lim.What, "memory") && !strings.Contains(lim.What, "processor") {
		t.Errorf("a text bomb: %v, want the memory cap named", err)
	}
	doc, err := r.ReadDocument(ctx, "report.pdf", "application/pdf", files.PDF([][]string{{"Page one says alpha."}, {"Page two says bravo."}}))
	if err != nil || !strings.Contains(doc.Text, "bravo") || doc.Pages != 2 {
		t.Fatalf("after the hostile files a real PDF read as %+v, %v", doc, err)
	}
	if hwm := peakRSS(t); hwm > 200<<20 {
		t.Errorf("the caller's peak RSS is %d MB after the hostile PDFs", hwm>>20)
	}
}

// A reader stuck in a page tree that lists itself ends the moment its context is cancelled
// (/stop, shutdown): its process is gone, not left to spin.
func TestCancelKillsAStuckReader(t *testing.T) {
	r := newReader(t, sandbox.Limits{Wall: time.Hour, CPU: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.ReadDocument(ctx, "loop.pdf", "application/pdf", files.KidsLoopPDF())
		done <- err
	}()
	var pid int
	wait.For(t, "the reader process to start", func() bool {
		pid = childPID(t)
		return pid != 0
	})
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled read returned %v, want the cancellation", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the read went on 30 s after its context was cancelled")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the reader process %d is still there after the cancel (kill 0: %v)", pid, err)
	}
}

// Text files go through the reader too (charset detection is a parser of untrusted bytes).
func TestReaderReadsTextAndMeasuresAudio(t *testing.T) {
	r := newReader(t, tight)
	ctx := context.Background()
	doc, err := r.ReadDocument(ctx, "ru.txt", "text/plain; charset=koi8-r", []byte{0xD0, 0xD2, 0xC9, 0xD7, 0xC5, 0xD4})
	if err != nil || doc.Text != "привет" || doc.Format != media.FormatText {
		t.Fatalf("a koi8-r text read as %+v, %v", doc, err)
	}
	var unsup *media.UnsupportedError
	if _, err := r.ReadDocument(ctx, "blob.bin", "application/octet-stream", []byte{0x7f, 'E', 'L', 'F', 0, 0}); !errors.As(err, &unsup) || unsup.Type != ".bin" {
		t.Fatalf("a binary file: %v, want it named unsupported", err)
	}
	d, err := r.AudioDuration(ctx, "voice.ogg", "audio/ogg", files.OggOpus(3*time.Second))
	if err != nil || d != 3*time.Second {
		t.Fatalf("a 3 s voice note measured %v, %v", d, err)
	}
	if _, err := r.AudioDuration(ctx, "x.mp3", "audio/mpeg", []byte("not audio at all")); !errors.Is(err, audio.ErrUnmeasured) {
		t.Fatalf("bytes that are not audio: %v, want ErrUnmeasured", err)
	}
}

// peakRSS is this process's peak resident memory (VmHWM).
func peakRSS(t testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc")
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// childPID is the pid of a child process of this one, 0 when there is none.
func childPID(t testing.TB) int {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		if fs := strings.Fields(string(b)); len(fs) > 0 {
			pid, _ := strconv.Atoi(fs[0])
			return pid
		}
	}
	return 0
}

// A PDF read page by page comes page after page as the reader gets to them, each with its
// number; one over the pages limit is refused with its page count; an error of the caller's
// stops the reader and is the read's error.
func TestReaderReadsAPDFPageByPage(t *testing.T) {
	ctx := context.Background()
	pdf := files.PDF([][]string{{"Page one says alpha."}, {}, {"Page three says charlie."}})
	var got []string
	n, err := newReader(t, tight).ReadPages(ctx, "r.pdf", pdf, func(n, of int, text string) error {
		got = append(got, strconv.Itoa(n)+"/"+strconv.Itoa(of)+" "+text)
		return nil
	})
	want := []string{"1/3 Page one says alpha.", "2/3 ", "3/3 Page three says charlie."}
	if err != nil || n != 3 || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("ReadPages = %d, %v, pages %q; want 3 pages %q", n, err, got, want)
	}
	few := tight
	few.Pages = 2
	var lim *media.LimitError
	if _, err := newReader(t, few).ReadPages(ctx, "r.pdf", pdf, func(int, int, string) error { return nil }); !errors.As(err, &lim) || lim.Pages != 3 {
		t.Fatalf("a 3-page PDF under a 2-page limit: %v, want the limit with its 3 pages", err)
	}
	stop := errors.New("enough")
	if _, err := newReader(t, tight).ReadPages(ctx, "r.pdf", pdf, func(int, int, string) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("a read its caller stopped: %v, want the caller's error", err)
	}
	if _, err := newReader(t, tight).ReadPages(ctx, "scan.pdf", files.PDF([][]string{{}, {}}), func(int, int, string) error { return nil }); !errors.Is(err, media.ErrNoText) {
		t.Fatalf("a PDF without text: %v, want ErrNoText", err)
	}
}
