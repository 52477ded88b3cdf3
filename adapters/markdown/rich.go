package markdown

import (
	"bytes"
	stdhtml "html"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/util"
)

// RichLimits are the limits of one Telegram rich message (Bot API, "Rich Message Limits").
type RichLimits struct {
	Chars   int // characters of text, markup not counted
	Blocks  int // blocks, nested ones, list items and table rows included
	Depth   int // nesting of blocks and formatting
	Columns int // cells in a table row
}

// TelegramRichLimits are Telegram's documented limits: 32,768 characters, 500 blocks, 16
// levels of nesting, 20 table columns.
var TelegramRichLimits = RichLimits{Chars: 32768, Blocks: 500, Depth: 16, Columns: 20}

// Fits reports whether a rendered message of size s is within l.
func (l RichLimits) Fits(s RichLimits) bool {
	return s.Chars <= l.Chars && s.Blocks <= l.Blocks && s.Depth <= l.Depth && s.Columns <= l.Columns
}

// richEngine renders Markdown for rich messages: like the web chat's, but a single newline
// stays a newline (Telegram does not document <br> among a rich message's tags), and the
// sanitiser keeps only the tags Telegram's rich HTML documents.
type richEngine struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
}

var richShared = sync.OnceValue(func() *richEngine {
	md := goldmark.New(
		goldmark.WithExtensions(extension.GFM),
		goldmark.WithParserOptions(parser.WithInlineParsers(util.Prioritized(delimiterBudget{}, 10))),
		goldmark.WithRendererOptions(html.WithUnsafe()),
	)
	p := bluemonday.NewPolicy()
	p.AllowElements("b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "code", "mark", "sub", "sup",
		"p", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "hr", "ul", "ol", "li", "blockquote",
		"details", "summary", "table", "caption", "tr", "th", "td")
	p.AllowAttrs("class").Matching(regexp.MustCompile(`^language-[\w+#.-]+$`)).OnElements("code")
	p.AllowAttrs("href").OnElements("a")
	p.AllowURLSchemes("http", "https", "mailto")
	p.RequireParseableURLs(true)
	p.AllowAttrs("start").Matching(regexp.MustCompile(`^[0-9]{1,9}$`)).OnElements("ol")
	p.AllowAttrs("type").Matching(regexp.MustCompile(`^checkbox$`)).OnElements("input")
	p.AllowAttrs("checked").Matching(regexp.MustCompile(`^(checked)?$`)).OnElements("input")
	return &richEngine{md: md, policy: p}
})

// voidTags have no closing tag.
var voidTags = map[string]bool{"hr": true, "input": true}

// blockTags count against RichLimits.Blocks.
var blockTags = map[string]bool{"p": true, "h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true,
	"pre": true, "hr": true, "ul": true, "ol": true, "li": true, "blockquote": true, "details": true, "table": true, "tr": true}

var tagRe = regexp.MustCompile(`<(/?)([a-z][a-z0-9]*)\b[^>]*?(/?)>`)

// RichHTML renders md as the HTML of a Telegram rich message (InputRichMessage.html) and
// measures it against RichLimits. Only the tags Telegram's rich HTML documents survive (raw
// HTML of the model included: a <details> fold stays a collapsed block); links keep http,
// https and mailto; images are dropped (a rich message takes media only as separate blocks
// with uploaded files). Tags are balanced: a stray closing tag goes, an open one is closed.
// The size is an upper bound: an HTML entity counts as its characters.
func RichHTML(md string) (string, RichLimits) {
	e := richShared()
	var buf bytes.Buffer
	src := []byte(md)
	if err := e.md.Renderer().Render(&buf, src, parse(src)); err != nil {
		// Rendering writes to memory and cannot fail; should it ever, the text is escaped.
		buf.Reset()
		buf.WriteString("<p>" + stdhtml.EscapeString(md) + "</p>")
	}
	return balance(strings.TrimSpace(e.policy.Sanitize(buf.String())))
}

// balance drops closing tags that close nothing open, closes what is left open, and measures
// the result. Sanitised HTML escapes every < of text, so each < starts a tag.
func balance(h string) (string, RichLimits) {
	var out strings.Builder
	var size RichLimits
	var stack []string
	cells := 0
	last := 0
	for _, m := range tagRe.FindAllStringSubmatchIndex(h, -1) {
		text := h[last:m[0]]
		size.Chars += utf8.RuneCountInString(text)
		out.WriteString(text)
		last = m[1]
		closing, name := h[m[2]:m[3]] == "/", h[m[4]:m[5]]
		if closing {
			i := len(stack) - 1
			for i >= 0 && stack[i] != name {
				i--
			}
			if i < 0 {
				continue
			}
			for len(stack) > i {
				out.WriteString("</" + stack[len(stack)-1] + ">")
				stack = stack[:len(stack)-1]
			}
			continue
		}
		out.WriteString(h[m[0]:m[1]])
		if blockTags[name] {
			size.Blocks++
		}
		switch name {
		case "tr":
			cells = 0
		case "th", "td":
			cells++
			size.Columns = max(size.Columns, cells)
		}
		if voidTags[name] || h[m[6]:m[7]] == "/" {
			size.Depth = max(size.Depth, len(stack)+1)
			continue
		}
		stack = append(stack, name)
		size.Depth = max(size.Depth, len(stack))
	}
	text := h[last:]
	size.Chars += utf8.RuneCountInString(text)
	out.WriteString(text)
	for i := len(stack) - 1; i >= 0; i-- {
		out.WriteString("</" + stack[i] + ">")
	}
	return out.String(), size
}
