package sandbox_test

import (
	"context"
	"errors"
	"testing"
	"time"
	"unicode/utf8"

	"relaybot/internal/testkit/files"
	"relaybot/media"
	"relaybot/media/sandbox"
)

// FuzzReadDocument sends any bytes as a PDF through the reader process: the caller always gets
// a document or an error within the wall-clock limit, never a crash or a hang, whatever the
// PDF library does inside the reader. The seeds are issue 36's hostile PDFs. (Text files are
// fuzzed in process by media's FuzzReadText: one process start an input is slow enough.)
func FuzzReadDocument(f *testing.F) {
	for _, data := range files.HostilePDFs() {
		f.Add(data)
	}
	f.Add(files.PDF([][]string{{"Page one."}, {"Page two."}}))
	r := newReader(f, sandbox.Limits{Memory: 128 << 20, CPU: time.Second, Wall: 20 * time.Second, Inflated: 16 << 20, Concurrent: 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		doc, err := r.ReadDocument(context.Background(), "f.pdf", "application/pdf", data)
		if took := time.Since(start); took > 30*time.Second {
			t.Fatalf("the read took %v, past the reader's limits", took)
		}
		if err == nil && !utf8.ValidString(doc.Text) && doc.Format == media.FormatText {
			t.Fatalf("text that is not UTF-8: %q", doc.Text)
		}
		var lim *media.LimitError
		if errors.As(err, &lim) && lim.What == "" {
			t.Fatal("a limit error that names no limit")
		}
	})
}

// FuzzReadPages sends any bytes as a PDF through the reader process page by page: the caller
// gets pages in order and a count, or an error, within the wall-clock limit; never a crash or a
// hang.
func FuzzReadPages(f *testing.F) {
	for _, data := range files.HostilePDFs() {
		f.Add(data)
	}
	f.Add(files.PDF([][]string{{"Page one."}, {}, {"Page three."}}))
	r := newReader(f, sandbox.Limits{Memory: 128 << 20, CPU: time.Second, Wall: 20 * time.Second, Inflated: 16 << 20, Concurrent: 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		next := 1
		n, err := r.ReadPages(context.Background(), "f.pdf", data, func(page, of int, text string) error {
			if page != next || page > of || !utf8.ValidString(text) {
				t.Errorf("page %d of %d (%q) after page %d", page, of, text, next-1)
			}
			next++
			return nil
		})
		if took := time.Since(start); took > 30*time.Second {
			t.Fatalf("the read took %v, past the reader's limits", took)
		}
		if err == nil && n != next-1 {
			t.Fatalf("%d pages counted, %d told", n, next-1)
		}
	})
}
