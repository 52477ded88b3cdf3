package media

import (
	"fmt"
	"unicode/utf8"
)

// EstimateTokens estimates the tokens of a text the way the pipeline's budget does: one token
// per four bytes of ASCII and one per other character.
func EstimateTokens(s string) int {
	ascii, other := 0, 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			ascii++
			i++
			continue
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		i += n
		other++
	}
	return (ascii+3)/4 + other
}

// Cut returns text cut to about maxTokens tokens (EstimateTokens) at a line end where there is
// one in the last tenth, with a note after it saying how much was left out; the text as it is
// when it fits. left is the number of characters left out.
func Cut(text string, maxTokens int) (out string, left int) {
	if EstimateTokens(text) <= maxTokens {
		return text, 0
	}
	if maxTokens < 0 {
		maxTokens = 0
	}
	// Walk forward until the estimate reaches the budget.
	ascii, other, end := 0, 0, 0
	for end < len(text) {
		r, n := utf8.DecodeRuneInString(text[end:])
		if r < utf8.RuneSelf {
			ascii++
		} else {
			other++
		}
		if (ascii+3)/4+other > maxTokens {
			break
		}
		end += n
	}
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
