package pipeline

import (
	"strings"

	"relaybot/chat"
)

// surface is how a platform shows what the view folds away: Telegram and the web chat render
// a <details> block (Telegram as an expandable blockquote, adapters/markdown; the web chat as
// <details>); Discord has no such thing, so it gets small -# subtext lines and one compact line
// for finished tools.
type surface struct {
	discord   bool
	reasoning Reasoning
}

func newSurface(p chat.Platform, reasoning Reasoning) surface {
	if reasoning == "" {
		reasoning = ReasoningCollapsed
	}
	return surface{discord: p == chat.Discord, reasoning: reasoning}
}

// fold shows body collapsed under summary.
func (s surface) fold(summary, body string) string {
	body = strings.Trim(body, "\n")
	if s.discord {
		lines := []string{"-# " + summary}
		for _, l := range strings.Split(body, "\n") {
			if strings.TrimSpace(l) != "" {
				lines = append(lines, "-# "+strings.TrimSpace(l))
			}
		}
		return strings.Join(lines, "\n")
	}
	if body == "" {
		return "<details>\n<summary>" + escapeSummary(summary) + "</summary>\n\n</details>"
	}
	return "<details>\n<summary>" + escapeSummary(summary) + "</summary>\n\n" + body + "\n\n</details>"
}

func escapeSummary(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// quote shows text as a Markdown quote.
func quote(text string) string {
	lines := strings.Split(strings.Trim(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "> " + l
	}
	return strings.Join(lines, "\n")
}

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// showReasoning replaces the <think> blocks of a round's text (the agent puts
// reasoning_content there, and some models write them inline) with the surface's way of
// showing reasoning: never the raw tags. A block still open (the model is thinking) runs to the
// end of the text; a </think> with no opening tag makes what comes before it reasoning.
func (s surface) showReasoning(text string) string {
	if !strings.Contains(text, thinkOpen) && !strings.Contains(text, thinkClose) {
		return text
	}
	var out []string
	rest := text
	if i, j := strings.Index(rest, thinkClose), strings.Index(rest, thinkOpen); i >= 0 && (j < 0 || i < j) {
		out = append(out, s.reasoningBlock(rest[:i], true))
		rest = rest[i+len(thinkClose):]
	}
	for {
		i := strings.Index(rest, thinkOpen)
		if i < 0 {
			out = append(out, rest)
			break
		}
		out = append(out, rest[:i])
		rest = rest[i+len(thinkOpen):]
		j := strings.Index(rest, thinkClose)
		if j < 0 {
			out = append(out, s.reasoningBlock(rest, false))
			rest = ""
			break
		}
		out = append(out, s.reasoningBlock(rest[:j], true))
		rest = rest[j+len(thinkClose):]
	}
	var kept []string
	for _, p := range out {
		if p = strings.Trim(p, " \t\n"); p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "\n\n")
}

// reasoningBlock is one block of reasoning as the surface shows it; done is false while the
// model is still in it.
func (s surface) reasoningBlock(r string, done bool) string {
	r = strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(r, thinkOpen, ""), thinkClose, ""))
	if r == "" || s.reasoning == ReasoningHidden {
		return ""
	}
	summary := "💭 Thinking…"
	if done {
		summary = "💭 Thought"
	}
	if s.reasoning == ReasoningInline {
		return quote(summary + "\n" + r)
	}
	return s.fold(summary, r)
}
