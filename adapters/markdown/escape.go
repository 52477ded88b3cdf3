package markdown

import "strings"

// Escape returns s as Markdown that every renderer of this package (and Discord's own) shows
// as the characters of s: each ASCII punctuation character gets a backslash (CommonMark lets
// any of them be escaped, and Discord drops a backslash before any of them), so a file name,
// a tool's name, a server's progress message or a tool's question cannot become a link, a
// mention, emphasis, a heading or HTML in one of the bot's messages. Line breaks stay.
func Escape(s string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/4)
	for _, r := range s {
		if r < 0x80 && isPunct(byte(r)) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// isPunct reports whether c is ASCII punctuation as CommonMark defines it.
func isPunct(c byte) bool {
	return c >= '!' && c <= '/' || c >= ':' && c <= '@' || c >= '[' && c <= '`' || c >= '{' && c <= '~'
}
