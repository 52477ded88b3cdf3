package native

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzPageText reads any bytes as fetch_url reads a page (HTML to text, or text in its
// declared charset: parsers of untrusted bytes): a text in valid UTF-8 or an error, never a
// panic.
func FuzzPageText(f *testing.F) {
	f.Add("text/html; charset=utf-8", []byte("<html><head><title>T</title></head><body><h1>Hi</h1><p>café<ul><li>one</ul></body></html>"))
	f.Add("text/html; charset=windows-1252", []byte("<p>caf\xe9</p><script>x()</script>"))
	f.Add("", []byte(strings.Repeat("<div>", 2000)+"deep"))
	f.Add("text/plain; charset=koi8-r", []byte{0xD0, 0xD2, 0xC9, 0xD7})
	f.Add("application/octet-stream", []byte{0x7f, 'E', 'L', 'F'})
	f.Fuzz(func(t *testing.T, ctype string, body []byte) {
		text, err := pageText("https://example.org/", ctype, body)
		if err == nil && !utf8.ValidString(text) {
			t.Fatalf("page read as text that is not UTF-8: %q", text)
		}
	})
}
