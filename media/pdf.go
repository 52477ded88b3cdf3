package media

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"github.com/ledongthuc/pdf"
)

// readPDF extracts the text layer of a PDF, page by page, pages separated by a blank line. The
// library panics on some malformed files; that is an error here, never a crash of the turn.
func readPDF(data []byte) (doc Document, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the PDF could not be read: %v", r)
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return Document{}, fmt.Errorf("the PDF could not be read: %w", err)
	}
	var b strings.Builder
	n := r.NumPage()
	for i := 1; i <= n; i++ {
		p := r.Page(i)
		if p.V.IsNull() {
			continue
		}
		if page := pageText(p.Content().Text); page != "" {
			if b.Len() > 0 {
				b.WriteString("\n\n")
			}
			b.WriteString(page)
		}
	}
	if b.Len() == 0 {
		return Document{}, ErrNoText
	}
	return Document{Text: b.String(), Format: FormatPDF, Pages: n}, nil
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
