package markdown

import (
	"strings"

	"github.com/yuin/goldmark/ast"
)

// linkSchemes are the only URL schemes a reply makes clickable, on every surface: anything else
// (tg://proxy, tg://resolve, javascript:, app links, relative paths) is shown as text, so neither
// the model nor a user's text echoed in a notice can put a deceptive link under a friendly label.
var linkSchemes = []string{"http://", "https://", "mailto:"}

// clickable reports whether u may become a link.
func clickable(u string) bool {
	u = strings.TrimSpace(u)
	if strings.ContainsAny(u, " \t\n") {
		return false
	}
	for _, p := range linkSchemes {
		if len(u) > len(p) && strings.EqualFold(u[:len(p)], p) {
			return true
		}
	}
	return false
}

// Discord returns md with every Markdown link whose destination is not clickable made inert, so
// Discord shows the characters the model wrote instead of a link: the "(" that opens a masked
// link's destination, the ":" of a reference definition and the "<" of an autolink become their
// fullwidth forms ("（", "：", "＜"). Text inside code is left alone. The replacement keeps the
// length in runes, the unit of Discord's 2,000-character limit, so text the delivery engine has
// already split still fits. Anything that merely looks like such a link is changed too; that
// costs a glyph, never a link.
func Discord(md string) string {
	if !strings.Contains(md, "](") && !strings.Contains(md, "]:") && !strings.Contains(md, "<") {
		return md
	}
	code := codeRanges([]byte(md))
	inCode := func(i int) bool {
		for _, r := range code {
			if i >= r[0] && i < r[1] {
				return true
			}
		}
		return false
	}
	var b strings.Builder
	last := 0
	replace := func(i int, with string) {
		b.WriteString(md[last:i])
		b.WriteString(with)
		last = i + 1
	}
	for i := 0; i < len(md); i++ {
		switch {
		case md[i] == ']' && i+1 < len(md) && (md[i+1] == '(' || md[i+1] == ':') && !inCode(i):
			dest := strings.TrimLeft(md[i+2:], " \t\n<")
			if looksLikeURL(dest) && !clickable(firstField(dest)) {
				if md[i+1] == '(' {
					replace(i+1, "（")
				} else {
					replace(i+1, "：")
				}
				i++
			}
		case md[i] == '<' && !inCode(i):
			end := strings.IndexAny(md[i+1:], "> \t\n<")
			if end > 0 && md[i+1+end] == '>' && looksLikeURL(md[i+1:]) && !clickable(md[i+1:i+1+end]) {
				replace(i, "＜")
			}
		}
	}
	if last == 0 {
		return md
	}
	b.WriteString(md[last:])
	return b.String()
}

// looksLikeURL reports whether s starts with a URL scheme ("tg:", "javascript:") or a path, the
// destinations a link could take.
func looksLikeURL(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '/' || s[0] == '.' || s[0] == '#' || s[0] == '?' {
		return true
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ':':
			return i > 0
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return false
}

// firstField is s up to its first space, ")" or ">": the destination of a link.
func firstField(s string) string {
	if i := strings.IndexAny(s, " \t\n)>"); i >= 0 {
		return s[:i]
	}
	return s
}

// codeRanges returns the byte ranges of md that are code (spans and blocks), where nothing is a link.
func codeRanges(src []byte) [][2]int {
	var out [][2]int
	_ = ast.Walk(parse(src), func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.CodeBlock, *ast.FencedCodeBlock:
			lines := n.Lines()
			if lines.Len() > 0 {
				out = append(out, [2]int{lines.At(0).Start, lines.At(lines.Len() - 1).Stop})
			}
			return ast.WalkSkipChildren, nil
		case *ast.CodeSpan:
			for c := n.FirstChild(); c != nil; c = c.NextSibling() {
				if t, ok := c.(*ast.Text); ok {
					out = append(out, [2]int{t.Segment.Start, t.Segment.Stop})
				}
			}
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return out
}
