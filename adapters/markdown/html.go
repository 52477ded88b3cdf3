package markdown

import (
	"bytes"
	stdhtml "html"
)

// HTML renders md as HTML that is safe to put into a page: goldmark's output passes through
// bluemonday's user-generated-content policy, so scripts, event handlers, styles and
// javascript: links never reach the browser.
func HTML(md string) string {
	e := shared()
	var buf bytes.Buffer
	src := []byte(md)
	if err := e.md.Renderer().Render(&buf, src, parse(src)); err != nil {
		// Rendering writes to memory and cannot fail; should it ever, the text is escaped.
		return e.policy.Sanitize(stdhtml.EscapeString(md))
	}
	return string(bytes.TrimSpace(e.policy.SanitizeBytes(buf.Bytes())))
}
