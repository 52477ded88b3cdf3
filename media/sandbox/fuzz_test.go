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

// FuzzReadDocument sends any bytes, as a PDF and as a text file, through the reader process:
// the caller always gets a document or an error within the wall-clock limit, never a crash or
// a hang, whatever the PDF library does inside the reader. The seeds are issue 36's hostile
// PDFs.
func FuzzReadDocument(f *testing.F) {
	for _, data := range files.HostilePDFs() {
		f.Add(data)
	}
	f.Add(files.PDF([][]string{{"Page one."}, {"Page two."}}))
	f.Add([]byte("plain text, café"))
	f.Add([]byte{0xFF, 0xFE, 'h', 0, 'i', 0})
	r := newReader(f, sandbox.Limits{Memory: 128 << 20, CPU: time.Second, Wall: 20 * time.Second, Inflated: 16 << 20, Concurrent: 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, name := range []string{"f.pdf", "f.txt"} {
			start := time.Now()
			doc, err := r.ReadDocument(context.Background(), name, "", data)
			if took := time.Since(start); took > 30*time.Second {
				t.Fatalf("%s: the read took %v, past the reader's limits", name, took)
			}
			if err == nil && !utf8.ValidString(doc.Text) && doc.Format == media.FormatText {
				t.Fatalf("%s: text that is not UTF-8: %q", name, doc.Text)
			}
			var lim *media.LimitError
			if errors.As(err, &lim) && lim.What == "" {
				t.Fatalf("%s: a limit error that names no limit", name)
			}
		}
	})
}
