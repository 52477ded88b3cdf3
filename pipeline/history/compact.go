package history

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// CompactedNotice is the line a user sees when older rounds of the conversation were summarised.
const CompactedNotice = "(Earlier messages were summarised to keep this conversation within the model's context window.)"

// summaryInstruction asks the model for the summary that replaces older rounds.
const summaryInstruction = "You write the memory of a chat assistant. Summarise the conversation below so that it can " +
	"go on without the full text: who asked for what, the answers and facts found (tool results " +
	"included), decisions, names, numbers and open questions. Merge the earlier summary in, if " +
	"there is one. Write at most %d words, in the conversation's language, and reply with the " +
	"summary only."

// summaryRequest ends a conversation, as its turns send it, with the request for its summary
// (compactAtEnd): the summary replaces its older rounds.
const summaryRequest = "[Summary request] This conversation is about to be shortened: its older messages " +
	"will be replaced by a summary. Write that summary now, of the whole conversation above: who " +
	"asked for what, the answers and facts found (tool results included), decisions, names, " +
	"numbers and open questions, with the earlier summary merged in if there is one. Write at " +
	"most %d words, in the conversation's language, and reply with the summary only: do not " +
	"answer or continue the conversation."

// Caps of what the summariser reads of one message.
const (
	summaryToolChars = 2000
	summaryArgsChars = 300
)

// ErrNothingToCompact: every round the conversation has fits what compaction would keep.
var ErrNothingToCompact = errors.New("nothing to summarise yet")

// cut shortens s to at most n characters, saying how much was left out.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + fmt.Sprintf(" […%d more characters]", len(r)-n)
}
