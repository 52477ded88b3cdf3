package media

import (
	"fmt"
	"sort"
	"unicode/utf8"
)

// Cut returns text cut to at most maxTokens tokens as estimate counts them (the pipeline's
// budget estimate), at a line end where there is one in the last tenth, with a note after it
// saying how much was left out; the text as it is when it fits. left is the number of
// characters left out.
func Cut(text string, maxTokens int, estimate func(string) int) (out string, left int) {
	if estimate(text) <= maxTokens {
		return text, 0
	}
	// The longest prefix that fits, by bisection over byte offsets moved to rune starts.
	end := sort.Search(len(text)+1, func(i int) bool {
		for i < len(text) && !utf8.RuneStart(text[i]) {
			i++
		}
		return estimate(text[:i]) > maxTokens
	}) - 1
	for end > 0 && !utf8.RuneStart(text[end]) {
		end--
	}
	end = max(end, 0)
	if nl := lastNewline(text[:end]); nl >= 0 && nl >= end*9/10 {
		end = nl + 1
	}
	kept := text[:end]
	left = utf8.RuneCountInString(text[end:])
	total := utf8.RuneCountInString(text)
	return kept + fmt.Sprintf("\n[… %d of %d characters (%d%%) left out: the document is longer than its share of the model's context]",
		left, total, left*100/max(total, 1)), left
}

func lastNewline(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			return i
		}
	}
	return -1
}
