package extract

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// block is a span of a document's text the chunker keeps in one chunk where it fits: a
// paragraph, a heading's line, a list, a code block, a CSV row, a PDF page's paragraph.
// Readers give blocks in order, trimmed of white space, never overlapping.
type block struct {
	start, end int
	// section numbers the run of blocks a chunk may span: a heading or a page starts a new one.
	section  int
	headings []string
	page     int
	// atomic marks a block never cut, and never entered by an overlap (a CSV row).
	atomic bool
	// prefix is put before a chunk of the section that does not begin with its first block
	// (a CSV header line).
	prefix string
}

// unit is a block, or a piece of a block longer than a chunk.
type unit struct {
	start, end int
	atomic     bool
	// cont marks a piece of a block after its first: the cut before it may be mid-sentence.
	cont bool
}

// chunk cuts text into chunks along blocks: a chunk never crosses a section; it holds whole
// blocks up to o.TargetChars, a longer block cut at its line, sentence or word ends; a chunk
// after the first of a section begins up to o.OverlapChars before the end of the one before,
// at a sentence or paragraph start.
func chunk(text string, blocks []block, o ChunkOptions) []Chunk {
	var out []Chunk
	for i := 0; i < len(blocks); {
		j := i + 1
		for j < len(blocks) && blocks[j].section == blocks[i].section {
			j++
		}
		out = appendSection(out, text, blocks[i:j], o)
		i = j
	}
	return out
}

// appendSection appends the chunks of one section's blocks.
func appendSection(out []Chunk, text string, blocks []block, o ChunkOptions) []Chunk {
	var units []unit
	for _, b := range blocks {
		if b.atomic {
			units = append(units, unit{start: b.start, end: b.end, atomic: true})
			continue
		}
		units = cutBlock(units, text, b.start, b.end, o.TargetChars)
	}
	if len(units) == 0 {
		return out
	}
	head := blocks[0]
	prefix := utf8.RuneCountInString(head.prefix) + 1
	first := units[0].start
	s := first
	for k := 0; k < len(units); {
		size := utf8.RuneCountInString(text[s:units[k].end])
		if s != first && head.prefix != "" {
			size += prefix
		}
		end := units[k].end
		for k++; k < len(units); k++ {
			more := utf8.RuneCountInString(text[end:units[k].end])
			if size+more > o.TargetChars {
				break
			}
			size += more
			end = units[k].end
		}
		c := Chunk{Text: text[s:end], Page: head.page, Headings: head.headings, Start: s, End: end}
		if s != first && head.prefix != "" {
			c.Text = head.prefix + "\n" + c.Text
		}
		out = append(out, c)
		if k < len(units) {
			// The overlap and the next unit together fit the target.
			room := o.TargetChars - utf8.RuneCountInString(text[end:units[k].end])
			if head.prefix != "" {
				room -= prefix
			}
			s = overlapStart(text, units, s, end, units[k], min(o.OverlapChars, room))
		}
	}
	return out
}

// cutBlock appends the block text[a:b] as units of at most target runes: whole when it fits,
// else cut at a line end, a sentence end or a word end in the later half of each piece, else at
// a word end anywhere, else at a rune boundary.
func cutBlock(units []unit, text string, a, b, target int) []unit {
	cont := false
	for a < b {
		lim := advance(text, a, b, target)
		if lim == b {
			return append(units, unit{a, b, false, cont})
		}
		c := breakBefore(text, a, lim)
		if s, e := trimSpan(text, a, c); s < e {
			units = append(units, unit{s, e, false, cont})
			cont = true
		}
		a, _ = trimSpan(text, c, b)
	}
	return units
}

// advance returns the byte offset n runes after a, or b when that is past it.
func advance(text string, a, b, n int) int {
	for i := range text[a:b] {
		if n == 0 {
			return a + i
		}
		n--
	}
	return b
}

// breakBefore returns where to cut text[a:lim]: after the last newline, else after the last
// sentence end, in its later half; else after its last white space; else lim.
func breakBefore(text string, a, lim int) int {
	mid := a + (lim-a)/2
	if i := strings.LastIndexByte(text[mid:lim], '\n'); i >= 0 {
		return mid + i + 1
	}
	for p := lim; p > mid; {
		r, size := utf8.DecodeLastRuneInString(text[mid:p])
		if unicode.IsSpace(r) && sentenceEndBefore(text, mid, p-size) {
			return p
		}
		if isFullStop(r) {
			return p
		}
		p -= size
	}
	for p := lim; p > a; {
		r, size := utf8.DecodeLastRuneInString(text[a:p])
		if unicode.IsSpace(r) {
			return p
		}
		p -= size
	}
	return lim
}

// sentenceEndBefore reports whether text[from:p] ends in a sentence's last mark.
func sentenceEndBefore(text string, from, p int) bool {
	r, _ := utf8.DecodeLastRuneInString(text[from:p])
	return r == '.' || r == '!' || r == '?' || r == ':' || r == ';' || isFullStop(r)
}

// isFullStop reports whether r ends a sentence with no space after it (CJK punctuation).
func isFullStop(r rune) bool {
	return r == '。' || r == '！' || r == '？'
}

// overlapStart returns where the chunk after text[s:end], whose next unit is next, begins: the
// earliest unit start or (inside a unit that may be entered) sentence start that repeats at
// most overlap runes of it; else, when next goes on a block cut mid-sentence, the earliest word
// start; else next's start.
func overlapStart(text string, units []unit, s, end int, next unit, overlap int) int {
	sentence, word := -1, -1
	p := end
	for n := 0; n < overlap && p > s; n++ {
		_, size := utf8.DecodeLastRuneInString(text[s:p])
		p -= size
		if p == s {
			break
		}
		switch i := unitAt(units, p); {
		case units[i].start == p:
			sentence = p
		case units[i].atomic:
		case startsSentence(text, units[i].start, p):
			sentence = p
		case startsWord(text, units[i].start, p):
			word = p
		}
	}
	switch {
	case sentence >= 0:
		return sentence
	case word >= 0 && next.cont:
		return word
	}
	return next.start
}

// unitAt returns the index of the unit holding offset p (the last that starts at or before it).
func unitAt(units []unit, p int) int {
	return max(sort.Search(len(units), func(i int) bool { return units[i].start > p })-1, 0)
}

// startsWord reports whether a word starts at p in a text that started at from: not space, after
// space.
func startsWord(text string, from, p int) bool {
	r, _ := utf8.DecodeRuneInString(text[p:])
	prev, _ := utf8.DecodeLastRuneInString(text[from:p])
	return !unicode.IsSpace(r) && unicode.IsSpace(prev)
}

// startsSentence reports whether a sentence starts at p: a word start after a line end or a
// sentence's last mark, or right after a CJK full stop.
func startsSentence(text string, from, p int) bool {
	prev, _ := utf8.DecodeLastRuneInString(text[from:p])
	if isFullStop(prev) {
		r, _ := utf8.DecodeRuneInString(text[p:])
		return !unicode.IsSpace(r)
	}
	if !startsWord(text, from, p) {
		return false
	}
	q := p
	for q > from {
		r, size := utf8.DecodeLastRuneInString(text[from:q])
		if r == '\n' {
			return true
		}
		if !unicode.IsSpace(r) {
			break
		}
		q -= size
	}
	return q > from && sentenceEndBefore(text, from, q)
}

// trimSpan returns text[a:b]'s bounds without the white space at either end.
func trimSpan(text string, a, b int) (int, int) {
	for a < b {
		r, size := utf8.DecodeRuneInString(text[a:b])
		if !unicode.IsSpace(r) {
			break
		}
		a += size
	}
	for b > a {
		r, size := utf8.DecodeLastRuneInString(text[a:b])
		if !unicode.IsSpace(r) {
			break
		}
		b -= size
	}
	return a, b
}
