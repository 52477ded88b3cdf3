package markdown

import (
	"bytes"
	stdhtml "html"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/util"
)

// Entity is a Telegram message entity; Offset and Length count UTF-16 code units.
type Entity struct {
	Type     string `json:"type"`
	Offset   int    `json:"offset"`
	Length   int    `json:"length"`
	URL      string `json:"url,omitempty"`
	Language string `json:"language,omitempty"`
}

// A quote longer than this many lines or UTF-16 units is sent as an expandable blockquote,
// which Telegram shows collapsed to its first lines.
const (
	expandableLines = 10
	expandableUnits = 800
)

// Telegram renders md as plain text plus Telegram entities, so nothing ever needs MarkdownV2
// escaping: bold, italic, strikethrough, inline code, pre with its language, text links
// (parentheses in URLs included), headings in bold, blockquotes (expandable when long), nested
// lists as indented bullets and numbers, and tables as a pre block with aligned columns.
// Entities nest properly; inner ones come before the entity that contains them.
func Telegram(md string) (string, []Entity) {
	src := []byte(md)
	w := &tgWriter{src: src}
	w.b.Grow(len(src)) // the text is about as long as its Markdown
	w.blocks(parse(src))
	return w.finish()
}

// tgWriter accumulates the text and entities of one message.
type tgWriter struct {
	src    []byte
	b      strings.Builder
	n      int // UTF-16 units written
	ents   []Entity
	breaks int    // line breaks owed before the next visible text
	indent string // written after each line break: the content column of the list item
	quoted bool   // inside a blockquote entity (Telegram does not nest them)
	lists  int    // lists open around the current block
	plain  bool   // collecting plain text (a table cell): no entities
}

// pos is a place in the output, in bytes and in UTF-16 units.
type pos struct{ byte, u16 int }

func (w *tgWriter) write(s string) {
	if s == "" {
		return
	}
	w.owedBreaks()
	w.raw(s)
}

// writeBytes writes v, as write writes string(v).
func (w *tgWriter) writeBytes(v []byte) {
	if len(v) == 0 {
		return
	}
	w.owedBreaks()
	w.b.Write(v)
	w.n += utf16LenBytes(v)
}

// owedBreaks writes the line breaks owed, and the indent after them, before visible text.
func (w *tgWriter) owedBreaks() {
	if w.breaks == 0 {
		return
	}
	if w.b.Len() > 0 {
		for range w.breaks {
			w.b.WriteByte('\n')
		}
		w.n += w.breaks
		w.raw(w.indent)
	}
	w.breaks = 0
}

func (w *tgWriter) raw(s string) {
	w.b.WriteString(s)
	w.n += utf16Len(s)
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r > 0xFFFF {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// utf16LenBytes is utf16Len(string(v)), without the copy.
func utf16LenBytes(v []byte) int {
	n := 0
	for _, r := range string(v) {
		if r > 0xFFFF {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// lineBreak owes k line breaks (at least) before the next text; none are written at the end.
func (w *tgWriter) lineBreak(k int) { w.breaks = max(w.breaks, k) }

// mark is where an entity starts: after any owed line breaks, so they stay outside it.
func (w *tgWriter) mark() pos {
	w.owedBreaks()
	return pos{w.b.Len(), w.n}
}

// entity adds e over the text written since start, unless that is empty or only whitespace
// (Telegram refuses such entities).
func (w *tgWriter) entity(start pos, e Entity) {
	if w.plain || strings.TrimSpace(w.b.String()[start.byte:]) == "" {
		return
	}
	e.Offset, e.Length = start.u16, w.n-start.u16
	w.ents = append(w.ents, e)
}

// finish trims the trailing whitespace Telegram would trim, clipping entities to match.
func (w *tgWriter) finish() (string, []Entity) {
	s := w.b.String()
	t := strings.TrimRight(s, " \t\n")
	end := w.n - utf16Len(s[len(t):])
	ents := w.ents[:0] // the writer is done with its entities: they are filtered in place
	for _, e := range w.ents {
		if e.Offset+e.Length > end {
			e.Length = end - e.Offset
		}
		if e.Length > 0 {
			ents = append(ents, e)
		}
	}
	if len(ents) == 0 {
		return t, nil
	}
	return t, ents
}

// blocks renders the children of n on their own lines, a blank line apart where the source
// had one: the model's layout is kept. A fold (an HTML <details> block, its <summary> and the
// blocks up to </details>) becomes an expandable blockquote: Telegram shows the summary and
// first lines, the rest on a tap.
func (w *tgWriter) blocks(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if c != n.FirstChild() {
			w.lineBreak(w.gap(c))
		}
		if h, ok := c.(*ast.HTMLBlock); ok && !w.plain {
			if summary, open := foldOpener(w.lines(h)); open {
				c = w.fold(c, summary)
				w.lineBreak(2)
				continue
			}
			if foldCloser(w.lines(h)) {
				continue // the end of a fold whose start another message carries
			}
		}
		w.block(c)
	}
}

var summaryRe = regexp.MustCompile(`(?is)<summary>(.*?)</summary>`)

// foldOpener reports whether an HTML block opens a fold (<details>), with its summary's text.
func foldOpener(s string) (summary string, ok bool) {
	t := strings.ToLower(strings.TrimSpace(s))
	if !strings.HasPrefix(t, "<details") || strings.Contains(t, "</details") {
		return "", false
	}
	if m := summaryRe.FindStringSubmatch(s); m != nil {
		summary = strings.TrimSpace(stdhtml.UnescapeString(m[1]))
	}
	return summary, true
}

// foldCloser reports whether an HTML block is a fold's end (</details>).
func foldCloser(s string) bool {
	return strings.EqualFold(strings.TrimSpace(s), "</details>")
}

// fold renders the fold that opens at block first (with summary) up to its </details> (or the
// end of the message) as one expandable blockquote, and returns the last block it took.
func (w *tgWriter) fold(first ast.Node, summary string) ast.Node {
	quoted := w.quoted
	w.quoted = true
	start := w.mark()
	if summary != "" {
		w.write(summary)
	}
	last := first
	for c := first.NextSibling(); c != nil; c = c.NextSibling() {
		last = c
		if h, ok := c.(*ast.HTMLBlock); ok && foldCloser(w.lines(h)) {
			break
		}
		if w.b.Len() > start.byte {
			w.lineBreak(1)
		}
		w.block(c)
	}
	w.quoted = quoted
	if !quoted {
		w.entity(start, Entity{Type: "expandable_blockquote"})
	}
	return last
}

// gap is the line breaks before block n: two where the source has a blank line (or a quote
// marker alone) between n and the block before it, else one.
func (w *tgWriter) gap(n ast.Node) int {
	end, ok1 := edge(n.PreviousSibling(), false)
	start, ok2 := edge(n, true)
	if !ok1 || !ok2 || end > start {
		return 1
	}
	between := w.src[end:start]
	first, last := bytes.IndexByte(between, '\n'), bytes.LastIndexByte(between, '\n')
	if first == last {
		return 1 // no whole line between the blocks
	}
	for l := range bytes.SplitSeq(between[first+1:last], []byte("\n")) {
		if len(bytes.Trim(l, " \t>")) == 0 {
			return 2
		}
	}
	return 1
}

// edge finds where n's text starts (first) or ends in the source.
func edge(n ast.Node, first bool) (int, bool) {
	if n == nil {
		return 0, false
	}
	if t, ok := n.(*ast.Text); ok {
		if first {
			return t.Segment.Start, true
		}
		return t.Segment.Stop, true
	}
	if n.Type() == ast.TypeBlock {
		if l := n.Lines(); l != nil && l.Len() > 0 {
			if first {
				return l.At(0).Start, true
			}
			return l.At(l.Len() - 1).Stop, true
		}
	}
	if first {
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			if at, ok := edge(c, true); ok {
				return at, true
			}
		}
	} else {
		for c := n.LastChild(); c != nil; c = c.PreviousSibling() {
			if at, ok := edge(c, false); ok {
				return at, true
			}
		}
	}
	return 0, false
}

func (w *tgWriter) block(n ast.Node) {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		w.inlines(n)
	case *ast.Heading:
		start := w.mark()
		w.inlines(n)
		w.entity(start, Entity{Type: "bold"})
	case *ast.ThematicBreak:
		w.write("──────────")
	case *ast.FencedCodeBlock:
		lang := ""
		if n.Info != nil {
			lang = string(n.Language(w.src))
		}
		w.pre(w.lines(n), lang)
	case *ast.CodeBlock:
		w.pre(w.lines(n), "")
	case *ast.HTMLBlock:
		s := w.lines(n)
		if n.HasClosure() {
			s += string(n.ClosureLine.Value(w.src))
		}
		w.write(strings.TrimRight(s, "\n"))
	case *ast.Blockquote:
		w.quote(n)
	case *ast.List:
		w.list(n)
	case *east.Table:
		w.table(n)
	default:
		w.blocks(n)
	}
}

// lines is the raw text of a block's lines.
func (w *tgWriter) lines(n ast.Node) string {
	var b strings.Builder
	l := n.Lines()
	for i := 0; i < l.Len(); i++ {
		seg := l.At(i)
		b.Write(seg.Value(w.src))
	}
	return b.String()
}

func (w *tgWriter) pre(code, lang string) {
	code = strings.TrimRight(code, "\n")
	if strings.TrimSpace(code) == "" {
		return
	}
	start := w.mark()
	w.write(code)
	w.entity(start, Entity{Type: "pre", Language: lang})
}

func (w *tgWriter) quote(n *ast.Blockquote) {
	if w.quoted || w.plain {
		w.blocks(n)
		return
	}
	w.quoted = true
	start := w.mark()
	w.blocks(n)
	w.quoted = false
	typ := "blockquote"
	body := w.b.String()[start.byte:]
	if strings.Count(body, "\n") >= expandableLines || w.n-start.u16 > expandableUnits {
		typ = "expandable_blockquote"
	}
	w.entity(start, Entity{Type: typ})
}

// maxIndentLevels is how deep lists indent; deeper ones line up with the last level, which
// keeps a phone screen readable and the output linear in the input.
const maxIndentLevels = 8

// bullets mark unordered items by depth.
var bullets = [...]string{"•", "◦", "▪"}

func (w *tgWriter) list(n *ast.List) {
	depth := w.lists
	w.lists++
	defer func() { w.lists-- }()
	num := n.Start
	outer := w.indent
	for item := n.FirstChild(); item != nil; item = item.NextSibling() {
		if item != n.FirstChild() {
			w.lineBreak(w.gap(item))
		}
		marker := bullets[depth%len(bullets)] + " "
		if n.IsOrdered() {
			marker = strconv.Itoa(num) + string(n.Marker) + " "
			num++
		}
		w.write(marker)
		if depth < maxIndentLevels {
			w.indent = outer + strings.Repeat(" ", utf8.RuneCountInString(marker))
		}
		w.blocks(item)
		w.indent = outer
	}
}

// table renders a GFM table as a pre block with aligned columns: Telegram has no tables, and
// a monospaced grid stays readable on a phone.
func (w *tgWriter) table(n *east.Table) {
	var rows [][]string
	for r := n.FirstChild(); r != nil; r = r.NextSibling() {
		var row []string
		for c := r.FirstChild(); c != nil; c = c.NextSibling() {
			row = append(row, w.plainText(c))
		}
		rows = append(rows, row)
	}
	cols := len(n.Alignments)
	for _, r := range rows {
		cols = max(cols, len(r))
	}
	width := make([]int, cols)
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for ri, r := range rows {
		if ri > 0 {
			b.WriteByte('\n')
		}
		for i := 0; i < cols; i++ {
			cell := ""
			if i < len(r) {
				cell = r[i]
			}
			align := east.AlignNone
			if i < len(n.Alignments) {
				align = n.Alignments[i]
			}
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(pad(cell, width[i], align, i == cols-1))
		}
		if ri == 0 {
			b.WriteByte('\n')
			for i := 0; i < cols; i++ {
				if i > 0 {
					b.WriteString("-+-")
				}
				b.WriteString(strings.Repeat("-", width[i]))
			}
		}
	}
	w.pre(strings.TrimRight(b.String(), " "), "")
}

func pad(s string, width int, align east.Alignment, last bool) string {
	gap := width - utf8.RuneCountInString(s)
	switch {
	case align == east.AlignRight:
		return strings.Repeat(" ", gap) + s
	case align == east.AlignCenter:
		left := gap / 2
		s = strings.Repeat(" ", left) + s
		gap -= left
	}
	if last {
		return s
	}
	return s + strings.Repeat(" ", gap)
}

// plainText renders n's inlines without entities, on one line.
func (w *tgWriter) plainText(n ast.Node) string {
	sub := &tgWriter{src: w.src, plain: true}
	sub.inlines(n)
	s, _ := sub.finish()
	return strings.ReplaceAll(s, "\n", " ")
}

func (w *tgWriter) inlines(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		w.inline(c)
	}
}

func (w *tgWriter) inline(n ast.Node) {
	switch n := n.(type) {
	case *ast.Text:
		v := n.Value(w.src)
		if n.IsRaw() {
			w.writeBytes(v)
		} else {
			w.writeBytes(unescape(v))
		}
		if n.SoftLineBreak() || n.HardLineBreak() {
			w.lineBreak(1)
		}
	case *ast.String:
		w.write(string(n.Value))
	case *ast.CodeSpan:
		start := w.mark()
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			if t, ok := c.(*ast.Text); ok {
				w.writeBytes(t.Value(w.src))
			} else if s, ok := c.(*ast.String); ok {
				w.write(string(s.Value))
			}
		}
		w.entity(start, Entity{Type: "code"})
	case *ast.Emphasis:
		typ := "italic"
		if n.Level >= 2 {
			typ = "bold"
		}
		start := w.mark()
		w.inlines(n)
		w.entity(start, Entity{Type: typ})
	case *east.Strikethrough:
		start := w.mark()
		w.inlines(n)
		w.entity(start, Entity{Type: "strikethrough"})
	case *ast.Link:
		w.link(n, string(n.Destination))
	case *ast.Image:
		w.link(n, string(n.Destination))
	case *ast.AutoLink:
		w.write(string(n.Label(w.src)))
	case *ast.RawHTML:
		for i := 0; i < n.Segments.Len(); i++ {
			seg := n.Segments.At(i)
			w.write(string(seg.Value(w.src)))
		}
	case *east.TaskCheckBox:
		if n.IsChecked {
			w.write("☑ ")
		} else {
			w.write("☐ ")
		}
	default:
		w.inlines(n)
	}
}

// link renders a link's text as a text_link; a destination that may not be clickable (relative,
// javascript:, tg:// — see clickable) is shown after the text instead, so nothing the model
// wrote is lost and no friendly label hides a deceptive link.
func (w *tgWriter) link(n ast.Node, dest string) {
	start := w.mark()
	w.inlines(n)
	if w.b.Len() == start.byte {
		w.write(dest)
	}
	if clickable(dest) {
		w.entity(start, Entity{Type: "text_link", URL: dest})
	} else if dest != "" && w.b.String()[start.byte:] != dest {
		w.write(" (" + dest + ")")
	}
}

// unescape resolves backslash escapes and character references in text, as CommonMark reads
// them; text without either is returned as it is.
func unescape(v []byte) []byte {
	if bytes.IndexByte(v, '\\') < 0 && bytes.IndexByte(v, '&') < 0 {
		return v
	}
	return util.UnescapePunctuations(util.ResolveNumericReferences(util.ResolveEntityNames(v)))
}
