package history

import (
	"fmt"
	"time"
)

// Options say how a turn's transcript is built from the conversation's history.
type Options struct {
	// SystemPrompt starts every transcript; SystemPromptExtra, when set, returns text appended
	// to it at each turn (the skill index).
	SystemPrompt      string
	SystemPromptExtra func() string
	// Rounds caps the whole user rounds of history considered for each message (0: none); the
	// token budget usually binds first.
	Rounds int
	// CompactAt is the share of the history's room (the window less the answer, the system
	// prompt, the new message, the tools' schemas and room for one tool result) past which older
	// rounds are summarised (default DefaultCompactAt; negative: never, older rounds are left
	// out instead).
	CompactAt float64
	// ToolResultShare is the share of the history's room older tool results may fill, newest
	// first; the others are sent as a short elision note (default DefaultToolResultShare).
	ToolResultShare float64
	// ToolResultMaxChars is the cap of one tool result (agent.tool_result_max_chars): room for
	// one is kept free for the turn's own tool calls.
	ToolResultMaxChars int
	// IdleReset starts a fresh conversation when the last turn is older than this (0: never).
	IdleReset time.Duration
	// MaxImageBytes drops larger images a user sent (0: no limit).
	MaxImageBytes int
}

func (h *Options) fill(models []ModelBudget) error {
	switch {
	case h.CompactAt == 0:
		h.CompactAt = DefaultCompactAt
	case h.CompactAt > 1:
		return fmt.Errorf("history: CompactAt must be at most 1, got %v", h.CompactAt)
	}
	switch {
	case h.ToolResultShare == 0:
		h.ToolResultShare = DefaultToolResultShare
	case h.ToolResultShare < 0 || h.ToolResultShare > 1:
		return fmt.Errorf("history: ToolResultShare must be between 0 and 1, got %v", h.ToolResultShare)
	}
	for i, m := range models {
		if m.ContextWindow <= 0 || m.MaxOutputTokens < 0 || m.MaxOutputTokens >= m.ContextWindow {
			return fmt.Errorf("history: model %d (%s): context window %d and max output %d do not leave room for a prompt", i, m.Name, m.ContextWindow, m.MaxOutputTokens)
		}
	}
	return nil
}

// imagesNote tells the model of n images it can no longer see.
func imagesNote(n int) string {
	if n == 1 {
		return "[the user sent an image, no longer available] "
	}
	return "[the user sent images, no longer available] "
}
