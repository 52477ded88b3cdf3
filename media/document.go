// Package media turns the files users send into what a model reads: documents into text (plain
// text, Markdown, code, CSV, JSON and logs in any common charset; PDFs by their text layer),
// cut to a budget with a note saying how much was left out. It knows nothing of platforms or
// models: the pipeline hands it bytes and a budget.
package media

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"path"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/unicode"
)

// Formats of a document read as text.
const (
	FormatText = "text"
	FormatPDF  = "pdf"
)

// Document is a file read as text.
type Document struct {
	// Text is the document's text in UTF-8.
	Text string
	// Format is FormatText or FormatPDF.
	Format string
	// Charset is the encoding a text file was read in ("utf-8", "utf-16le", "windows-1252", ...).
	Charset string
	// Pages is the page count of a PDF.
	Pages int
}

// UnsupportedError is the error of a file that is neither text nor a PDF.
type UnsupportedError struct {
	// Type names the file the way a user knows it: its MIME type, else its extension.
	Type string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("cannot read %s files", e.Type)
}

// Limits bound what reading one PDF may cost beyond its own bytes.
type Limits struct {
	// Pages is the most pages a PDF may declare (default DefaultMaxPages).
	Pages int
	// Inflated is the most bytes its compressed streams may hold together once decompressed
	// (default DefaultMaxInflated).
	Inflated int64
}

// Defaults of Limits.
const (
	DefaultMaxPages    = 2000
	DefaultMaxInflated = 256 << 20
)

func (l Limits) withDefaults() Limits {
	l.Pages = OrDefault(l.Pages, DefaultMaxPages)
	l.Inflated = OrDefault(l.Inflated, DefaultMaxInflated)
	return l
}

// LimitError is the error of a file that breaks a limit of the reader: too many pages, too
// many bytes once decompressed, too much memory or time.
type LimitError struct {
	// What names the limit in words a user reads: "more than 2000 pages", "the reader's memory".
	What string
	// Pages is the page count of a PDF that broke the pages limit, 0 otherwise.
	Pages int
}

func (e *LimitError) Error() string {
	return "it breaks the reader's limits (" + e.What + ")"
}

// ErrNoText is the error of a PDF without a text layer (a scan).
var ErrNoText = errors.New("the PDF has no text layer (a scanned document?)")

// Read reads a document's bytes as text: a PDF (by its magic bytes, MIME type or name) by its
// text layer, anything else as text when its bytes are text in a charset it can tell. A
// declared charset (mimeType's charset parameter) is used when the bytes are not UTF-8. A PDF
// over lim's pages or decompressed bytes is a *LimitError. Read holds no limit of memory or
// time of its own: the bytes users send are read in a reader process (media/sandbox) that does.
func Read(name, mimeType string, data []byte, lim Limits) (Document, error) {
	if IsPDF(name, mimeType, data) {
		return readPDF(data, lim)
	}
	text, cs, ok := decodeText(data, mimeType)
	if !ok {
		return Document{}, &UnsupportedError{Type: TypeName(name, mimeType)}
	}
	return Document{Text: text, Format: FormatText, Charset: cs}, nil
}

// IsPDF reports whether a file is a PDF.
func IsPDF(name, mimeType string, data []byte) bool {
	if bytes.HasPrefix(data, []byte("%PDF-")) {
		return true
	}
	mt, _, _ := mime.ParseMediaType(mimeType)
	return mt == "application/pdf" || strings.EqualFold(path.Ext(name), ".pdf") && len(data) == 0
}

// TypeName names a file's type for a user: its MIME type when it says something, else its
// extension, else "binary".
func TypeName(name, mimeType string) string {
	mt, _, _ := mime.ParseMediaType(mimeType)
	if mt != "" && mt != "application/octet-stream" {
		return mt
	}
	if ext := path.Ext(name); ext != "" {
		return ext
	}
	return "binary"
}

// decodeText returns data as UTF-8 text and the charset it was read in, or false when data is
// not text: a byte-order mark first, then valid UTF-8, then the declared charset, then UTF-16
// without a mark (NUL bytes in every other place), then windows-1252 for 8-bit text. Text has
// no NUL bytes and few control characters once decoded.
func decodeText(data []byte, mimeType string) (string, string, bool) {
	if len(data) == 0 {
		return "", "utf-8", true
	}
	var enc encoding.Encoding
	name := ""
	switch {
	case bytes.HasPrefix(data, []byte{0xEF, 0xBB, 0xBF}):
		return finish(string(data[3:]), "utf-8")
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}):
		enc, name = unicode.UTF16(unicode.LittleEndian, unicode.ExpectBOM), "utf-16le"
	case bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		enc, name = unicode.UTF16(unicode.BigEndian, unicode.ExpectBOM), "utf-16be"
	case bytes.IndexByte(data, 0) < 0 && utf8.Valid(data):
		return finish(string(data), "utf-8")
	}
	if enc == nil {
		if _, params, err := mime.ParseMediaType(mimeType); err == nil && params["charset"] != "" {
			if e, n := charset.Lookup(params["charset"]); e != nil {
				enc, name = e, n
			}
		}
	}
	if enc == nil {
		if le, be := nulPattern(data); le {
			enc, name = unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM), "utf-16le"
		} else if be {
			enc, name = unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM), "utf-16be"
		}
	}
	if enc == nil {
		if bytes.IndexByte(data, 0) >= 0 {
			return "", "", false
		}
		e, n, _ := charset.DetermineEncoding(data, "text/plain")
		enc, name = e, n
	}
	out, err := enc.NewDecoder().Bytes(data)
	if err != nil {
		return "", "", false
	}
	return finish(string(out), name)
}

// finish accepts decoded text that has no NUL bytes and at most one control character (other
// than tab, newline, carriage return and form feed) in a hundred characters.
func finish(s, cs string) (string, string, bool) {
	control, n := 0, 0
	for _, r := range s {
		n++
		switch {
		case r == 0:
			return "", "", false
		case r < 0x20 && r != '\t' && r != '\n' && r != '\r' && r != '\f', r == 0x7F, r == utf8.RuneError:
			control++
		}
	}
	if control*100 > n {
		return "", "", false
	}
	return strings.ReplaceAll(s, "\r\n", "\n"), cs, true
}

// nulPattern reports whether data looks like UTF-16 text of mostly ASCII characters without a
// byte-order mark: NUL bytes in most odd (little-endian) or even (big-endian) places.
func nulPattern(data []byte) (le, be bool) {
	n := min(len(data), 4096) &^ 1
	if n < 4 {
		return false, false
	}
	odd, even := 0, 0
	for i := 0; i < n; i += 2 {
		if data[i] == 0 {
			even++
		}
		if data[i+1] == 0 {
			odd++
		}
	}
	half := n / 2
	return odd*10 >= half*9 && even*10 < half, even*10 >= half*9 && odd*10 < half
}
