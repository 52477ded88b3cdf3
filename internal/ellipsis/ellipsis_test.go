package ellipsis_test

import (
	"testing"
	"unicode/utf8"

	"relaybot/internal/ellipsis"
)

// TestCutKeepsShortTextAndMarksLongText: text that fits is shown whole; longer text shows as many
// characters as fit, counted as people see them (runes, not bytes), the last being the mark.
func TestCutKeepsShortTextAndMarksLongText(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"fetch_url", 20, "fetch_url"},
		{"fetch_url", 9, "fetch_url"},
		{"fetch_url", 8, "fetch_u…"},
		{"héllo wörld", 6, "héllo…"},
		{"日本語のテキスト", 4, "日本語…"},
		{"", 3, ""},
		{"abc", 1, "…"},
		{"abc", 0, "…"},
	}
	for _, tc := range tests {
		got := ellipsis.Cut(tc.in, tc.n)
		if got != tc.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
		if utf8.RuneCountInString(got) > max(tc.n, 1) {
			t.Errorf("Cut(%q, %d) = %q is longer than %d characters", tc.in, tc.n, got, tc.n)
		}
	}
}
