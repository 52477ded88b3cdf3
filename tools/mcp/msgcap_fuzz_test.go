package mcp

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// overLimit says whether b holds a message over max bytes: a line (lines) or the whole of it.
func overLimit(b []byte, max int, frame framing) bool {
	switch frame {
	case whole:
		return len(b) > max
	case lines:
		for _, line := range bytes.Split(b, []byte("\n")) {
			if len(line) > max {
				return true
			}
		}
	}
	return false
}

// FuzzCapReader holds the server message bound to its contract on any bytes, cut into reads of
// any size: what it passes is the stream's beginning, a stream within the limit passes whole, and
// one line (or whole body) over it is refused.
func FuzzCapReader(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\"}\n{\"id\":1}\n"), 8, uint8(0), true)
	f.Add([]byte("event: message\r\ndata: {}\r\n\r\ndata: 1\n\n"), 12, uint8(1), false)
	f.Add([]byte("{\n\n\n\n\n\n\n\n}"), 4, uint8(2), true)
	f.Add([]byte("\r\r\r\r\r\r\r\r\r\n"), 3, uint8(0), false)
	f.Fuzz(func(t *testing.T, in []byte, max int, frameN uint8, oneByte bool) {
		if max <= 0 || max > 1<<20 {
			max = 1 + max&0xff
			if max <= 0 {
				max = 1
			}
		}
		frame := framing(frameN % 3)
		var r io.Reader = bytes.NewReader(in)
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		trip := newCapTrip()
		got, err := io.ReadAll(newCapReader(r, "fuzz", max, frame, trip))
		if !bytes.HasPrefix(in, got) {
			t.Fatalf("passed %q, not a beginning of %q", got, in)
		}
		var tooLarge *MessageTooLargeError
		if err != nil && !errors.As(err, &tooLarge) {
			t.Fatalf("err = %v", err)
		}
		if (err != nil) != (trip.Err() != nil) {
			t.Fatalf("read error %v, recorded %v", err, trip.Err())
		}
		if err == nil && !bytes.Equal(got, in) {
			t.Fatalf("no error, but passed %d of %d bytes", len(got), len(in))
		}
		if len(in) <= max && err != nil {
			t.Fatalf("%d bytes refused under a limit of %d", len(in), max)
		}
		if frame != events && overLimit(in, max, frame) != (err != nil) {
			t.Fatalf("frame %d, limit %d: over = %v, err = %v", frame, max, overLimit(in, max, frame), err)
		}
	})
}
