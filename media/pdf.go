package media

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/ledongthuc/pdf"
)

// readPDF extracts the text layer of a PDF, page by page, pages separated by a blank line. The
// library panics on some malformed files; that is an error here. It can also loop, allocate
// without bound or kill the process (a fatal error recover cannot catch): the reader process
// bounds those; the pages and decompressed bytes are bounded here, before the library starts.
func readPDF(data []byte, lim Limits) (Document, error) {
	var b strings.Builder
	n, err := ReadPDFPages(data, lim, func(_, _ int, page string) error {
		if page != "" {
			if b.Len() > 0 {
				b.WriteString("\n\n")
			}
			b.WriteString(page)
		}
		return nil
	})
	if err != nil {
		return Document{}, err
	}
	if b.Len() == 0 {
		return Document{}, ErrNoText
	}
	return Document{Text: b.String(), Format: FormatPDF, Pages: n}, nil
}

// ReadPDFPages reads the text layer of a PDF page by page, calling page with each page's
// number (from 1), the page count and its text ("" for a page without text), in order, and
// returns the page count. An error page returns ends the read with that error. The limits are
// checked before the library starts: a PDF over them is a *LimitError (its Pages set when the
// page count broke the limit). Like Read it holds no limit of memory or time: run it in a
// reader process (media/sandbox).
func ReadPDFPages(data []byte, lim Limits, page func(n, of int, text string) error) (n int, err error) {
	lim = lim.withDefaults()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the PDF could not be read: %v", r)
		}
	}()
	if err := checkInflated(data, lim.Inflated); err != nil {
		return 0, err
	}
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return 0, fmt.Errorf("the PDF could not be read: %w", err)
	}
	n = r.NumPage()
	if n > lim.Pages {
		return 0, &LimitError{What: fmt.Sprintf("more than %d pages", lim.Pages), Pages: n}
	}
	for i := 1; i <= n; i++ {
		text := ""
		if p := r.Page(i); !p.V.IsNull() {
			text = pageText(p.Content().Text)
		}
		if err := page(i, n, text); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// pageText lays a page's glyphs out as lines: a glyph lower or higher than the one before by
// half its font size starts a line, a gap wider than a tenth of the font size is a space. The
// library's own GetPlainText joins words across lines and runs ("Section1echo"); measured
// against pdftotext this finds 85-100% of the words instead of 67-80%
// (docs/decisions/026-voice-and-files.md).
func pageText(glyphs []pdf.Text) string {
	var b strings.Builder
	for i, g := range glyphs {
		if i > 0 {
			prev := glyphs[i-1]
			switch {
			case math.Abs(g.Y-prev.Y) > g.FontSize*0.5:
				b.WriteByte('\n')
			case g.X-(prev.X+prev.W) > g.FontSize*0.1 && g.S != " " && prev.S != " ":
				b.WriteByte(' ')
			}
		}
		b.WriteString(g.S)
	}
	return strings.TrimSpace(b.String())
}

// checkInflated decompresses every zlib (FlateDecode) stream of a PDF, discarding the bytes,
// and returns a *LimitError when they hold more than max bytes together. Streams never nest
// (an object stream holds no streams), so every stream the library could inflate starts at a
// "stream" keyword of the file itself; a stream in another filter fails zlib's header check
// at once.
func checkInflated(data []byte, max int64) error {
	total := int64(0)
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte("stream"))
		if j < 0 {
			return nil
		}
		start := i + j + len("stream")
		i = start
		switch {
		case bytes.HasPrefix(data[start:], []byte("\r\n")):
			start += 2
		case bytes.HasPrefix(data[start:], []byte("\n")), bytes.HasPrefix(data[start:], []byte("\r")):
			start++
		default:
			continue
		}
		zr, err := zlib.NewReader(bytes.NewReader(data[start:]))
		if err != nil {
			continue
		}
		n, _ := io.Copy(io.Discard, io.LimitReader(zr, max-total+1))
		if total += n; total > max {
			return &LimitError{What: fmt.Sprintf("more than %d MB once decompressed", max>>20)}
		}
	}
}
