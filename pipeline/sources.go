package pipeline

import (
	"fmt"
	"strings"

	"relaybot/adapters/markdown"
)

// source is one numbered place an answer may cite: a knowledge base's passage, as its tool
// call or the turn's knowledge block numbered it.
type source struct {
	n     int
	where string
}

// addSources keeps a list of numbered places ([1] first) for the final answer.
func (v *view) addSources(list []string) {
	for i, w := range list {
		s := source{n: i + 1, where: w}
		dup := false
		for _, have := range v.sources {
			dup = dup || have == s
		}
		if !dup {
			v.sources = append(v.sources, s)
		}
	}
}

// sourcesBlock is the answer's Sources as the surface shows a fold: on Telegram an expandable
// quote and on the web a <details> block, on Discord a footer of subtext lines. When the answer
// cites some by number ("[2]") only those are listed, else every one; "" when there are none.
func (v *view) sourcesBlock(answer string) string {
	var cited []source
	for _, s := range v.sources {
		if strings.Contains(answer, fmt.Sprintf("[%d]", s.n)) {
			cited = append(cited, s)
		}
	}
	if len(cited) == 0 {
		cited = v.sources
	}
	if len(cited) == 0 {
		return ""
	}
	lines := make([]string, len(cited))
	for i, s := range cited {
		lines[i] = markdown.Escape(fmt.Sprintf("[%d] %s", s.n, s.where))
	}
	return v.s.fold("📚 Sources", strings.Join(lines, "\n\n"))
}
