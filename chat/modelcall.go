package chat

import "time"

// ModelCall is one call to a model: a round of a turn or one of its failed fallback attempts, a
// compaction, a transcription or a spoken answer. The runner and speech report it, the ledger
// keeps it (the llm_calls rows), metrics, traces and usage read it.
type ModelCall struct {
	// Model is the endpoint's name; Candidate its index in the candidate list (0 = primary).
	Model     string
	Candidate int
	// RequestModel is the model id the call asked for (the candidate's model); ResponseModel
	// the one the provider said answered, empty when no answer came.
	RequestModel, ResponseModel string
	// Round is the turn's round (1-based) the call belongs to.
	Round int
	// StartedAt is when the call was made.
	StartedAt time.Time
	// FallbackReason says why the previous candidate was left for this one; empty for the first
	// attempt of a round.
	FallbackReason string
	// Status is ok, error or cancelled once the call ended.
	Status Status
	// TimeToFirstToken is the wait for the first stream chunk (the whole call when not
	// streaming); zero when no token arrived.
	TimeToFirstToken time.Duration
	Duration         time.Duration
	// TokensIn is every prompt token the provider counted, CachedIn and CacheWriteIn included.
	TokensIn  int
	TokensOut int
	// CachedIn is the part of TokensIn the provider served from its prompt cache (billed at
	// Price.CachedIn); CacheWriteIn the part it wrote to the cache (billed at Price.CacheWrite,
	// by the providers that charge for it). Zero when the provider reported none.
	CachedIn, CacheWriteIn int
	// Estimated reports that TokensIn and TokensOut are the bot's estimate, not the provider's:
	// the call ended without a usage report (a stopped, cut or failed stream).
	Estimated bool
	// FinishReason is the finish_reason the model ended its answer with ("stop", "tool_calls",
	// "length", …); empty when the call failed before one arrived.
	FinishReason string
	// Err is why the call failed; nil on success.
	Err error
	// Audio is the length of the audio a speech call transcribed (zero for other calls): usage
	// prices it per minute.
	Audio time.Duration
	// Images is how many images an image call delivered (reserved: how many it asked for);
	// usage prices them per image.
	Images int
}

// ErrorText is the text of Err, empty on success: what the ledger keeps of it.
func (c ModelCall) ErrorText() string {
	if c.Err == nil {
		return ""
	}
	return c.Err.Error()
}
