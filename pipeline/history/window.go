package history

import (
	"unicode/utf8"

	"relaybot/chat"
)

// The history a turn is sent is chosen so that its requests share the longest prefix with the
// requests before it: providers serve a repeated prefix from their prompt cache, at a fraction
// of the price and sooner, only when it is byte for byte the same (decision 049).
//
//   - Rounds are sent whole and in order from a start that moves in blocks, never round by
//     round: while the history fits, each turn only appends to what the turn before sent.
//   - With compaction (the default) the start is the conversation's summary: older rounds are
//     summarised in one go when the history passes CompactAt of its room (or the rounds cap),
//     down to keepShare of the room, and nothing is elided in between.
//   - Without it (or when a summary fails) the rounds are replayed from the first one read: when
//     they pass the room, a block of the oldest is left out at once, down to half of it, and the
//     older tool results beyond ToolResultShare are elided then. An elided result stays elided;
//     a kept one stays whole until the next cut. Replaying the same rounds gives the same cuts,
//     so no state is kept between turns.

// keepShare is the share of the history's room the rounds kept after a compaction may fill: the
// newest rounds stay readable, and the history grows from there for a while before the next
// summary (each summary changes the prompt from the summary on, which the provider's cache then
// cannot serve).
const keepShare = 0.25

// cutTo is the share of the room left after a block of rounds is left out.
const cutTo = 0.5

// roundCost is what one round costs, in corrected tokens, with its tool results whole and
// elided.
type roundCost struct {
	whole, elided, tools int
}

// costs measures h's rounds as the model would be sent them (factor corrects the estimate).
func (h *History) costs(factor float64) []roundCost {
	out := make([]roundCost, len(h.Rounds))
	for i, r := range h.Rounds {
		for _, m := range h.toAgent(r.Messages) {
			t := int(float64(estimateMessage(m)) * factor)
			out[i].whole += t
			if m.Role != chat.RoleTool {
				out[i].elided += t
				continue
			}
			out[i].tools += t
			m.Content = elisionNote(toolName(r.Messages, m.ToolCallID), utf8.RuneCountInString(m.Content))
			out[i].elided += int(float64(estimateMessage(m)) * factor)
		}
	}
	return out
}

// window is where a conversation's history starts and which of its tool results are elided.
type window struct {
	// from is the first round sent; the rounds before elidedTo have their tool results elided.
	from, elidedTo int
}

// cost is what the rounds from w.from to end (excluded) cost.
func (w window) cost(cs []roundCost, end int) int {
	n := 0
	for i := w.from; i < end; i++ {
		if i < w.elidedTo {
			n += cs[i].elided
		} else {
			n += cs[i].whole
		}
	}
	return n
}

// replay finds the window of rounds cs by adding them one at a time, oldest first, into room
// tokens: when the rounds pass it, the tool results beyond toolShare of it (counted newest
// first) are elided and the oldest rounds left out until they fill at most cutTo of it (the
// newest round always stays).
func replay(cs []roundCost, room int, toolShare float64) window {
	var w window
	for end := 1; end <= len(cs); end++ {
		if w.cost(cs, end) <= room {
			continue
		}
		toolRoom, used := int(float64(room)*toolShare), 0
		keepFrom := end
		for keepFrom > w.from && used+cs[keepFrom-1].tools <= toolRoom {
			used += cs[keepFrom-1].tools
			keepFrom--
		}
		w.elidedTo = max(w.elidedTo, keepFrom)
		for w.from < end-1 && w.cost(cs, end) > int(float64(room)*cutTo) {
			w.from++
		}
	}
	return w
}

// sendWindow returns the rounds of w as they are sent, and what they cost; rounds are left out
// from the front until they fit limit (a turn whose own message is unusually long).
func (h *History) sendWindow(cs []roundCost, w window, limit int) selection {
	for w.from < len(cs) && w.cost(cs, len(cs)) > limit {
		w.from++
	}
	sel := selection{from: w.from, tokens: w.cost(cs, len(cs))}
	for i := w.from; i < len(h.Rounds); i++ {
		ms := h.toAgent(h.Rounds[i].Messages)
		if i < w.elidedTo {
			for j, m := range ms {
				if m.Role == chat.RoleTool {
					ms[j].Content = elisionNote(toolName(h.Rounds[i].Messages, m.ToolCallID), utf8.RuneCountInString(m.Content))
					sel.elided++
				}
			}
		}
		sel.messages = append(sel.messages, ms...)
	}
	return sel
}

// newestFitting is how many of the newest rounds fit limit tokens whole.
func newestFitting(cs []roundCost, limit int) int {
	n, used := 0, 0
	for i := len(cs) - 1; i >= 0 && used+cs[i].whole <= limit; i-- {
		used += cs[i].whole
		n++
	}
	return n
}
