package telegram

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Entity is a Telegram message entity; Offset and Length count UTF-16 code units.
type Entity struct {
	Type     string `json:"type"`
	Offset   int    `json:"offset"`
	Length   int    `json:"length"`
	URL      string `json:"url,omitempty"`
	Language string `json:"language,omitempty"`
}

// Render turns the model's Markdown into plain text and Telegram entities, so nothing ever needs
// MarkdownV2 escaping: fenced code (pre, with its language), inline code, bold (** or __),
// italic (* or _), strikethrough (~~), links ([text](url)) and headings (shown bold). Markers
// without a partner stay as they are, so unfinished previews render fine. List bullets "- " and
// "* " become "• ".
func Render(md string) (string, []Entity) {
	r := &renderer{}
	// Telegram trims a message's surrounding whitespace; trimming here keeps entity offsets true.
	md = strings.TrimLeft(md, " \t\n")
	lines := strings.Split(strings.TrimRight(md, " \t\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if marker, lang, ok := openFence(line); ok {
			// Collect the block up to its closing fence (or the end of the text).
			var body []string
			j := i + 1
			for ; j < len(lines); j++ {
				if isCloseFence(lines[j], marker) {
					break
				}
				body = append(body, lines[j])
			}
			code := strings.Join(body, "\n")
			if code != "" {
				start := r.n
				r.write(code)
				r.add(Entity{Type: "pre", Offset: start, Length: r.n - start, Language: lang})
			}
			i = j
			if i < len(lines)-1 {
				r.write("\n")
			}
			continue
		}
		if h := heading(line); h != "" {
			start := r.n
			r.inline(h)
			if r.n > start {
				r.add(Entity{Type: "bold", Offset: start, Length: r.n - start})
			}
		} else {
			r.inline(bullet(line))
		}
		if i < len(lines)-1 {
			r.write("\n")
		}
	}
	return r.b.String(), r.ents
}

type renderer struct {
	b    strings.Builder
	n    int // UTF-16 units written
	ents []Entity
}

func (r *renderer) write(s string) {
	r.b.WriteString(s)
	for _, c := range s {
		if c > 0xFFFF {
			r.n += 2
		} else {
			r.n++
		}
	}
}

func (r *renderer) add(e Entity) {
	if e.Length > 0 {
		r.ents = append(r.ents, e)
	}
}

func openFence(line string) (marker, lang string, ok bool) {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return "", "", false
	}
	for _, c := range []string{"`", "~"} {
		n := 0
		for n < len(t) && t[n] == c[0] {
			n++
		}
		if n >= 3 {
			info := strings.TrimSpace(t[n:])
			if c == "`" && strings.Contains(info, "`") {
				return "", "", false
			}
			if f := strings.Fields(info); len(f) > 0 {
				lang = f[0]
			}
			return t[:n], lang, true
		}
	}
	return "", "", false
}

func isCloseFence(line, marker string) bool {
	t := strings.TrimSpace(line)
	if !strings.HasPrefix(t, marker) {
		return false
	}
	return strings.Trim(t, marker[:1]) == ""
}

func heading(line string) string {
	t := strings.TrimLeft(line, " ")
	n := 0
	for n < len(t) && n < 7 && t[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || n >= len(t) || t[n] != ' ' {
		return ""
	}
	return strings.TrimRight(strings.TrimSpace(t[n:]), "# ")
}

func bullet(line string) string {
	t := strings.TrimLeft(line, " ")
	indent := line[:len(line)-len(t)]
	if strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* ") || strings.HasPrefix(t, "+ ") {
		return indent + "• " + t[2:]
	}
	return line
}

// inline renders one line of inline Markdown.
func (r *renderer) inline(s string) {
	i := 0
	lit := 0 // start of pending literal text
	flush := func(to int) {
		if to > lit {
			r.write(s[lit:to])
		}
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]):
			flush(i)
			r.write(s[i+1 : i+2])
			i += 2
			lit = i
			continue
		case c == '`':
			n := run(s, i, '`')
			if end := findRun(s, i+n, '`', n); end >= 0 {
				code := s[i+n : end]
				if t := strings.TrimSpace(code); t != "" {
					flush(i)
					start := r.n
					r.write(code)
					r.add(Entity{Type: "code", Offset: start, Length: r.n - start})
					i = end + n
					lit = i
					continue
				}
			}
			i += n
			continue
		case c == '[':
			if text, url, next, ok := link(s, i); ok {
				flush(i)
				start := r.n
				r.inline(text)
				r.add(Entity{Type: "text_link", Offset: start, Length: r.n - start, URL: url})
				i = next
				lit = i
				continue
			}
		case c == '*' || c == '_' || c == '~':
			if typ, inner, next, ok := emphasis(s, i); ok {
				flush(i)
				start := r.n
				r.inline(inner)
				r.add(Entity{Type: typ, Offset: start, Length: r.n - start})
				i = next
				lit = i
				continue
			}
			i += run(s, i, c)
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	flush(len(s))
}

func isASCIIPunct(c byte) bool {
	return c < 0x80 && unicode.IsPunct(rune(c)) || c == '`' || c == '~' || c == '|' || c == '>' || c == '<' || c == '=' || c == '+' || c == '^' || c == '$'
}

// run counts the characters c starting at i.
func run(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// findRun finds a run of exactly n characters c at or after from.
func findRun(s string, from int, c byte, n int) int {
	for i := from; i < len(s); {
		if s[i] == c {
			m := run(s, i, c)
			if m == n {
				return i
			}
			i += m
			continue
		}
		i++
	}
	return -1
}

// link parses [text](url) at i.
func link(s string, i int) (text, url string, next int, ok bool) {
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '[':
			depth++
		case ']':
			depth--
			if depth == 0 {
				if j+1 >= len(s) || s[j+1] != '(' {
					return "", "", 0, false
				}
				end := closeParen(s[j+2:])
				if end < 0 {
					return "", "", 0, false
				}
				text, url = s[i+1:j], strings.TrimSpace(s[j+2:j+2+end])
				if text == "" || !validURL(url) {
					return "", "", 0, false
				}
				return text, url, j + 2 + end + 1, true
			}
		}
	}
	return "", "", 0, false
}

// closeParen returns the index of the ")" that closes a link destination in s, skipping
// balanced pairs inside it (https://en.wikipedia.org/wiki/Go_(programming_language)), or -1.
func closeParen(s string) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			if depth == 0 {
				return i
			}
			depth--
		}
	}
	return -1
}

func validURL(u string) bool {
	if strings.ContainsAny(u, " \t") {
		return false
	}
	for _, p := range []string{"http://", "https://", "tg://", "mailto:"} {
		if strings.HasPrefix(strings.ToLower(u), p) && len(u) > len(p) {
			return true
		}
	}
	return false
}

// emphasis parses **bold**, __bold__, *italic*, _italic_ or ~~strike~~ at i.
func emphasis(s string, i int) (typ, inner string, next int, ok bool) {
	c := s[i]
	n := run(s, i, c)
	var delim string
	switch {
	case c == '~' && n == 2:
		typ, delim = "strikethrough", "~~"
	case c != '~' && n == 2:
		typ, delim = "bold", s[i:i+2]
	case c != '~' && n == 1:
		typ, delim = "italic", s[i:i+1]
	default:
		return "", "", 0, false
	}
	open := i + len(delim)
	if open >= len(s) || s[open] == ' ' {
		return "", "", 0, false
	}
	// Underscores inside words (snake_case) are not emphasis.
	if c == '_' && i > 0 && isWordByte(s, i-1) {
		return "", "", 0, false
	}
	for j := open + 1; j <= len(s)-len(delim); j++ {
		if s[j] == '`' { // skip code spans: markers inside them do not close
			if m := run(s, j, '`'); findRun(s, j+m, '`', m) >= 0 {
				j = findRun(s, j+m, '`', m) + m - 1
				continue
			}
		}
		if s[j] != c {
			continue
		}
		// The closing run must have exactly the delimiter's length: skip a whole longer or
		// shorter run (the "**" of bold nested in italic), never close in its middle.
		if m := run(s, j, c); m != len(delim) {
			j += m - 1
			continue
		}
		if s[j-1] == ' ' {
			continue
		}
		after := j + len(delim)
		if c == '_' && after < len(s) && isWordByte(s, after) {
			continue
		}
		return typ, s[open:j], after, true
	}
	return "", "", 0, false
}

func isWordByte(s string, i int) bool {
	r, _ := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && i > 0 {
		r, _ = utf8.DecodeLastRuneInString(s[:i+1])
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}
