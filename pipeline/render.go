package pipeline

import (
	"fmt"
	"strings"
	"time"

	"relaybot/adapters/markdown"
	"relaybot/audit"
	"relaybot/internal/ellipsis"
	"relaybot/tools"
)

// view is the text the user sees of a turn, which the turn's response (LangBot's response
// wrapper, made better) keeps and renders. Text written before a tool round stays and the next
// round continues below it; with tracking on, each tool call gets one status line that changes
// from running to its outcome; tool results are never shown.
type view struct {
	track  bool
	s      surface
	blocks []block // finished blocks: earlier rounds' text, tool status groups
	text   string  // the current round's text so far
	// sent is how many blocks went out in messages of their own (non-streaming rounds); the
	// view shows only the blocks after them.
	sent int
	// sources are the numbered places the answer may cite (sources.go), shown under the final
	// answer.
	sources []source
}

// block is a paragraph of the answer: model text, or the status lines of one tool round.
type block struct {
	text  string
	tools []toolLine
}

type toolLine struct {
	id, name string
	done     bool
	err      string
	took     time.Duration
	// pct is how far the running call got (when hasPct: it reported a total); msg what it
	// said last.
	pct    int
	hasPct bool
	msg    string
}

// String renders the status line as Markdown: the tool's name (the model's words), its progress
// message and its error (the tool's or its server's words) are escaped, so none of them
// becomes a link or formatting in the answer.
func (l toolLine) String() string {
	name := markdown.Escape(l.name)
	switch {
	case !l.done && (l.hasPct || l.msg != ""):
		s := "⏳ " + name
		if l.hasPct {
			s += fmt.Sprintf(" %d%%", l.pct)
		}
		if l.msg != "" {
			s += " — " + markdown.Escape(l.msg)
		}
		return s
	case !l.done:
		return "⏳ " + name + "…"
	case l.err != "":
		return "✗ " + name + ": " + markdown.Escape(l.err)
	default:
		return "✓ " + name + " " + tookText(l.took)
	}
}

// show renders the block for surface s; folded asks finished tool lines to fold away (the
// answer continues below them).
func (b block) show(s surface, folded bool) string {
	if len(b.tools) == 0 {
		return s.showReasoning(b.text)
	}
	lines := make([]string, len(b.tools))
	var took time.Duration
	failed, running := 0, false
	for i, l := range b.tools {
		lines[i] = l.String()
		took += l.took
		if l.err != "" {
			failed++
		}
		running = running || !l.done
	}
	if !folded || running {
		return strings.Join(lines, "\n")
	}
	summary := toolSummary(len(b.tools), failed, took)
	if s.discord {
		return summary
	}
	return s.fold(summary, strings.Join(lines, "\n"))
}

// toolSummary is the one line a finished group of tool calls folds into: "✓ 3 tools · 2.4 s".
func toolSummary(n, failed int, took time.Duration) string {
	noun := "tools"
	if n == 1 {
		noun = "tool"
	}
	if failed > 0 {
		return fmt.Sprintf("✗ %d %s, %d failed · %s", n, noun, failed, tookText(took))
	}
	return fmt.Sprintf("✓ %d %s · %s", n, noun, tookText(took))
}

// setText shows the current round's text so far (the whole text of the round, not a delta).
func (v *view) setText(s string) { v.text = s }

// endRound ends the current round's text: it stays visible and what comes next goes below it.
func (v *view) endRound() { v.closeText() }

// startTool adds a running status line for a call (only with tracking). Lines of calls that run
// one after another without text between them share one paragraph.
func (v *view) startTool(id, name string) {
	if !v.track {
		return
	}
	v.closeText()
	if n := len(v.blocks); n > 0 && len(v.blocks[n-1].tools) > 0 {
		v.blocks[n-1].tools = append(v.blocks[n-1].tools, toolLine{id: id, name: name})
		return
	}
	v.blocks = append(v.blocks, block{tools: []toolLine{{id: id, name: name}}})
}

// progressMsgMax caps a progress message in a status line.
const progressMsgMax = 80

// progress shows what a running call reported on its status line (only with tracking): the
// percentage when the call knows its total, and its last message.
func (v *view) progress(id string, p tools.Progress) {
	if !v.track {
		return
	}
	for bi := len(v.blocks) - 1; bi >= 0; bi-- {
		b := &v.blocks[bi]
		for i := range b.tools {
			l := &b.tools[i]
			if l.id == id && !l.done {
				if pct, ok := p.Percent(); ok {
					l.pct, l.hasPct = pct, true
				}
				if m := strings.Join(strings.Fields(p.Message), " "); m != "" {
					l.msg = ellipsis.Cut(m, progressMsgMax)
				}
				return
			}
		}
	}
}

// note adds a paragraph of its own (the round-cap notice).
func (v *view) note(s string) {
	v.closeText()
	v.blocks = append(v.blocks, block{text: s})
}

// finishTool marks one call's status line done with its outcome.
func (v *view) finishTool(id, name string, out tools.Outcome) {
	if !v.track {
		return
	}
	took, errMsg := out.Duration, toolError(out)
	for bi := len(v.blocks) - 1; bi >= 0; bi-- {
		b := &v.blocks[bi]
		for i := range b.tools {
			l := &b.tools[i]
			if !l.done && (l.id == id || (id == "" && l.name == name)) {
				l.done, l.took, l.err = true, took, shortError(errMsg)
				return
			}
		}
	}
	// A call the view did not see start still gets its line.
	v.closeText()
	v.blocks = append(v.blocks, block{tools: []toolLine{{id: id, name: name, done: true, took: took, err: shortError(errMsg)}}})
}

func (v *view) closeText() {
	if strings.TrimSpace(v.text) != "" {
		v.blocks = append(v.blocks, block{text: strings.TrimRight(v.text, " \n")})
	}
	v.text = ""
}

// sendBlocks returns the text of the blocks not sent yet and marks them sent: a finished
// round's message in non-streaming mode. Empty when there is nothing to send.
func (v *view) sendBlocks() string {
	text := v.render()
	if strings.TrimSpace(v.text) != "" {
		return "" // only whole rounds go out on their own
	}
	v.sent = len(v.blocks)
	return text
}

// render returns the visible answer: every block not sent on its own, then the current text.
// Reasoning shows the surface's way, and a group of finished tool lines folds away once the
// answer continues below it.
func (v *view) render() string {
	blocks := v.blocks[v.sent:]
	parts := make([]string, 0, len(blocks)+1)
	current := v.s.showReasoning(v.text)
	// Tool lines fold once text follows them: lastText is the last block with text (or past
	// the end when the current round has some).
	lastText := -1
	if strings.TrimSpace(current) != "" {
		lastText = len(blocks)
	} else {
		for i := len(blocks) - 1; i >= 0; i-- {
			if len(blocks[i].tools) == 0 && strings.TrimSpace(blocks[i].show(v.s, false)) != "" {
				lastText = i
				break
			}
		}
	}
	for i, b := range blocks {
		if t := b.show(v.s, i < lastText); strings.TrimSpace(t) != "" {
			parts = append(parts, t)
		}
	}
	if strings.TrimSpace(current) != "" {
		parts = append(parts, current)
	}
	return strings.Join(parts, "\n\n")
}

// withNote returns the answer with a note after it: inline (the stopped marker ends the sentence
// that was cut short) or as a paragraph of its own (a failure hint or error).
func (v *view) withNote(note string, inline bool) string {
	text := v.render()
	switch {
	case note == "":
		return text
	case text == "":
		return note
	case inline && strings.TrimSpace(v.text) != "":
		return strings.TrimRight(text, " \n") + " " + note
	default:
		return text + "\n\n" + note
	}
}

// toolError is the error of a failed call for its status line, read from the outcome's status
// and error; empty on success.
func toolError(o tools.Outcome) string {
	switch {
	case o.Status == audit.StatusOK || (o.Status == "" && o.Err == nil):
		return ""
	case o.Err != nil:
		return o.Err.Error()
	default:
		return string(o.Status)
	}
}

// tookText renders how long a tool call took, for the status line and /audit: "1.2 s", or "35 ms" under a second,
// where a rounded "0.0 s" would tell the user nothing.
func tookText(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// shortError keeps the first line of a tool's error, at most 120 characters, for a status line.
func shortError(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return ellipsis.Cut(s, 120)
}
