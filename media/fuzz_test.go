package media

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"relaybot/internal/testkit/files"
)

// FuzzReadText reads any bytes as a text file with any declared charset (charset detection and
// decoding are parsers of untrusted bytes): the result is valid UTF-8 without NUL bytes, or
// the file is unsupported; never a panic.
func FuzzReadText(f *testing.F) {
	f.Add([]byte("# Title\n\nBody ✓"), "text/markdown")
	f.Add([]byte{0xFF, 0xFE, 'h', 0, 'i', 0}, "")
	f.Add([]byte{0xD0, 0xD2, 0xC9, 0xD7}, "text/plain; charset=koi8-r")
	f.Add([]byte("caf\xe9"), "text/plain; charset=nonsense")
	f.Add([]byte{'a', 0, 'b', 0, 'c', 0, 'd', 0}, "")
	f.Fuzz(func(t *testing.T, data []byte, mimeType string) {
		if IsPDF("f.txt", mimeType, data) {
			return // PDFs are read in the reader process only (media/sandbox's fuzz target)
		}
		doc, err := Read("f.txt", mimeType, data, Limits{})
		if err != nil {
			return
		}
		if !utf8.ValidString(doc.Text) || bytes.IndexByte([]byte(doc.Text), 0) >= 0 {
			t.Fatalf("read %q (%s) as %q", data, mimeType, doc.Text)
		}
	})
}

// FuzzCheckInflated runs the decompressed-bytes check of PDFs over any bytes: it ends, and
// never lets more than the cap through unsaid.
func FuzzCheckInflated(f *testing.F) {
	for _, data := range files.HostilePDFs() {
		f.Add(data)
	}
	f.Add(files.PDF([][]string{{"Page one."}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = checkInflated(data, 1<<20)
	})
}
