package extract

import (
	"context"
	"fmt"
	"strings"

	"relaybot/media"
)

// readText decodes a text format's bytes as media does (a byte-order mark, UTF-8, UTF-16,
// else an 8-bit charset it can tell) and cuts the text into blocks by the format's structure.
func readText(ctx context.Context, name string, format Format, data []byte, l Limits) (string, []block, error) {
	// The name given to media is a text file's: a text format's bytes never start a PDF
	// (Detect would have named it one), and media must not take it for one by its name.
	doc, err := media.Read("document.txt", "", data, media.Limits{})
	if err != nil {
		return "", nil, fmt.Errorf("%s is not text in a charset this reads (%v): %w", name, err, ErrUnknownFormat)
	}
	text := doc.Text
	if int64(len(text)) > l.MaxTextBytes {
		return "", nil, &LimitError{Key: "max_text_bytes", Limit: l.MaxTextBytes, Got: int64(len(text))}
	}
	switch format {
	case Markdown:
		return text, markdownBlocks(text), nil
	case HTML:
		return readHTML(ctx, text, l)
	case CSV:
		blocks, err := csvBlocks(ctx, name, text)
		return text, blocks, err
	}
	return text, paragraphs(nil, text, 0, len(text), block{}), nil
}

// paragraphs appends the paragraphs of text[a:b] (runs of lines between blank lines) as blocks
// like proto.
func paragraphs(blocks []block, text string, a, b int, proto block) []block {
	for a < b {
		end := b
		if i := strings.Index(text[a:b], "\n\n"); i >= 0 {
			end = a + i
		}
		if s, e := trimSpan(text, a, end); s < e {
			p := proto
			p.start, p.end = s, e
			blocks = append(blocks, p)
		}
		a = end + 1
	}
	return blocks
}

// markdownBlocks cuts Markdown into blocks: paragraphs, lists and code blocks, each heading's
// line starting a section whose heading path it sets (ATX "## Title" and setext headings;
// a "#" inside a fenced code block is code).
func markdownBlocks(text string) []block {
	m := mdState{text: text, para: -1}
	ls := 0
	// YAML front matter (between "---" lines at the top) is one block, not a setext heading.
	if rest, ok := strings.CutPrefix(text, "---\n"); ok {
		if i := strings.Index(rest, "\n---"); i >= 0 && (len(rest) == i+4 || rest[i+4] == '\n') {
			ls = len("---\n") + i + len("\n---")
			m.blocks = append(m.blocks, block{start: 0, end: ls})
		}
	}
	for ls < len(text) {
		le := strings.IndexByte(text[ls:], '\n')
		if le < 0 {
			le = len(text)
		} else {
			le += ls
		}
		m.line(ls, le)
		ls = le + 1
	}
	m.flush()
	return m.blocks
}

// mdState is markdownBlocks' walk through the lines.
type mdState struct {
	text     string
	blocks   []block
	titles   [6]string
	headings []string
	section  int
	// para is the start of the paragraph (or open code block) being read, -1 between them;
	// paraEnd its end so far and paraLines its lines.
	para, paraEnd, paraLines int
	fence                    string
}

func (m *mdState) line(ls, le int) {
	line := m.text[ls:le]
	body := strings.TrimLeft(line, " ")
	indent := len(line) - len(body)
	switch {
	case m.fence != "":
		m.paraEnd = le
		if strings.HasPrefix(strings.TrimSpace(line), m.fence) {
			m.fence = ""
			m.flush()
		}
	case indent < 4 && (strings.HasPrefix(body, "```") || strings.HasPrefix(body, "~~~")):
		m.flush()
		m.fence = body[:len(body)-len(strings.TrimLeft(body, body[:1]))]
		m.para, m.paraEnd = ls, le
	case indent < 4 && atxLevel(body) > 0:
		m.flush()
		level := atxLevel(body)
		title := strings.TrimSpace(body[level:])
		title = strings.TrimSpace(strings.TrimRight(title, "#"))
		m.heading(level, title, ls, le)
	case strings.TrimSpace(line) == "":
		m.flush()
	case m.para >= 0 && m.paraLines > 0 && indent < 4 && setextLevel(body) > 0:
		title := strings.Join(strings.Fields(m.text[m.para:m.paraEnd]), " ")
		start := m.para
		m.para = -1
		m.heading(setextLevel(body), title, start, le)
	default:
		if m.para < 0 {
			m.para, m.paraLines = ls, 0
		}
		m.paraEnd = le
		m.paraLines++
	}
}

// heading starts a section under the heading text[ls:le] of level with title.
func (m *mdState) heading(level int, title string, ls, le int) {
	m.titles[level-1] = title
	clear(m.titles[level:])
	m.headings = nil
	for _, t := range m.titles[:level] {
		if t != "" {
			m.headings = append(m.headings, t)
		}
	}
	m.section++
	if s, e := trimSpan(m.text, ls, le); s < e {
		m.blocks = append(m.blocks, block{start: s, end: e, section: m.section, headings: m.headings})
	}
}

// flush ends the paragraph or code block being read.
func (m *mdState) flush() {
	if m.para < 0 {
		return
	}
	end := m.paraEnd
	if m.fence != "" {
		end = len(m.text) // a fence never closed runs to the end
		m.fence = ""
	}
	if s, e := trimSpan(m.text, m.para, end); s < e {
		m.blocks = append(m.blocks, block{start: s, end: e, section: m.section, headings: m.headings})
	}
	m.para = -1
}

// atxLevel returns the level of an ATX heading line ("## Title"), 0 when it is none.
func atxLevel(s string) int {
	n := 0
	for n < len(s) && s[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || n < len(s) && s[n] != ' ' && s[n] != '\t' {
		return 0
	}
	return n
}

// setextLevel returns 1 for a line of "=" and 2 for a line of "-" (a setext underline), else 0.
func setextLevel(s string) int {
	s = strings.TrimRight(s, " \t")
	switch {
	case s == "":
		return 0
	case strings.Trim(s, "=") == "":
		return 1
	case strings.Trim(s, "-") == "":
		return 2
	}
	return 0
}
