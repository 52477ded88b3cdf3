// Package markdown parses the model's Markdown once, with goldmark (CommonMark plus GitHub's
// tables, strikethrough, task lists and bare links), and renders it per surface: Telegram text
// with message entities, and sanitised HTML for the web chat. Discord takes Markdown as it is.
//
// Every renderer accepts partial Markdown, as a streaming preview shows it: an unclosed fence
// runs to the end, a marker without a partner stays as a character, half a link stays text.
package markdown

import (
	"regexp"
	"sync"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// engine is the parser and HTML renderer every call shares; goldmark and bluemonday are safe
// for concurrent use once built, and nothing changes them after.
type engine struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
}

var shared = sync.OnceValue(func() *engine {
	md := goldmark.New(
		goldmark.WithExtensions(extension.GFM),
		goldmark.WithParserOptions(parser.WithInlineParsers(util.Prioritized(delimiterBudget{}, 10))),
		// Raw HTML goes through to the sanitiser, which keeps what is safe (<br>, <sub>, …).
		// A single newline is a line break: models write chat text, not wrapped prose.
		goldmark.WithRendererOptions(html.WithUnsafe(), html.WithHardWraps()),
	)
	p := bluemonday.UGCPolicy()
	p.AllowAttrs("class").Matching(regexp.MustCompile(`^language-[\w+#.-]+$`)).OnElements("code")
	p.AddTargetBlankToFullyQualifiedLinks(true)
	// Only http, https and mailto links are clickable (see clickable): a relative link would
	// point into the bot's own pages under a label the model chose.
	p.AllowRelativeURLs(false)
	return &engine{md: md, policy: p}
})

// parse returns the document tree of src.
func parse(src []byte) ast.Node {
	return shared().md.Parser().Parse(text.NewReader(src))
}
