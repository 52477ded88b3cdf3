// Package sandbox reads the bytes users send (documents, audio) in a reader process: the bot's
// own binary started again in reader mode, with a memory cap, CPU and wall-clock deadlines, and
// caps on pages, decompressed bytes and output. A file that breaks a limit (or kills the reader
// outright, as a fatal error of a PDF library does) is an error of that one file; the bot, its
// memory and its other chats never notice. Cancelling the context (/stop, shutdown) kills the
// reader's process group at once.
//
// The binary that uses a Reader must call Main first thing in main (and a test binary in
// TestMain): in reader mode Main serves the one request and exits.
package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"relaybot/media"
)

// Limits bound one read.
type Limits struct {
	// Memory caps the reader process's heap and data (default DefaultMemory).
	Memory int64
	// CPU is the most processor time one read may take (default DefaultCPU).
	CPU time.Duration
	// Wall is the most time one read may take, waiting included (default DefaultWall).
	Wall time.Duration
	// Pages and Inflated bound a PDF (media.Limits' defaults when zero).
	Pages    int
	Inflated int64
	// Output caps the text read out of one document (default DefaultOutput); longer text is cut.
	Output int64
	// Concurrent is the most reader processes at once (default the number of CPUs); more reads
	// wait their turn.
	Concurrent int
}

// Defaults of Limits.
const (
	DefaultMemory = 512 << 20
	DefaultCPU    = 20 * time.Second
	DefaultWall   = 40 * time.Second
	DefaultOutput = 16 << 20
)

func (l Limits) withDefaults() Limits {
	l.Memory = media.OrDefault(l.Memory, DefaultMemory)
	l.CPU = media.OrDefault(l.CPU, DefaultCPU)
	l.Wall = media.OrDefault(l.Wall, DefaultWall)
	l.Output = media.OrDefault(l.Output, DefaultOutput)
	l.Concurrent = media.OrDefault(l.Concurrent, runtime.NumCPU())
	return l
}

// jobEnv names the variable that puts the binary in reader mode; its value is the job.
const jobEnv = "RELAYBOT_READER_JOB"

// Kinds of job.
const (
	kindDocument = "document"
	kindAudio    = "audio"
	kindPages    = "pages" // a PDF page by page, each page a line as it is read
)

// job is what the reader process is asked to do; the bytes come on its stdin.
type job struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	MIME   string `json:"mime"`
	Limits Limits `json:"limits"`
}

// result is the first line the reader process writes; a document's text follows it.
type result struct {
	Format      string        `json:"format,omitempty"`
	Charset     string        `json:"charset,omitempty"`
	Pages       int           `json:"pages,omitempty"`
	Duration    time.Duration `json:"duration,omitempty"`
	Err         string        `json:"err,omitempty"`
	Unsupported string        `json:"unsupported,omitempty"` // the type of a file that is not a document
	Limit       string        `json:"limit,omitempty"`       // the limit a file broke
	NoText      bool          `json:"no_text,omitempty"`
	OverPages   int           `json:"over_pages,omitempty"` // the page count of a PDF over the pages limit
}

// Reader starts reader processes. It is safe for concurrent use.
type Reader struct {
	path   string
	limits Limits
	slots  chan struct{}
}

// New returns a Reader that runs this very binary (os.Executable) in reader mode under lim.
func New(lim Limits) (*Reader, error) {
	path, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("sandbox: the reader's binary: %w", err)
	}
	lim = lim.withDefaults()
	return &Reader{path: path, limits: lim, slots: make(chan struct{}, lim.Concurrent)}, nil
}

// ReadDocument reads a document as media.Read does, in a reader process. A file that breaks
// a limit, or that the reader dies of, is a *media.LimitError; the other errors are
// media.Read's (*media.UnsupportedError, media.ErrNoText, an unreadable PDF) or the context's.
func (r *Reader) ReadDocument(ctx context.Context, name, mimeType string, data []byte) (media.Document, error) {
	res, text, err := r.run(ctx, job{Kind: kindDocument, Name: name, MIME: mimeType}, data)
	if err != nil {
		return media.Document{}, err
	}
	switch {
	case res.Unsupported != "":
		return media.Document{}, &media.UnsupportedError{Type: res.Unsupported}
	case res.NoText:
		return media.Document{}, media.ErrNoText
	case res.Err != "":
		return media.Document{}, errors.New(res.Err)
	}
	return media.Document{Text: string(text), Format: res.Format, Charset: res.Charset, Pages: res.Pages}, nil
}

// AudioDuration measures a recording's length from its container (audio.Duration), in a
// reader process. A recording it cannot measure is an error wrapping audio.ErrUnmeasured.
func (r *Reader) AudioDuration(ctx context.Context, name, mimeType string, data []byte) (time.Duration, error) {
	res, _, err := r.run(ctx, job{Kind: kindAudio, Name: name, MIME: mimeType}, data)
	if err != nil {
		return 0, err
	}
	if res.Err != "" {
		return 0, &unmeasuredError{msg: res.Err}
	}
	return res.Duration, nil
}

// run starts one reader process for j with data on its stdin and returns its result and the
// bytes after it.
func (r *Reader) run(ctx context.Context, j job, data []byte) (result, []byte, error) {
	out := &capped{max: r.limits.Output + 64<<10}
	if err := r.exec(ctx, j, data, out, func() bool { return out.over }); err != nil {
		return result{}, nil, err
	}
	line, rest, ok := bytes.Cut(out.b.Bytes(), []byte("\n"))
	var res result
	if !ok || json.Unmarshal(line, &res) != nil {
		return result{}, nil, fmt.Errorf("sandbox: the reader answered %q", firstLine(out.b.Bytes()))
	}
	if res.Limit != "" {
		return result{}, nil, &media.LimitError{What: res.Limit}
	}
	return res, rest, nil
}

// exec runs one reader process for j with data on its stdin and its stdout written to stdout,
// which reports through over whether it stopped the process's output for being too long.
func (r *Reader) exec(ctx context.Context, j job, data []byte, stdout io.Writer, over func() bool) error {
	select {
	case r.slots <- struct{}{}:
		defer func() { <-r.slots }()
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	j.Limits = r.limits
	spec, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("sandbox: the job: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, r.limits.Wall)
	defer cancel()
	// -test.run=^$ makes a test binary that forgot to call Main run no tests rather than all
	// of them; the bot's binary never reads its arguments in reader mode.
	cmd := exec.CommandContext(wctx, r.path, "-test.run=^$")
	cmd.Env = append(os.Environ(), jobEnv+"="+string(spec))
	cmd.Stdin = bytes.NewReader(data)
	var stderr capped
	stderr.max = 4 << 10
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	isolate(cmd)
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if wctx.Err() != nil {
		return &media.LimitError{What: fmt.Sprintf("more than %s to read", r.limits.Wall)}
	}
	if err != nil || over() {
		return &media.LimitError{What: died(err, over(), stderr.b.String(), r.limits)}
	}
	return nil
}

// died names the limit a reader process that ended without a result most likely broke, from
// how it ended and the start of what it wrote to stderr.
func died(err error, over bool, stderr string, lim Limits) string {
	var exit *exec.ExitError
	switch {
	case over:
		return "too much text"
	case strings.Contains(stderr, "out of memory"), strings.Contains(stderr, "cannot allocate memory"):
		return fmt.Sprintf("more than %d MB of memory", lim.Memory>>20)
	case errors.As(err, &exit) && exit.ProcessState != nil:
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return fmt.Sprintf("more than %s of processor time", lim.CPU)
		}
		return fmt.Sprintf("the reader stopped: %s", exit.ProcessState)
	}
	return fmt.Sprintf("the reader could not run: %v", err)
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b[:min(len(b), 200)]), "\n")
	return s
}

// capped keeps the first max bytes written to it; past that it fails the write, which ends
// the copy from the process, and remembers that it did.
type capped struct {
	b    bytes.Buffer
	max  int64
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - int64(c.b.Len()); int64(len(p)) > room {
		c.b.Write(p[:max(room, 0)])
		c.over = true
		return 0, errors.New("sandbox: the reader wrote more than its output cap")
	}
	return c.b.Write(p)
}

// unmeasuredError is the error of a recording the reader could not measure.
type unmeasuredError struct{ msg string }

func (e *unmeasuredError) Error() string { return e.msg }

// Unwrap makes the error audio.ErrUnmeasured to errors.Is.
func (e *unmeasuredError) Unwrap() error { return errUnmeasured }
