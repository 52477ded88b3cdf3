package admin

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// attachment is a file a member sent, as their saved message names it.
type attachment struct {
	Name, Kind string
}

// fileBlock is a document the pipeline read into a member's message: `[File "name" (kind)]`,
// its text, `[End of "name"]` (pipeline/media.go). notRead is its note on files it could not read.
var (
	fileBlock = regexp.MustCompile(`(?s)\[File ("(?:[^"\\]|\\.)*") \(([^)\n]*)\)\]\n.*?\n\[End of ("(?:[^"\\]|\\.)*")\]`)
	notRead   = regexp.MustCompile(`\[Not read: [^\]]*\]`)
)

// splitAttachments separates what a member typed from the documents the bot read into their
// message (the member saw a file, not its text) and the note on files it could not read, which
// stays in the text.
func splitAttachments(text string) (string, []attachment) {
	var files []attachment
	out := fileBlock.ReplaceAllStringFunc(text, func(block string) string {
		m := fileBlock.FindStringSubmatch(block)
		name, err := strconv.Unquote(m[1])
		if err != nil {
			name = m[1]
		}
		files = append(files, attachment{Name: name, Kind: m[2]})
		return ""
	})
	return strings.TrimSpace(out), files
}

// runeLower is text's runes lower-cased one by one, so an index into it is an index into text's runes.
func runeLower(text []rune) []rune {
	out := make([]rune, len(text))
	for i, r := range text {
		out[i] = unicode.ToLower(r)
	}
	return out
}

// wordAt reports whether a search word (lower case) starts a word of lower at i.
func wordAt(lower []rune, i int, word []rune) bool {
	if i > 0 && (unicode.IsLetter(lower[i-1]) || unicode.IsDigit(lower[i-1])) {
		return false
	}
	if i+len(word) > len(lower) {
		return false
	}
	for j, r := range word {
		if lower[i+j] != r {
			return false
		}
	}
	return true
}

// matchAt is the length of the search word starting a word of lower at i, 0 when none does.
func matchAt(lower []rune, i int, words [][]rune) int {
	for _, w := range words {
		if len(w) > 0 && wordAt(lower, i, w) {
			return len(w)
		}
	}
	return 0
}

func runesOf(words []string) [][]rune {
	out := make([][]rune, len(words))
	for i, w := range words {
		out[i] = []rune(w)
	}
	return out
}

// excerpt is up to n runes of text on one line around the first place a search word starts a
// word, with "…" where it was cut.
func excerpt(text string, words []string, n int) string {
	runes := []rune(strings.Join(strings.Fields(text), " "))
	if len(runes) <= n {
		return string(runes)
	}
	lower, ws := runeLower(runes), runesOf(words)
	start := 0
	for i := range lower {
		if matchAt(lower, i, ws) > 0 {
			start = max(0, i-n/3)
			break
		}
	}
	end := min(len(runes), start+n)
	start = max(0, end-n)
	out := string(runes[start:end])
	if start > 0 {
		out = "…" + out
	}
	if end < len(runes) {
		out += "…"
	}
	return out
}

// textPart is a piece of text, Hit when it is a search word found.
type textPart struct {
	Text string
	Hit  bool
}

// highlight splits text into the search words found (each where it starts a word) and the
// rest, for a page to mark the words.
func highlight(text string, words []string) []textPart {
	runes := []rune(text)
	lower, ws := runeLower(runes), runesOf(words)
	var out []textPart
	plain := 0
	for i := 0; i < len(lower); {
		n := matchAt(lower, i, ws)
		if n == 0 {
			i++
			continue
		}
		if plain < i {
			out = append(out, textPart{Text: string(runes[plain:i])})
		}
		out = append(out, textPart{Text: string(runes[i : i+n]), Hit: true})
		i += n
		plain = i
	}
	if plain < len(runes) {
		out = append(out, textPart{Text: string(runes[plain:])})
	}
	return out
}
