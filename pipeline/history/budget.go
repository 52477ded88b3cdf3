package history

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"unicode/utf8"

	"relaybot/chat"
	"relaybot/store"
	"relaybot/tools"
)

// ModelBudget is the token budget of one configured model.
type ModelBudget struct {
	// Name is the model's configured name (agent.Model.Name).
	Name string
	// ContextWindow is the tokens the model reads at most, answer included.
	ContextWindow int
	// MaxOutputTokens is the room kept free for the answer.
	MaxOutputTokens int
}

// Defaults of the token budget.
const (
	DefaultCompactAt       = 0.75
	DefaultToolResultShare = 0.25
	// DefaultContextWindow is the window of a model whose budget is not known.
	DefaultContextWindow = 8192
)

// Token estimate: one token per four bytes of ASCII text and one per other character (CJK and
// most other scripts take a token or more per character), four per message for the roles and
// separators, and a fixed cost per image. The estimate of a model is corrected by the prompt
// tokens the provider reports (usageCorrection).
const (
	tokensPerMessage = 4
	tokensPerImage   = 800
)

// EstimateText estimates the tokens of a text.
func EstimateText(s string) int {
	ascii, other := 0, 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			ascii++
			i++
			continue
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		i += n
		other++
	}
	return (ascii+3)/4 + other
}

// estimateMessage estimates the tokens one transcript message costs.
func estimateMessage(m chat.Message) int {
	n := tokensPerMessage + EstimateText(m.Content) + EstimateText(m.Name) + len(m.Images)*tokensPerImage
	if m.ReasoningField != "" {
		n += EstimateText(m.Reasoning)
	}
	for _, c := range m.ToolCalls {
		n += tokensPerMessage + EstimateText(c.Name) + EstimateText(c.Arguments) + EstimateText(string(c.Extra))
	}
	return n + EstimateText(string(m.Extra))
}

// estimateMessages estimates the tokens of messages.
func estimateMessages(ms []chat.Message) int {
	n := 0
	for _, m := range ms {
		n += estimateMessage(m)
	}
	return n
}

// estimateTools estimates the tokens the tools' schemas cost in every request.
func estimateTools(specs []tools.Spec) int {
	n := 0
	for _, s := range specs {
		b, _ := json.Marshal(struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters,omitempty"`
		}{s.Name, s.Description, s.Parameters})
		n += tokensPerMessage + EstimateText(string(b))
	}
	return n
}

// usageCorrection learns, per model, how far the estimate is from the prompt tokens the provider
// reports, and scales later estimates by it.
type usageCorrection struct {
	mu     sync.Mutex
	factor map[string]float64
}

// Bounds of the correction: a report far outside them is a provider that counts something else
// (cached tokens, images), not a better tokenizer.
const (
	minCorrection = 0.5
	maxCorrection = 3
)

// of returns the factor of model (1 when nothing was reported yet).
func (u *usageCorrection) of(model string) float64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	if f, ok := u.factor[model]; ok {
		return f
	}
	return 1
}

// observe records that a request estimated at estimated tokens was counted as reported by model.
func (u *usageCorrection) observe(model string, estimated, reported int) {
	if estimated <= 0 || reported <= 0 {
		return
	}
	r := min(max(float64(reported)/float64(estimated), minCorrection), maxCorrection)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.factor == nil {
		u.factor = map[string]float64{}
	}
	if f, ok := u.factor[model]; ok {
		r = (f + r) / 2
	}
	u.factor[model] = r
}

// observeTurn corrects the estimate with the first successful call of a turn, whose prompt was
// the request as built (later rounds add the turn's own messages).
func (u *usageCorrection) observeTurn(calls []chat.ModelCall, estimated int) {
	for _, c := range calls {
		if c.Round == 1 && c.Status == chat.StatusOK && !c.Estimated {
			u.observe(c.Model, estimated, c.TokensIn)
			return
		}
	}
}

// elisionNote replaces, in what the model is sent, an older tool result beyond the budget's share.
func elisionNote(tool string, chars int) string {
	return fmt.Sprintf("[earlier result of %s left out to save room: %d characters; the answer that followed used it]", tool, chars)
}

// selection is the history chosen for a turn.
type selection struct {
	// messages are the whole rounds sent, oldest first, older tool results elided.
	messages []chat.Message
	// tokens is their corrected estimate.
	tokens int
	// from is the index of the first round sent.
	from int
	// elided counts the tool results replaced by a note.
	elided int
}

// toolName is the name of the tool that answered call id in a stored round.
func toolName(ms []chat.Message, id string) string {
	for _, m := range ms {
		if m.Role == store.RoleTool && m.ToolCallID == id && m.Name != "" {
			return m.Name
		}
	}
	return "a tool"
}

// budget is what one turn may spend, in estimated (corrected) tokens.
type budget struct {
	window int
	output int
	// fixed is what every call of the turn sends besides the history: the system prompt with
	// the summary, the new message, the tools' schemas, and the room kept for the turn's own
	// tool results.
	fixed int
	// user is the part of fixed the new message takes.
	user   int
	factor float64
}

// historyLimit is the room left for history.
func (b budget) historyLimit() int { return max(b.window-b.output-b.fixed, 0) }

// stableRoom is the room the history's window is replayed into (window.go): the room left
// besides a sixteenth of the window for the new message instead of the message itself, in steps
// of 256 tokens, so that a longer or shorter message does not move where the rounds were cut.
func (b budget) stableRoom() int {
	room := b.window - b.output - (b.fixed - b.user) - (b.window-b.output)/16
	return max(room/256*256, 0)
}

// quantised is a usage correction in steps of 1/32: the correction moves a little with every
// report, and the history's window should not move with it.
func quantised(f float64) float64 { return max(math.Round(f*32)/32, minCorrection) }

// summaryPrompt opens the system prompt's part that carries the summary of older rounds.
const summaryPrompt = "Summary of the earlier conversation (older messages are not shown):"

// withSummary appends a conversation's summary to its system prompt.
func withSummary(prompt, summary string) string {
	if strings.TrimSpace(summary) == "" {
		return prompt
	}
	return strings.TrimSpace(prompt + "\n\n" + summaryPrompt + "\n" + strings.TrimSpace(summary))
}

// Estimate is the agent's Request.Estimate: the tokens msgs and specs cost with the model
// named, corrected by what its provider reported for earlier requests.
func (k *Keeper) Estimate(model string, msgs []chat.Message, specs []tools.Spec) int {
	return int(float64(estimateMessages(msgs)+estimateTools(specs)) * k.usage.of(model))
}

// Observe corrects the estimate with the first successful call of a turn, whose prompt was
// the request as built, estimated at estimated tokens (History.Estimate).
func (k *Keeper) Observe(calls []chat.ModelCall, estimated int) {
	k.usage.observeTurn(calls, estimated)
}
