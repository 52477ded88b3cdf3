package extract

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// htmlSkipped are the elements whose content is not the page's text: code, styles, navigation,
// the head's title, embedded media and form choices.
var htmlSkipped = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Nav: true, atom.Noscript: true, atom.Template: true,
	atom.Title: true, atom.Svg: true, atom.Iframe: true, atom.Object: true, atom.Canvas: true,
	atom.Select: true, atom.Math: true,
}

// htmlBlocks are the elements that start and end a paragraph.
var htmlBlocks = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Section: true, atom.Article: true, atom.Main: true,
	atom.Header: true, atom.Footer: true, atom.Aside: true, atom.Blockquote: true, atom.Ul: true,
	atom.Ol: true, atom.Dl: true, atom.Table: true, atom.Pre: true, atom.Figure: true,
	atom.Form: true, atom.Hr: true, atom.Address: true, atom.Details: true, atom.Fieldset: true,
	atom.Body: true, atom.Html: true,
}

// htmlLines are the elements that start a line.
var htmlLines = map[atom.Atom]bool{
	atom.Li: true, atom.Tr: true, atom.Br: true, atom.Dt: true, atom.Dd: true, atom.Caption: true,
	atom.Summary: true, atom.Figcaption: true,
}

// headingLevel returns 1 to 6 for h1 to h6, else 0.
func headingLevel(a atom.Atom) int {
	switch a {
	case atom.H1:
		return 1
	case atom.H2:
		return 2
	case atom.H3:
		return 3
	case atom.H4:
		return 4
	case atom.H5:
		return 5
	case atom.H6:
		return 6
	}
	return 0
}

// readHTML reads a page's visible text with the tokenizer of golang.org/x/net/html (no tree,
// so no depth to bound; the text is at most the page's own bytes and is checked against
// max_text_bytes as it grows): script, style, nav and the like dropped; headings h1-h6 as
// their own lines, each starting a section under its heading path; paragraphs and blocks
// separated by blank lines; list items as "- " lines; a table's rows as lines of cells
// separated by " | ".
func readHTML(ctx context.Context, page string, l Limits) (string, []block, error) {
	h := htmlState{blockStart: 0}
	z := html.NewTokenizer(strings.NewReader(page))
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return "", nil, context.Cause(ctx)
		}
		tt := z.Next()
		if tt == html.ErrorToken {
			break // io.EOF: the tokenizer reads a string, nothing else can fail
		}
		tok := z.Token()
		switch tt {
		case html.TextToken:
			h.text(tok.Data)
		case html.StartTagToken:
			h.start(tok.DataAtom)
		case html.SelfClosingTagToken:
			if tok.DataAtom == atom.Br || tok.DataAtom == atom.Hr {
				h.start(tok.DataAtom)
			}
		case html.EndTagToken:
			h.end(tok.DataAtom)
		}
		if int64(h.out.Len()) > l.MaxTextBytes {
			return "", nil, &LimitError{Key: "max_text_bytes", Limit: l.MaxTextBytes, Got: int64(h.out.Len()), AtLeast: true}
		}
	}
	if h.heading > 0 {
		h.endHeading() // a heading never closed ends with the page
	}
	h.paragraph()
	return h.out.String(), h.blocks, nil
}

// htmlState is readHTML's text as it is written.
type htmlState struct {
	out    strings.Builder
	blocks []block
	// skipped counts the open elements of each kind whose text is dropped; pre the open pres.
	skipped map[atom.Atom]int
	pre     int
	// lineOpen says the line being written has text; space that a space is owed before the
	// next text on it; cells the cells of the table row so far.
	lineOpen, space bool
	cells           int
	blockStart      int
	// heading is the level of the heading being read, its text starting at headingStart.
	heading, headingStart int
	titles                [6]string
	headings              []string
	section               int
}

func (h *htmlState) skipping() bool {
	for _, n := range h.skipped {
		if n > 0 {
			return true
		}
	}
	return false
}

func (h *htmlState) start(a atom.Atom) {
	if htmlSkipped[a] {
		if h.skipped == nil {
			h.skipped = map[atom.Atom]int{}
		}
		h.skipped[a]++
		return
	}
	if h.skipping() {
		return
	}
	switch {
	case headingLevel(a) > 0:
		if h.heading > 0 {
			h.endHeading() // a heading in a heading: the first ends there
		}
		h.paragraph()
		h.heading, h.headingStart = headingLevel(a), h.out.Len()
	case htmlBlocks[a]:
		h.paragraph()
		if a == atom.Pre {
			h.pre++
		}
	case a == atom.Li:
		h.line()
		h.write("- ")
		h.space = false
	case a == atom.Tr:
		h.line()
		h.cells = 0
	case a == atom.Td || a == atom.Th:
		if h.cells > 0 {
			h.write(" | ")
			h.space = false
		}
		h.cells++
	case htmlLines[a]:
		h.line()
	}
}

func (h *htmlState) end(a atom.Atom) {
	if htmlSkipped[a] {
		if h.skipped[a] > 0 {
			h.skipped[a]--
		}
		return
	}
	if h.skipping() {
		return
	}
	switch {
	case headingLevel(a) > 0 && h.heading > 0:
		h.endHeading()
	case htmlBlocks[a]:
		if a == atom.Pre && h.pre > 0 {
			h.pre--
		}
		h.paragraph()
	case htmlLines[a]:
		h.line()
	}
}

// endHeading starts a section under the heading just read, its line the section's first block.
func (h *htmlState) endHeading() {
	level := h.heading
	h.heading = 0
	title := strings.Join(strings.Fields(h.out.String()[h.headingStart:]), " ")
	if title == "" {
		return
	}
	h.titles[level-1] = title
	clear(h.titles[level:])
	h.headings = nil
	for _, t := range h.titles[:level] {
		if t != "" {
			h.headings = append(h.headings, t)
		}
	}
	h.section++
	h.paragraph()
}

// text writes a text token: white space collapsed to one space outside a pre.
func (h *htmlState) text(s string) {
	if h.skipping() {
		return
	}
	if h.pre > 0 {
		s = strings.ReplaceAll(s, "\r\n", "\n")
		h.write(s)
		h.lineOpen = !strings.HasSuffix(s, "\n")
		return
	}
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if unicode.IsSpace(r) {
			h.space = h.lineOpen
		} else {
			if h.space {
				h.write(" ")
			}
			h.space = false
			h.write(s[:size])
		}
		s = s[size:]
	}
}

func (h *htmlState) write(s string) {
	h.out.WriteString(s)
	h.lineOpen = true
}

// line ends the line being written.
func (h *htmlState) line() {
	if h.lineOpen {
		h.out.WriteByte('\n')
	}
	h.lineOpen, h.space = false, false
}

// paragraph ends the block being written: its span (trimmed) is a block of the current section.
func (h *htmlState) paragraph() {
	if h.heading > 0 {
		return // a block inside a heading is part of the heading's line
	}
	if s, e := trimSpan(h.out.String(), h.blockStart, h.out.Len()); s < e {
		h.blocks = append(h.blocks, block{start: s, end: e, section: h.section, headings: h.headings})
		h.line()
		h.out.WriteByte('\n')
	}
	h.lineOpen, h.space = false, false
	h.blockStart = h.out.Len()
}
