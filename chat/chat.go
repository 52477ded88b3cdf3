// Package chat holds the identifiers and values every layer says about a conversation: the Key
// that names one, and a File that travels in one (a tool's output, an attachment of a reply). It
// imports nothing of this module, so adapters, tools, the pipeline and the store all speak it.
package chat

import (
	"slices"
	"time"
)

// Platform names a chat network ("telegram", "discord", "web").
type Platform string

// The platforms the bot ships adapters for.
const (
	Telegram Platform = "telegram"
	Discord  Platform = "discord"
	Web      Platform = "web"
)

// Ref addresses a chat, and a thread or forum topic inside it, on one platform: the chat half of
// a conversation Key, without the user.
type Ref struct {
	Platform Platform
	ChatID   string
	ThreadID string // forum topic or thread; empty when the chat has none
}

// String renders the reference as "platform:chat" or "platform:chat#thread".
func (r Ref) String() string {
	s := string(r.Platform) + ":" + r.ChatID
	if r.ThreadID != "" {
		s += "#" + r.ThreadID
	}
	return s
}

// Chat is the reference without its thread: the chat a thread or forum topic belongs to.
func (r Ref) Chat() Ref { return Ref{Platform: r.Platform, ChatID: r.ChatID} }

// User names a person on one platform.
type User struct {
	Platform Platform
	ID       string
}

// String renders the user as "platform:id", the form access lists, quotas and policies name
// people in.
func (u User) String() string { return string(u.Platform) + ":" + u.ID }

// Key names a conversation: the chat on a platform, the thread or forum topic within it, and the
// user when the conversation is one user's. Only one conversation per Key is active at a time.
type Key struct {
	Platform Platform
	ChatID   string
	ThreadID string // forum topic or thread; empty when none
	// UserID is set when the conversation is one user's: a private chat, or a group chat where
	// each member has their own. Empty when the conversation is shared by a chat's members.
	UserID string
}

// String renders the key as one stable string, used to serialise turns of one conversation.
// "telegram:42", "telegram:-100#7", "discord:9/u:5".
func (k Key) String() string {
	s := k.Ref().String()
	if k.UserID != "" {
		s += "/u:" + k.UserID
	}
	return s
}

// Ref is the chat the conversation is in.
func (k Key) Ref() Ref { return Ref{Platform: k.Platform, ChatID: k.ChatID, ThreadID: k.ThreadID} }

// Status is how a turn of a conversation or one model call ended, or running while it has not.
// The agent's runner ends a turn and each model call ok, error or cancelled; the pipeline and
// the ledger add the others.
type Status string

// The statuses of turns and model calls.
const (
	StatusRunning   Status = "running"
	StatusOK        Status = "ok"
	StatusError     Status = "error"
	StatusCancelled Status = "cancelled"
	// StatusInterrupted: the process ended (a crash, a replica lost) while it ran.
	StatusInterrupted Status = "interrupted"
	// StatusRetried: the turn was answered again (/retry, a redelivered message); it stays in
	// the audit trail but leaves the history.
	StatusRetried Status = "retried"
)

// Statuses lists every status, running and ok first.
var Statuses = []Status{StatusRunning, StatusOK, StatusError, StatusCancelled, StatusInterrupted, StatusRetried}

// Valid reports whether s is one of Statuses.
func (s Status) Valid() bool { return slices.Contains(Statuses, s) }

// Ended reports whether s is how a turn ends (neither running nor retried later).
func (s Status) Ended() bool {
	return s == StatusOK || s == StatusError || s == StatusCancelled || s == StatusInterrupted
}

// Failure is why a failed turn got no answer from the model, as its user was told. A turn with a
// Failure is not answered: its message stays in the store and the audit trail, but leaves every
// later request of its conversation (/retry answers it again). Empty for every other turn (an
// answer, a stop, an answer the platform did not take).
type Failure string

// The kinds of failed turns.
const (
	// FailureRefused: the provider refused the request itself (a 4xx other than 408 and 429: an
	// invalid request, a content policy, an image a text model rejects, a context still too long
	// after compaction). Sending it again would be refused again: rephrase it, or /reset.
	FailureRefused Failure = "refused"
	// FailureUnavailable: the model did not answer for a reason that passes (a timeout, a 5xx, a
	// 429 after every candidate, a broken connection, the turn's time limit): /retry.
	FailureUnavailable Failure = "unavailable"
	// FailureMisconfigured: the bot's key or endpoint is wrong (401, 403, 404): the admin must fix it.
	FailureMisconfigured Failure = "misconfigured"
	// FailureQuota: a quota is used up, the bot's own (per user or chat) or the provider account's.
	FailureQuota Failure = "quota"
)

// Failures lists every kind of failure.
var Failures = []Failure{FailureRefused, FailureUnavailable, FailureMisconfigured, FailureQuota}

// Role is who wrote a message of a conversation's transcript, as the chat-completions API names it.
type Role string

// The roles of transcript messages.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Roles lists every role.
var Roles = []Role{RoleSystem, RoleUser, RoleAssistant, RoleTool}

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool { return slices.Contains(Roles, r) }

// File is a file or image a tool produced or the bot sends with its final reply.
type File struct {
	Name string
	MIME string
	Data []byte
}

// VoiceMIME is the MIME type of a spoken answer (OGG/Opus): platforms that have voice messages
// show a file of this type as one.
const VoiceMIME = "audio/ogg; codecs=opus"

// IsVoice reports whether the file is a spoken answer to show as a voice message.
func (f File) IsVoice() bool { return f.MIME == VoiceMIME }

// IsImage reports whether the file should be shown as a picture rather than a document.
func (f File) IsImage() bool {
	return len(f.MIME) > 6 && f.MIME[:6] == "image/"
}

// Summary is one stored conversation of a chat, as a list of earlier conversations shows it.
type Summary struct {
	ID        int64
	Active    bool
	CreatedAt time.Time
	// Preview is the start of its first user message; empty when it has none.
	Preview string
	// Turns counts its turns.
	Turns int
}

// Line is one message of a stored conversation as its user saw it: their own message, or an
// answer the bot showed (tool calls and tool results are not lines).
type Line struct {
	FromUser bool
	Text     string
	// ID names the line in its chat where the platform keeps each message it showed (the web
	// chat); empty for a line read back from a conversation's messages.
	ID string
	// Pos orders a chat's kept lines: when the line appeared, in microseconds since 1970, made to
	// grow within the chat.
	Pos int64
	// Question: the line is a question the bot asked, shown as plain text (not Markdown);
	// Asking: it was still waiting for its answer when it was last kept.
	Question, Asking bool
	// Files are the files the line showed; a file kept without its bytes (too large) has none.
	Files []File
}

// Price is what a million prompt (In) and completion (Out) tokens of a model cost, in the
// configured currency: the store totals usage with it, the metrics count cost with it.
type Price struct {
	In, Out float64
	// CachedIn is what a million prompt tokens served from the provider's cache cost, and
	// CacheWrite what a million written to it cost (Anthropic's cache writes); the
	// configuration fills them with In when it names no price of their own.
	CachedIn, CacheWrite float64
	// PerMinute is what a minute of audio a speech model transcribes costs.
	PerMinute float64
	// PerImage is what one image an image model generates costs.
	PerImage float64
}

// ImageCost is what n generated images cost at p.
func (p Price) ImageCost(n int64) float64 { return float64(n) * p.PerImage }

// AudioCost is what audioMs milliseconds of transcribed audio cost at p.
func (p Price) AudioCost(audioMs int64) float64 { return float64(audioMs) / 60000 * p.PerMinute }

// Cost is what tokensIn prompt and tokensOut completion tokens cost at p, none of them cached.
func (p Price) Cost(tokensIn, tokensOut int64) float64 {
	return p.Bill(tokensIn, 0, 0, tokensOut)
}

// Bill is what a provider bills at p for tokensIn prompt tokens, of which cached were served
// from its cache and written were written to it, and tokensOut completion tokens. Cached and
// written tokens beyond tokensIn (a provider's inconsistent report) are not billed twice.
func (p Price) Bill(tokensIn, cached, written, tokensOut int64) float64 {
	cached = max(min(cached, tokensIn), 0)
	written = max(min(written, tokensIn-cached), 0)
	plain := tokensIn - cached - written
	return (float64(plain)*p.In + float64(cached)*p.CachedIn + float64(written)*p.CacheWrite + float64(tokensOut)*p.Out) / 1e6
}

// Delivery is one platform request of a turn's reply, for the turn's timeline.
type Delivery struct {
	// Kind is the delivery engine's event: send, edit, files, draft, not_modified,
	// rate_limited, retry, fallback or failed.
	Kind string `json:"kind"`
	// At is when the request ended; TookMS how long it ran (0 when not measured); WaitMS the
	// wait a 429 asked for, from At on.
	At     time.Time `json:"at"`
	TookMS int64     `json:"took_ms,omitempty"`
	WaitMS int64     `json:"wait_ms,omitempty"`
	// Final is set on the requests that carried the final text.
	Final bool `json:"final,omitempty"`
}

// MaxDeliveries is the most deliveries a turn keeps; a reply streamed by more edits keeps its
// first ones and the last (the final text).
const MaxDeliveries = 256
