// Package ellipsis shortens text that people read in one line — a status line, a table cell, a
// chart label — and marks the cut with Mark. Text for the model is capped by tools.Truncate, which
// says how much was cut; a message for a platform is cut by the delivery engine, which knows the
// platform's length unit and grapheme boundaries.
package ellipsis

import "unicode/utf8"

// Mark ends text that was cut.
const Mark = "…"

// Cut returns s when it has at most n characters (runes); otherwise its first n-1 characters and
// Mark, n characters in all. n below 1 counts as 1.
func Cut(s string, n int) string {
	n = max(n, 1)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for i = range s {
		if count == n-1 {
			break
		}
		count++
	}
	return s[:i] + Mark
}
