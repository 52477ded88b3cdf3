package retrieval

import (
	"maps"
	"strings"
	"testing"
)

// lexemes reads what PostgreSQL writes of a tsvector: quoted lexemes with their escapes, with
// and without positions and weights.
func TestLexemesReadATSVectorsText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]uint16
	}{
		{"", map[string]uint16{}},
		{"'leave':1,5 'policy':2", map[string]uint16{"leave": 2, "policy": 1}},
		{"'a':1A,2B,3C 'b'", map[string]uint16{"a": 3, "b": 1}},
		{`'it''s':1 'back\\slash':2 'c:d':3,4`, map[string]uint16{"it's": 1, `back\slash`: 1, "c:d": 2}},
		{"'café':1 'über':2,3", map[string]uint16{"café": 1, "über": 2}},
		{"'open", map[string]uint16{}},
		{"'a':1 junk 'b':2", map[string]uint16{"a": 1}},
	} {
		got := maps.Collect(lexemes(tc.in))
		if !maps.Equal(got, tc.want) {
			t.Errorf("lexemes(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// FuzzLexemes: any text read as a tsvector's stops or yields, never panics, and yields
// lexemes no longer than the text.
func FuzzLexemes(f *testing.F) {
	for _, s := range []string{"'leave':1,5 'policy':2", `'it''s':1 'back\\slash':2`, "'a", "'a':1A,2B 'b'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for lexeme, hits := range lexemes(s) {
			if len(lexeme) > len(s) || hits == 0 || strings.Count(s, "'") < 2 {
				t.Fatalf("lexemes(%q) yielded %q ×%d", s, lexeme, hits)
			}
		}
	})
}
