package media_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"

	"relaybot/internal/testkit/files"
	"relaybot/media"
)

func TestReadTellsTextPDFAndBinaryApart(t *testing.T) {
	latin1, _ := charmap.Windows1252.NewEncoder().String("café naïve déjà vu")
	utf16, _ := unicode.UTF16(unicode.LittleEndian, unicode.UseBOM).NewEncoder().String("hello from Windows\r\n")
	utf16NoBOM, _ := unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM).NewEncoder().String("a log without a byte-order mark")
	koi8, _ := charmap.KOI8R.NewEncoder().String("привет мир")
	pdf := files.PDF([][]string{{"Page one says alpha."}, {"Page two says bravo."}, {"Page three says charlie."}})
	for _, tc := range []struct {
		name, file, mime string
		data             []byte
		want             string
		format           string
		unsupported      string
	}{
		{name: "utf-8 markdown", file: "notes.md", mime: "text/markdown", data: []byte("# Title\n\nBody ✓"), want: "# Title\n\nBody ✓", format: media.FormatText},
		{name: "windows-1252 without a declared charset", file: "old.txt", data: []byte(latin1), want: "café naïve déjà vu", format: media.FormatText},
		{name: "utf-16 with a byte-order mark", file: "win.txt", data: []byte(utf16), want: "hello from Windows\n", format: media.FormatText},
		{name: "utf-16 without a mark", file: "x.log", data: []byte(utf16NoBOM), want: "a log without a byte-order mark", format: media.FormatText},
		{name: "declared koi8-r", file: "ru.txt", mime: "text/plain; charset=koi8-r", data: []byte(koi8), want: "привет мир", format: media.FormatText},
		{name: "json named as octet-stream", file: "data.json", mime: "application/octet-stream", data: []byte(`{"a": 1}`), want: `{"a": 1}`, format: media.FormatText},
		{name: "pdf", file: "report.pdf", mime: "application/pdf", data: pdf, want: "Page two says bravo.", format: media.FormatPDF},
		{name: "unknown binary", file: "blob.bin", mime: "application/octet-stream", data: []byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 3, 0}, unsupported: ".bin"},
		{name: "zip", file: "a.zip", mime: "application/zip", data: []byte("PK\x03\x04\x14\x00\x00\x00\x08\x00"), unsupported: "application/zip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := media.Read(tc.file, tc.mime, tc.data, media.Limits{})
			if tc.unsupported != "" {
				var u *media.UnsupportedError
				if !errors.As(err, &u) || u.Type != tc.unsupported {
					t.Fatalf("Read = %q, %v; want the file refused as %s", doc.Text, err, tc.unsupported)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if doc.Format != tc.format || !strings.Contains(doc.Text, tc.want) {
				t.Fatalf("Read = %s %q, want %s containing %q", doc.Format, doc.Text, tc.format, tc.want)
			}
			if tc.format == media.FormatPDF && doc.Pages != 3 {
				t.Fatalf("pages = %d, want 3", doc.Pages)
			}
		})
	}
}

func TestPDFKeepsWordsApartAcrossLines(t *testing.T) {
	doc, err := media.Read("a.pdf", "", files.PDF([][]string{{"first line ends", "second line starts"}}), media.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(doc.Text, "ends\nsecond") {
		t.Fatalf("text %q: the lines ran together", doc.Text)
	}
}

func TestCutSaysHowMuchWasLeftOut(t *testing.T) {
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, "line %04d of the log\n", i)
	}
	text := b.String()
	tokens := func(s string) int { return (len(s) + 3) / 4 }
	out, left := media.Cut(text, 1000, tokens)
	if left == 0 || tokens(out) > 1100 || tokens(out) < 900 {
		t.Fatalf("cut to %d tokens, %d left out; want about 1000 tokens", tokens(out), left)
	}
	if !strings.Contains(out, fmt.Sprintf("%d of %d characters", left, len(text))) {
		t.Fatalf("no note of what was left out: %q", out[len(out)-200:])
	}
	if same, n := media.Cut("short", 1000, tokens); same != "short" || n != 0 {
		t.Fatalf("Cut of a short text = %q, %d", same, n)
	}
}
