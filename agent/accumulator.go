package agent

import (
	"bytes"
	"encoding/json"
	"relaybot/chat"
	"strconv"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// accumulator assembles one round's streamed answer. It counts raw chunks and tells the caller
// when to emit: on the first chunk that gives the round visible text (so the user sees the
// answer begin with the model's first words, not eight chunks later), then every flushEvery
// chunks, and on the chunk that carries the finish_reason.
type accumulator struct {
	round       int // the turn's round, for the ids of calls the provider sent without one
	flushEvery  int
	removeThink bool

	chunks    int
	visible   bool // the round's text has shown something other than white space
	finish    openai.FinishReason
	content   strings.Builder // raw content (without RemoveThink)
	reasoning strings.Builder // reasoning_content deltas
	strip     thinkStripper   // content with RemoveThink
	calls     []callState
}

type callState struct {
	index int
	id    string
	name  string
	args  []byte // not a strings.Builder: callStates move when the slice grows
}

func newAccumulator(round, flushEvery int, removeThink bool) *accumulator {
	return &accumulator{round: round, flushEvery: flushEvery, removeThink: removeThink}
}

// add merges one raw chunk's choice and reports whether a Chunk event is due. Chunks after the
// finish_reason are ignored.
func (a *accumulator) add(c *openai.ChatCompletionStreamChoice) (flush bool) {
	if a.finish != "" {
		return false
	}
	a.chunks++
	d := &c.Delta
	if d.Content != "" {
		if a.removeThink {
			a.strip.feed(d.Content)
		} else {
			a.content.WriteString(d.Content)
		}
	}
	if d.ReasoningContent != "" {
		a.reasoning.WriteString(d.ReasoningContent)
	}
	for i := range d.ToolCalls {
		a.mergeCall(&d.ToolCalls[i])
	}
	if c.FinishReason != "" {
		a.finish = c.FinishReason
		a.strip.finish()
		return true
	}
	if !a.visible && a.hasVisibleText() {
		a.visible = true
		return true
	}
	return a.chunks%a.flushEvery == 0
}

// hasVisibleText reports whether text() would show the user anything but white space. It is
// asked only until the first time it holds, over text that is all white space until then.
func (a *accumulator) hasVisibleText() bool {
	if a.removeThink {
		return strings.TrimSpace(a.strip.shown.String()) != ""
	}
	return strings.TrimSpace(a.reasoning.String()) != "" || strings.TrimSpace(a.content.String()) != ""
}

// mergeCall folds one tool-call fragment into its call: by index when the provider sends one,
// else by id, else into the latest call. The first id wins; the name is what arrived before the
// arguments.
func (a *accumulator) mergeCall(tc *openai.ToolCall) {
	var cs *callState
	switch {
	case tc.Index != nil:
		for i := range a.calls {
			if a.calls[i].index == *tc.Index {
				cs = &a.calls[i]
				break
			}
		}
		if cs == nil {
			cs = a.newCall(*tc.Index)
		}
	case tc.ID != "":
		for i := range a.calls {
			if a.calls[i].id == tc.ID {
				cs = &a.calls[i]
				break
			}
		}
		if cs == nil {
			next := 0
			for i := range a.calls {
				next = max(next, a.calls[i].index+1)
			}
			cs = a.newCall(next)
		}
	case len(a.calls) > 0:
		cs = &a.calls[len(a.calls)-1]
	default:
		cs = a.newCall(0)
	}
	if cs.id == "" {
		cs.id = tc.ID
	}
	if len(cs.args) == 0 {
		cs.name = mergeName(cs.name, tc.Function.Name)
	}
	cs.args = append(cs.args, tc.Function.Arguments...)
}

// mergeName folds a fragment of a call's name into the name so far. Most providers send the name
// whole in the call's first fragment; some split it over the chunks before the arguments, and
// some repeat it (whole, or the name so far). A name arriving once the arguments have begun is
// ignored by the caller: the call is named by then.
func mergeName(name, frag string) string {
	switch {
	case frag == "", frag == name:
		return name
	case strings.HasPrefix(frag, name):
		return frag
	}
	return name + frag
}

// attachExtras gives the message's tool calls, and the message, the raw fields the provider sent
// with them (m.ToolCalls must be toolCalls()'s result, in order).
func (a *accumulator) attachExtras(m *chat.Message, got wireExtras, reasoningContent bool) {
	m.Extra = got.Message
	if reasoningContent && a.reasoning.Len() > 0 {
		m.ReasoningField = reasoningContentField
	}
	for i := range m.ToolCalls {
		if i >= len(a.calls) {
			break
		}
		c := &a.calls[i]
		extra := got.Calls[callKey(c.id, -1)]
		if byIndex := got.Calls[callKey("", c.index)]; len(byIndex) > 0 {
			if len(extra) == 0 {
				extra = byIndex
			} else {
				var fields map[string]json.RawMessage
				if json.Unmarshal(byIndex, &fields) == nil {
					for k, v := range fields {
						extra = setField(extra, k, v)
					}
				}
			}
		}
		m.ToolCalls[i].Extra = extra
	}
}

func (a *accumulator) newCall(index int) *callState {
	// Keep calls ordered by index.
	pos := len(a.calls)
	for pos > 0 && a.calls[pos-1].index > index {
		pos--
	}
	a.calls = append(a.calls, callState{})
	copy(a.calls[pos+1:], a.calls[pos:])
	a.calls[pos] = callState{index: index}
	return &a.calls[pos]
}

// text is what the user is shown of this round so far: the content (think blocks stripped with
// RemoveThink), preceded by the reasoning in a <think> block when it is not removed.
func (a *accumulator) text() string {
	if a.removeThink {
		// Like LangBot, the shown text is trimmed: a removed block leaves no blank lead.
		if a.finish != "" {
			return strings.TrimSpace(a.strip.shown.String())
		}
		return strings.TrimLeft(a.strip.shown.String(), " \t\r\n")
	}
	if a.reasoning.Len() == 0 {
		return a.content.String()
	}
	closing := ""
	if a.content.Len() > 0 || a.finish != "" {
		closing = "\n</think>\n"
	}
	return "<think>\n" + a.reasoning.String() + closing + a.content.String()
}

// toolCalls returns the assembled calls; a call without id gets "call_{round}_{index}", unique
// across the turn (the model is sent every round's calls, and history pairs results by id), and
// empty arguments become "{}".
func (a *accumulator) toolCalls() []chat.ToolCall {
	if len(a.calls) == 0 {
		return nil
	}
	out := make([]chat.ToolCall, len(a.calls))
	for i := range a.calls {
		c := &a.calls[i]
		out[i] = chat.ToolCall{ID: a.callID(c), Name: c.name, Arguments: normalizeArgs(string(c.args))}
	}
	return out
}

// cutCall returns the id (as toolCalls reports it) of the call whose arguments the length limit
// cut off, or "" when none was. Only the last call can be cut: the stream moved on from the others.
// It is cut when the answer ended with finish_reason "length" and its arguments are empty or not
// complete JSON.
func (a *accumulator) cutCall() string {
	if a.finish != openai.FinishReasonLength || len(a.calls) == 0 {
		return ""
	}
	c := &a.calls[len(a.calls)-1]
	if len(bytes.TrimSpace(c.args)) > 0 && json.Valid(c.args) {
		return ""
	}
	return a.callID(c)
}

// callID is the provider's id of c, or "call_{round}_{index}" when it sent none.
func (a *accumulator) callID(c *callState) string {
	if c.id != "" {
		return c.id
	}
	return "call_" + strconv.Itoa(a.round) + "_" + strconv.Itoa(c.index)
}

// message is the round's answer for the history.
func (a *accumulator) message() chat.Message {
	m := chat.Message{Role: chat.RoleAssistant, ToolCalls: a.toolCalls()}
	if a.removeThink {
		m.Content = strings.TrimSpace(a.strip.shown.String())
		m.Reasoning = joinReasoning(a.reasoning.String(), a.strip.reasoning.String())
	} else {
		m.Content = a.content.String()
		m.Reasoning = a.reasoning.String()
	}
	return m
}

func joinReasoning(a, b string) string {
	switch {
	case a == "":
		return strings.TrimSpace(b)
	case strings.TrimSpace(b) == "":
		return a
	}
	return a + "\n" + strings.TrimSpace(b)
}

// normalizeArgs maps empty (or blank) arguments to "{}".
func normalizeArgs(s string) string {
	if strings.TrimSpace(s) == "" {
		return "{}"
	}
	return s
}
