package native

import (
	"bytes"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
)

// skipped elements carry no readable text.
var skipped = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true, atom.Svg: true,
	atom.Math: true, atom.Canvas: true, atom.Iframe: true, atom.Object: true, atom.Head: true,
	atom.Select: true, atom.Button: true, atom.Input: true, atom.Textarea: true,
}

// blocks start and end a line; paragraphs also leave a blank line around them.
var (
	blocks = map[atom.Atom]bool{
		atom.Div: true, atom.Br: true, atom.Li: true, atom.Tr: true, atom.Dt: true, atom.Dd: true,
		atom.Form: true, atom.Nav: true,
		atom.Header: true, atom.Footer: true, atom.Main: true, atom.Aside: true, atom.Figure: true,
		atom.Figcaption: true, atom.Caption: true, atom.Hr: true, atom.Address: true, atom.Details: true,
		atom.Summary: true, atom.Body: true, atom.Html: true,
	}
	paragraphs = map[atom.Atom]bool{
		atom.P: true, atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true,
		atom.H6: true, atom.Pre: true, atom.Ul: true, atom.Ol: true, atom.Dl: true, atom.Table: true, atom.Blockquote: true, atom.Section: true, atom.Article: true,
	}
	headingLevel = map[atom.Atom]int{atom.H1: 1, atom.H2: 2, atom.H3: 3, atom.H4: 4, atom.H5: 5, atom.H6: 6}
)

// htmlText reduces an HTML document to its title and readable text: scripts, styles and forms
// dropped, whitespace collapsed, one line per block, headings and list items marked as in Markdown.
func htmlText(body []byte, contentType string) (title, text string, err error) {
	r, err := charset.NewReader(bytes.NewReader(body), contentType)
	if err != nil {
		return "", "", err
	}
	doc, err := html.Parse(r)
	if err != nil {
		return "", "", err
	}
	w := &textWriter{}
	w.walk(doc, false)
	w.flush()
	return findTitle(doc), strings.TrimSpace(w.out.String()), nil
}

func findTitle(n *html.Node) string {
	if n.Type == html.ElementNode && n.DataAtom == atom.Title {
		var b strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.TextNode {
				b.WriteString(c.Data)
			}
		}
		return strings.Join(strings.Fields(b.String()), " ")
	}
	if n.Type == html.ElementNode && n.DataAtom == atom.Svg {
		return ""
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if t := findTitle(c); t != "" {
			return t
		}
	}
	return ""
}

// textWriter collects lines: inline text gathers in line and is whitespace-collapsed when the
// line ends.
type textWriter struct {
	out       strings.Builder
	line      strings.Builder
	prefix    string // goes before the current line's text ("# ", "- ")
	blankDone bool   // the output ends with a blank line (or is empty)
	inItem    int    // depth of list items: paragraphs inside them take no blank lines
}

func (w *textWriter) flush() {
	l := strings.Join(strings.Fields(w.line.String()), " ")
	w.line.Reset()
	if l == "" {
		return // a prefix waits for the first line of text
	}
	w.out.WriteString(w.prefix)
	w.prefix = ""
	w.out.WriteString(l)
	w.out.WriteByte('\n')
	w.blankDone = false
}

func (w *textWriter) paragraphBreak() {
	w.flush()
	if w.inItem > 0 {
		return
	}
	if !w.blankDone && w.out.Len() > 0 {
		w.out.WriteByte('\n')
	}
	w.blankDone = true
}

func (w *textWriter) walk(n *html.Node, pre bool) {
	switch n.Type {
	case html.TextNode:
		if pre {
			w.flush()
			w.out.WriteString(strings.Trim(n.Data, "\n"))
			w.out.WriteByte('\n')
			w.blankDone = false
			return
		}
		w.line.WriteString(n.Data)
		return
	case html.ElementNode:
		if skipped[n.DataAtom] {
			return
		}
	case html.DocumentNode:
	default:
		return
	}
	a := n.DataAtom
	switch {
	case paragraphs[a]:
		w.paragraphBreak()
	case blocks[a]:
		w.flush()
	case a == atom.Td || a == atom.Th:
		if strings.TrimSpace(w.line.String()) != "" {
			w.line.WriteString(" | ")
		}
	case a == atom.Img:
		if alt := attr(n, "alt"); strings.TrimSpace(alt) != "" {
			w.line.WriteString(" [image: " + alt + "] ")
		}
	}
	if lvl := headingLevel[a]; lvl > 0 {
		w.prefix = strings.Repeat("#", lvl) + " "
	}
	if a == atom.Li {
		w.prefix = "- "
		w.inItem++
		defer func() { w.inItem-- }()
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.walk(c, pre || a == atom.Pre)
	}
	switch {
	case paragraphs[a]:
		w.paragraphBreak()
	case blocks[a]:
		w.flush()
	}
	if a == atom.Li || headingLevel[a] > 0 {
		w.prefix = "" // an empty item or heading leaves no prefix behind
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}
