package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"unicode/utf8"

	"relaybot/media"
	"relaybot/media/audio"
)

// errUnmeasured is what an unmeasuredError is to errors.Is.
var errUnmeasured = audio.ErrUnmeasured

// Main serves one read and exits when the process was started as a reader by a Reader, and
// returns at once otherwise. Call it first thing in main, before anything else starts (and in
// TestMain, before m.Run).
func Main() {
	spec, ok := os.LookupEnv(jobEnv)
	if !ok {
		return
	}
	os.Exit(serve(spec, os.Stdin, os.Stdout))
}

// serve reads the job's bytes from in under the job's limits and writes the result to out:
// one JSON line, then a document's text. It returns the exit status.
func serve(spec string, in io.Reader, out io.Writer) int {
	var j job
	if err := json.Unmarshal([]byte(spec), &j); err != nil {
		fmt.Fprintf(os.Stderr, "reader: the job: %v\n", err)
		return 3
	}
	if err := confine(j.Limits); err != nil {
		fmt.Fprintf(os.Stderr, "reader: the limits: %v\n", err)
		return 3
	}
	data, err := io.ReadAll(in)
	if err != nil {
		fmt.Fprintf(os.Stderr, "reader: the input: %v\n", err)
		return 3
	}
	if j.Kind == kindPages {
		if err := servePages(j, data, out); err != nil {
			return 3
		}
		return 0
	}
	res, text := read(j, data)
	w := bufio.NewWriter(out)
	line, _ := json.Marshal(res)
	w.Write(line)
	w.WriteByte('\n')
	w.WriteString(text)
	if err := w.Flush(); err != nil {
		return 3
	}
	return 0
}

// read does the job in this process.
func read(j job, data []byte) (result, string) {
	if j.Kind == kindAudio {
		d, err := audio.Duration(data)
		if err != nil {
			return result{Err: err.Error()}, ""
		}
		return result{Duration: d}, ""
	}
	doc, err := media.Read(j.Name, j.MIME, data, media.Limits{Pages: j.Limits.Pages, Inflated: j.Limits.Inflated})
	var unsup *media.UnsupportedError
	var limit *media.LimitError
	switch {
	case errors.As(err, &unsup):
		return result{Unsupported: unsup.Type}, ""
	case errors.As(err, &limit):
		return result{Limit: limit.What}, ""
	case errors.Is(err, media.ErrNoText):
		return result{NoText: true}, ""
	case err != nil:
		return result{Err: err.Error()}, ""
	}
	return result{Format: doc.Format, Charset: doc.Charset, Pages: doc.Pages}, cut(doc.Text, j.Limits.Output)
}

// cut returns s cut to at most max bytes at a rune start.
func cut(s string, max int64) string {
	if max <= 0 || int64(len(s)) <= max {
		return s
	}
	end := int(max)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end]
}

// softLimit is the share of the memory cap the garbage collector works to stay under, before
// the hard cap (confine) ends the process.
func softLimit(lim Limits) {
	debug.SetMemoryLimit(lim.Memory * 3 / 4)
	debug.SetGCPercent(50)
}
