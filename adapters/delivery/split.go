package delivery

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"relaybot/adapters"
	"relaybot/internal/ellipsis"
)

// Length counts s in unit: UTF-16 code units or Unicode code points.
func Length(s string, unit adapters.LengthUnit) int {
	if unit != adapters.UTF16 {
		return utf8.RuneCountInString(s)
	}
	n := 0
	for _, r := range s {
		n += runeLen(r, unit)
	}
	return n
}

func runeLen(r rune, unit adapters.LengthUnit) int {
	if unit == adapters.UTF16 && r > 0xFFFF {
		return 2
	}
	return 1
}

// extendsCluster reports whether r continues the grapheme cluster of prev, so that no cut may
// fall between them: combining marks, variation selectors, skin-tone modifiers, emoji tags,
// keycaps, zero-width joiner sequences and regional-indicator pairs.
func extendsCluster(prev, r rune, riRun int) bool {
	switch {
	case r == 0x200D || prev == 0x200D:
		return true
	case r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF:
		return true
	case r >= 0x1F3FB && r <= 0x1F3FF:
		return true
	case r >= 0xE0020 && r <= 0xE007F:
		return true
	case r == 0x20E3:
		return true
	case unicode.Is(unicode.Mn, r), unicode.Is(unicode.Me, r), unicode.Is(unicode.Mc, r):
		return true
	case isRegional(r) && isRegional(prev) && riRun%2 == 1:
		return true
	}
	return false
}

func isRegional(r rune) bool { return r >= 0x1F1E6 && r <= 0x1F1FF }

// cutAt returns the longest prefix of s of at most max units that ends on a grapheme boundary.
func cutAt(s string, max int, unit adapters.LengthUnit) string {
	n := 0
	last := 0 // byte offset of the last boundary that fits
	var prev rune = -1
	riRun := 0
	for i, r := range s {
		if prev >= 0 && !extendsCluster(prev, r, riRun) {
			last = i
		}
		if isRegional(r) {
			riRun++
		} else {
			riRun = 0
		}
		n += runeLen(r, unit)
		if n > max {
			return s[:last]
		}
		prev = r
	}
	return s
}

// Preview fits text into one message of at most max units: text that is too long is cut on a
// grapheme boundary (at a line or word end when one is close) and marked with ellipsis.Mark.
func Preview(text string, max int, unit adapters.LengthUnit) string {
	if max <= 0 || Length(text, unit) <= max {
		return text
	}
	room := max - Length(ellipsis.Mark, unit)
	if room < 1 {
		room = 1
	}
	head := cutAt(text, room, unit)
	// Prefer to end on a line or a word when that keeps most of the text.
	if i := strings.LastIndexByte(head, '\n'); i > len(head)*4/5 {
		head = head[:i]
	} else if i := strings.LastIndexByte(head, ' '); i > len(head)*9/10 {
		head = head[:i]
	}
	return strings.TrimRight(head, " \t\n") + ellipsis.Mark
}

// fence describes the code fence open at some point of a text.
type fence struct {
	open   bool
	opener string // the opening line, e.g. "```go"
	marker string // the closing marker, e.g. "```"
}

// fenceLine reports whether line opens or closes a fenced code block, and its marker.
func fenceLine(line string) (marker string, ok bool) {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return "", false
	}
	for _, c := range []byte{'`', '~'} {
		n := 0
		for n < len(t) && t[n] == c {
			n++
		}
		if n >= 3 {
			if c == '`' && strings.IndexByte(t[n:], '`') >= 0 {
				return "", false // CommonMark: a backtick fence's info string has no backticks
			}
			return t[:n], true
		}
	}
	return "", false
}

// inFenceMarker reports whether line, the start of a line up to a possible cut, is a fence
// line or could still become one (only its marker so far, such as two backticks).
func inFenceMarker(line string) bool {
	t := strings.TrimLeft(line, " ")
	if t == "" || len(line)-len(t) > 3 || (t[0] != '`' && t[0] != '~') {
		return false
	}
	n := 0
	for n < len(t) && t[n] == t[0] {
		n++
	}
	return n == len(t) || n >= 3
}

// Split divides a final text into messages of at most max units each. It cuts at paragraph
// breaks, then line breaks, then spaces, and only as a last resort inside a word, never
// through a character or a grapheme cluster. A cut inside a fenced code block closes the
// fence at the end of one message and reopens it (with its language) at the start of the next.
// Whitespace at a cut is dropped; nothing else is lost or reordered.
func Split(text string, max int, unit adapters.LengthUnit) []string {
	return SplitLines(text, max, 0, unit)
}

// SplitLines is Split with messages of at most maxLines lines as well (0: no line limit), for
// platforms whose UI clips tall messages; closing and reopened fence lines count.
func SplitLines(text string, max, maxLines int, unit adapters.LengthUnit) []string {
	text = strings.TrimRight(text, " \t\n")
	if strings.TrimSpace(text) == "" {
		return nil
	}
	if max <= 0 || Length(text, unit) <= max && fitsLines(text, maxLines) {
		return []string{text}
	}
	var parts []string
	var state fence // fence state at the start of rest
	rest := strings.TrimLeft(shortenOpeners(text, max, unit), "\n")
	for rest != "" {
		prefix := ""
		if state.open {
			prefix = state.opener + "\n"
		}
		budget := max - Length(prefix, unit)
		if Length(rest, unit) <= budget && fitsLines(prefix+rest, maxLines) {
			parts = append(parts, prefix+rest)
			break
		}
		cut, next := chooseCut(rest, lineBudget(rest, budget, maxLines, prefix != "", unit), state, unit)
		body := strings.TrimRight(rest[:cut], " \t\n")
		closer := ""
		if next.open {
			closer = "\n" + next.marker
		}
		if strings.TrimSpace(body) != "" {
			parts = append(parts, prefix+body+closer)
		}
		rest = afterCut(rest, cut)
		if next.open && rest != "" {
			// A fence-only remainder such as "```" closes the block we reopen: keep it whole.
			state = next
		} else {
			state = fence{}
		}
		if next.open && rest == "" {
			break
		}
	}
	return parts
}

// afterCut is what follows a cut of rest at i: blanks and blank lines are dropped, except the
// indentation of a next line that would otherwise turn into a code fence ("     ```" is code
// or prose, not a fence, and must stay so).
func afterCut(rest string, i int) string {
	s := strings.TrimLeft(rest[i:], " \t\n")
	if !strings.HasPrefix(s, "```") && !strings.HasPrefix(s, "~~~") {
		return s
	}
	lineStart := strings.LastIndexByte(rest[:len(rest)-len(s)], '\n') + 1
	if lineStart > i {
		return rest[lineStart:]
	}
	return s
}

// makesFence reports whether a cut of rest at i inside a line would start the next message
// with "```" or "~~~", such as "see ```x``` here" cut before the backticks: the next message
// would read it as a code fence.
func makesFence(rest string, i int) bool {
	if i < len(rest) && rest[i] == '\n' {
		return false // the next line stays as it is
	}
	s := strings.TrimLeft(rest[i:], " \t")
	return strings.HasPrefix(s, "```") || strings.HasPrefix(s, "~~~")
}

// shortenOpeners breaks each opening fence line longer than half a message of max units after
// its marker and language, or after the marker alone when the "language" is that long: an
// opener is repeated at the top of every message its block continues in. The rest of the line
// becomes the first line of the code, so nothing is lost; a cut through the opener itself
// would have shown the code as prose.
func shortenOpeners(text string, max int, unit adapters.LengthUnit) string {
	lines := strings.Split(text, "\n")
	var cur fence
	changed := false
	for i, line := range lines {
		m, ok := fenceLine(line)
		if !ok {
			continue
		}
		t := strings.TrimSpace(line)
		if cur.open {
			if strings.HasPrefix(t, cur.marker) && strings.Trim(t, cur.marker[:1]) == "" {
				cur = fence{}
			}
			continue
		}
		cur = fence{open: true, marker: m}
		limit := max / 2
		if Length(line, unit) <= limit {
			continue
		}
		head, tail := m, strings.TrimSpace(t[len(m):])
		if lang, more, _ := strings.Cut(tail, " "); Length(m+" "+lang, unit) <= limit {
			head, tail = m+" "+lang, strings.TrimSpace(more)
		}
		lines[i], changed = head+"\n"+tail, true
	}
	if !changed {
		return text
	}
	return strings.Join(lines, "\n")
}

// chooseCut picks where the next message ends in rest (starting in fence state st) so that the
// message, with a closing fence if it ends inside a code block, fits in budget units. It returns
// the byte offset of the cut and the fence state there.
func chooseCut(rest string, budget int, st fence, unit adapters.LengthUnit) (int, fence) {
	cs := &cutChoices{rest: rest, budget: budget, unit: unit}
	cs.scan(st)
	if c := cs.pick(); c != nil {
		return c.at, c.state
	}
	// Not even one grapheme fits (budget smaller than a cluster): cut after the first rune.
	_, size := utf8.DecodeRuneInString(rest)
	return size, st
}

// cutCandidate is one place chooseCut could end the message.
type cutCandidate struct {
	at      int
	quality int // 3 paragraph, 2 line, 1 space, 0 grapheme
	state   fence
	units   int // units of rest[:at]
}

// cutChoices holds, while chooseCut scans rest, the last cut that fits of each kind.
type cutChoices struct {
	rest       string
	budget     int
	unit       adapters.LengthUnit
	best       [4]*cutCandidate // by quality
	lastResort *cutCandidate    // a cut inside a fence line
	fenceMaker *cutCandidate    // a cut that starts the next message with "```" (a run too long to keep)
}

// fits reports whether the message up to c, closed with a fence if one is open there, fits.
func (cs *cutChoices) fits(c cutCandidate) bool {
	need := c.units
	if c.state.open {
		need += 1 + Length(c.state.marker, cs.unit)
	}
	return need <= cs.budget
}

// consider keeps c as the latest cut of its quality when it fits and cuts something off.
func (cs *cutChoices) consider(c cutCandidate) {
	if c.at == 0 || !cs.fits(c) {
		return
	}
	if makesFence(cs.rest, c.at) {
		cs.fenceMaker = &c
		return
	}
	cs.best[c.quality] = &c
}

// scan walks rest from fence state st until past the budget, considering every paragraph, line,
// word and grapheme boundary.
func (cs *cutChoices) scan(st fence) {
	rest := cs.rest
	units := 0
	lineStart := 0
	cur := st
	var prev rune = -1
	riRun := 0
	for i, r := range rest {
		if units > cs.budget {
			break
		}
		if r == '\n' {
			cur = fenceAfterLine(cur, rest[lineStart:i])
			q := 2
			if i > 0 && rest[i-1] == '\n' {
				q = 3
			}
			cs.consider(cutCandidate{at: i, quality: q, state: cur, units: units})
			lineStart = i + 1
		} else if inFenceMarker(rest[lineStart:i]) {
			// Cut a fence line ("```go") or its marker only when nothing else fits: both
			// halves would be read wrong.
			if prev >= 0 && !extendsCluster(prev, r, riRun) {
				if c := (cutCandidate{at: i, state: cur, units: units}); c.at > 0 && cs.fits(c) && !makesFence(rest, i) {
					cs.lastResort = &c
				}
			}
		} else if r == ' ' {
			cs.consider(cutCandidate{at: i, quality: 1, state: cur, units: units})
		} else if prev >= 0 && !extendsCluster(prev, r, riRun) {
			cs.consider(cutCandidate{at: i, quality: 0, state: cur, units: units})
		}
		if isRegional(r) {
			riRun++
		} else {
			riRun = 0
		}
		units += runeLen(r, cs.unit)
		prev = r
	}
}

// fenceAfterLine is the fence state after line, which starts in state cur: a fence line opens a
// code block, or closes the open one when it is that block's marker alone.
func fenceAfterLine(cur fence, line string) fence {
	m, ok := fenceLine(line)
	if !ok {
		return cur
	}
	if !cur.open {
		return fence{open: true, opener: strings.TrimLeft(line, " "), marker: m}
	}
	if strings.HasPrefix(strings.TrimSpace(line), cur.marker) && strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), cur.marker[:1])) == "" {
		return fence{}
	}
	return cur
}

// pick returns the cut to take: the best boundary kind that still fills a reasonable part of the
// message, else the best kind found at all, else a cut inside a fence line, else one that starts
// the next message with a fence; nil when nothing fits.
func (cs *cutChoices) pick() *cutCandidate {
	for q := 3; q >= 0; q-- {
		c := cs.best[q]
		if c == nil {
			continue
		}
		if q == 0 || c.units >= cs.budget/2 {
			return c
		}
	}
	for q := 3; q >= 0; q-- {
		if c := cs.best[q]; c != nil {
			return c
		}
	}
	if cs.lastResort != nil {
		return cs.lastResort
	}
	return cs.fenceMaker
}

// rollPart is one message of a streamed text rolled over message by message: its text and
// where in the source the next message continues, with the fence state there.
type rollPart struct {
	text string
	end  int // byte offset in the source after this part (the next one starts there)
	next fence
}

// rollCut cuts the first message of at most max units off src, which starts in fence state st
// (an open fence is reopened at the top of the message), the way Split cuts: paragraph, line,
// then word; a fence open at the cut is closed. ok is false when src fits in one message.
func rollCut(src string, max, maxLines int, unit adapters.LengthUnit, st fence) (rollPart, bool) {
	prefix := ""
	if st.open {
		prefix = st.opener + "\n"
	}
	budget := max - Length(prefix, unit)
	trimmed := strings.TrimRight(src, " \t\n")
	if budget < 1 || Length(trimmed, unit) <= budget && fitsLines(prefix+trimmed, maxLines) {
		return rollPart{}, false
	}
	cut, next := chooseCut(src, lineBudget(src, budget, maxLines, st.open, unit), st, unit)
	closer := ""
	if next.open {
		closer = "\n" + next.marker
	}
	rest := afterCut(src, cut)
	if !next.open || rest == "" {
		next = fence{}
	}
	return rollPart{text: prefix + strings.TrimRight(src[:cut], " \t\n") + closer, end: len(src) - len(rest), next: next}, true
}

// rollParts divides src, which starts in fence state st, into messages of at most max units
// with rollCut: the last one is what fits after the others. Offsets are into src.
func rollParts(src string, max, maxLines int, unit adapters.LengthUnit, st fence) []rollPart {
	var out []rollPart
	off := 0
	for off < len(src) {
		p, ok := rollCut(src[off:], max, maxLines, unit, st)
		if !ok {
			prefix := ""
			if st.open {
				prefix = st.opener + "\n"
			}
			if strings.TrimSpace(src[off:]) != "" {
				out = append(out, rollPart{text: strings.TrimRight(prefix+src[off:], " \t\n"), end: len(src), next: st})
			}
			break
		}
		p.end += off
		if strings.TrimSpace(strings.TrimPrefix(p.text, st.opener)) != "" {
			out = append(out, p)
		}
		off, st = p.end, p.next
	}
	return out
}

// fitsLines reports whether text has at most maxLines lines (0: any number).
func fitsLines(text string, maxLines int) bool {
	return maxLines <= 0 || strings.Count(text, "\n") < maxLines
}

// lineBudget lowers budget so that a cut of rest keeps a message within maxLines lines: the
// body ends at or before the newline that would start one line too many, leaving room for a
// reopened fence line (reopened) and a closing one.
func lineBudget(rest string, budget, maxLines int, reopened bool, unit adapters.LengthUnit) int {
	if maxLines <= 0 {
		return budget
	}
	lines := maxLines - 1 // a closing fence line may follow
	if reopened {
		lines--
	}
	lines = max(lines, 1)
	n, units := 0, 0
	for _, r := range rest {
		if units > budget {
			break
		}
		if r == '\n' {
			n++
			if n >= lines {
				return min(budget, max(units, 1))
			}
		}
		units += runeLen(r, unit)
	}
	return budget
}
