package agent

import "strings"

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// thinkStripper removes <think>…</think> blocks from streamed text, tags split across chunks
// included. A </think> that arrives before any <think> (models that start reasoning without the
// opening tag) makes everything before it reasoning, even text already passed through: callers
// display Shown() afresh at each flush, so the retraction is visible.
type thinkStripper struct {
	shown     strings.Builder
	reasoning strings.Builder
	pending   string // a suffix that may be the start of a tag
	inside    bool
	sawTag    bool // any tag seen: a later </think> is no longer a leading orphan
}

// feed adds raw text.
func (t *thinkStripper) feed(s string) {
	if t.pending != "" {
		s = t.pending + s
		t.pending = ""
	}
	for s != "" {
		if t.inside {
			if i := strings.Index(s, thinkClose); i >= 0 {
				t.reasoning.WriteString(s[:i])
				s = s[i+len(thinkClose):]
				t.inside = false
				continue
			}
			keep := partialSuffix(s, thinkClose)
			t.reasoning.WriteString(s[:len(s)-keep])
			t.pending = s[len(s)-keep:]
			return
		}
		open := strings.Index(s, thinkOpen)
		if !t.sawTag {
			if c := strings.Index(s, thinkClose); c >= 0 && (open < 0 || c < open) {
				// Leading orphan close: all text so far was reasoning.
				t.reasoning.WriteString(t.shown.String())
				t.reasoning.WriteString(s[:c])
				t.shown.Reset()
				t.sawTag = true
				s = s[c+len(thinkClose):]
				continue
			}
		}
		if open >= 0 {
			t.shown.WriteString(s[:open])
			s = s[open+len(thinkOpen):]
			t.inside = true
			t.sawTag = true
			continue
		}
		keep := partialSuffix(s, thinkOpen)
		if !t.sawTag {
			keep = max(keep, partialSuffix(s, thinkClose))
		}
		t.shown.WriteString(s[:len(s)-keep])
		t.pending = s[len(s)-keep:]
		return
	}
}

// finish releases text held back as a possible partial tag.
func (t *thinkStripper) finish() {
	if t.pending == "" {
		return
	}
	if t.inside {
		t.reasoning.WriteString(t.pending)
	} else {
		t.shown.WriteString(t.pending)
	}
	t.pending = ""
}

// partialSuffix returns the length of the longest proper suffix of s that is a prefix of tag.
func partialSuffix(s, tag string) int {
	n := min(len(s), len(tag)-1)
	for ; n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}
