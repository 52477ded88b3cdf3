// Package adapters is the platform-neutral contract between chat platforms and the rest of the
// bot: what an incoming message looks like (Inbound), what a platform can do with outgoing text
// (Messenger), how much it allows (Limits), and the errors a platform reports in a form the
// delivery engine can act on.
//
// Adapters know nothing of the agent, the tools or the store: they turn platform updates into
// Inbound values, hand them to a Handler, and deliver replies through adapters/delivery.
package adapters

import (
	"context"
	"errors"
	"fmt"
	"relaybot/chat"
	"time"
)

// ChatKind says who shares a chat.
type ChatKind string

// Kinds of chat.
const (
	Private ChatKind = "private" // one user and the bot (Telegram private chat, Discord DM, web chat)
	Group   ChatKind = "group"   // many members (Telegram group or supergroup, Discord guild channel)
)

// Image is a picture a user sent, already downloaded and capped in size by the adapter.
type Image struct {
	MIME string
	Data []byte
}

// Inbound is one message a user sent, normalised across platforms.
type Inbound struct {
	Chat      chat.Ref
	Kind      ChatKind
	MessageID string // the platform's id of the user's message, for replies and the audit trail
	UserID    string
	UserName  string
	// Text is the message with the bot mention or trigger prefix removed. Adapters hand over only
	// messages meant for the bot: in a group, ones that mention it, reply to it or use the prefix.
	Text   string
	Images []Image
	// Attachments are the files that came with the message (voice notes, audio, documents,
	// image files), read only when the pipeline fetches them; the caption is Text.
	Attachments []Attachment `json:",omitempty"`
	// Command is the bot command without its slash ("reset", "stop", "help", "audit", "start"),
	// read by ParseCommand (or from a slash command or a Stop button); Args holds the rest of
	// the line. The pipeline acts on Command only: a command naming another bot
	// ("/reset@otherbot") is never handed over.
	Command string
	Args    string
	Time    time.Time
	// Roles are the platform's role ids of the sender in this chat (Discord guild roles);
	// ChatAdmin says the platform reports the sender as an administrator of the chat. Tool
	// policies match them.
	Roles     []string
	ChatAdmin bool
	// ParentChatID is the channel a Discord thread or forum post belongs to (Chat.ChatID is the
	// thread's own channel); empty elsewhere. A Telegram forum topic needs none: its Chat.ChatID
	// is the group's and its ThreadID the topic's. See RuleChats.
	ParentChatID string
	// OpensThread is true when the adapter opens a thread or topic for this message (Discord's
	// threads = "auto", Telegram's private topics): Chat names it, it is named from the
	// question, and the answer goes there (or, should the platform refuse it, where it would
	// have gone without threads). Its Responder is then a ThreadTitler.
	OpensThread bool `json:",omitempty"`
	// TitlesThread is true when the answer to this message gives its thread or topic, one the
	// bot opened, its title: the question that opened it, or the first question in one /new
	// opened. Its Responder is then a ThreadTitler.
	TitlesThread bool `json:",omitempty"`
	// Redelivered is true when the adapter may have handed this message over before, to a run
	// of the bot that stopped before the Handler finished with it (a crash). The Handler should
	// not answer it again when it already has.
	Redelivered bool
	// Redeliveries counts the handovers of this message after a run of the bot stopped before
	// the Handler finished with it (1 on the first redelivery), as far as the adapter knows.
	// A Handler answers a message once more after a crash, and one handed over a second time
	// (it took the bot down again) with a notice: never replayed into another crash.
	Redeliveries int
	// Placed, when set, is called by the Handler once the message has its place in its
	// conversation's order across the deployment (the turn queue holds it, or refused it), or
	// once it knows the message takes no place there (a command, a message refused, dropped or
	// answered before): at the latest when Handle returns. Calls after the first do nothing, and
	// it never blocks. An adapter whose platform sends a chat's next message only once it hears
	// of this one (a Telegram webhook's 2xx, the web chat's answer to a send) tells the platform
	// after Placed (Placement), so the next message, whichever replica it reaches, queues behind
	// this one.
	Placed func() `json:"-"`
}

// RuleChats returns the chats whose rules apply to the message, most specific first: the thread
// or forum topic itself ("telegram:-100#7", a rule may name it), its chat, and a Discord
// thread's parent channel. Chat rules (deny lists, tool policies' chats, per-chat tools, chat
// quotas) match any of them, so a thread never escapes the rules of the channel it is in.
func (in Inbound) RuleChats() []chat.Ref {
	refs := make([]chat.Ref, 0, 3)
	if in.Chat.ThreadID != "" {
		refs = append(refs, in.Chat)
	}
	refs = append(refs, in.Chat.Chat())
	if in.ParentChatID != "" && in.ParentChatID != in.Chat.ChatID {
		refs = append(refs, chat.Ref{Platform: in.Chat.Platform, ChatID: in.ParentChatID})
	}
	return refs
}

// MessageRef identifies a message the bot sent, for later edits.
type MessageRef struct {
	Chat chat.Ref
	ID   string
}

// SendOptions tune one Send.
type SendOptions struct {
	// ReplyTo is the platform id of the user's message the reply answers, if any.
	ReplyTo string
	// Stoppable asks for a Stop control on the message where the platform has one (a Discord
	// button, a Telegram inline button); pressing it reaches the Handler as the "stop" command.
	// The control stays through StreamEditor edits and goes with the message's next Edit.
	Stoppable bool
	// Answers is the user's message a reply answers, set on the later messages of a long reply
	// (which do not reference it: ReplyTo is empty), so a Stop control on them stops the same
	// reply.
	Answers string
}

// Messenger is what a platform can do with outgoing messages. Implementations make exactly one
// platform request per call (no retries of their own: the delivery engine owns retries and
// rate limits) and report failures with the error types of this package.
type Messenger interface {
	// Send posts a new message with text and returns its reference.
	Send(ctx context.Context, chat chat.Ref, text string, opts SendOptions) (MessageRef, error)
	// Edit replaces the text of a message the bot sent.
	Edit(ctx context.Context, msg MessageRef, text string) error
	// SendFiles posts files and images, with an optional caption.
	SendFiles(ctx context.Context, chat chat.Ref, files []chat.File, caption string, opts SendOptions) (MessageRef, error)
	// Typing shows the platform's "bot is typing" indicator once (platforms expire it after a few seconds).
	Typing(ctx context.Context, chat chat.Ref) error
}

// FileAttacher is implemented by a Messenger whose platform can add files to a message the bot
// already sent (Discord can; Telegram cannot turn a text message into a photo). The delivery
// engine then attaches a reply's files to the last message of its final text instead of
// posting them as separate messages. Such a platform's SendFiles takes a caption as long as a
// message (Limits.MaxLen), so a last message that does not exist yet is posted with its files.
type FileAttacher interface {
	// EditWithFiles attaches files to a message the bot sent while setting its text, in one
	// platform request, with the same error reporting as Edit. It carries at most
	// Limits.MaxFiles files.
	EditWithFiles(ctx context.Context, msg MessageRef, text string, files []chat.File) error
}

// StreamEditor is implemented by a Messenger whose streaming messages carry controls (a Stop
// button) that an edit would otherwise take off. The delivery engine edits the message a reply
// is still streaming into with EditStreaming, which keeps its controls; the Edit that makes a
// message final (its part of a long answer is complete, or the answer ended) takes them off.
type StreamEditor interface {
	// EditStreaming replaces the text of a message that is still streaming and keeps its
	// controls, with the same error reporting as Edit.
	EditStreaming(ctx context.Context, msg MessageRef, text string) error
}

// Drafter is implemented by a Messenger that can stream a reply as an ephemeral draft instead
// of a message it edits (Telegram's sendMessageDraft in private chats). The delivery engine
// shows the part of a reply still being written as a draft (one draft id per part) while
// DraftsIn holds, and persists each part with Send once it is complete, before a tool runs
// (a draft is only shown for a short while), and with the final text. When a draft is refused
// with ErrDraftsRefused the engine streams by edits for the rest of its life.
type Drafter interface {
	// DraftsIn reports whether replies in chat may stream as drafts.
	DraftsIn(chat chat.Ref) bool
	// Draft shows text as draft id in chat, in one platform request, with the same error
	// reporting as Send; stoppable adds the platform's Stop button, which keeps the partial
	// text when pressed and reaches the Handler as the "stop" command.
	Draft(ctx context.Context, chat chat.Ref, id int64, text string, stoppable bool) error
}

// RichMessenger is implemented by a Messenger that can show a reply's whole final text as one
// rich message (Telegram's sendRichMessage: up to 32,768 characters, collapsible blocks, tables)
// instead of several plain messages of MaxLen. The delivery engine uses it for a final text that
// fits: the first message of the reply becomes the rich message (edited in place, or posted new
// when a draft shows, which only a new message ends) and the messages previews rolled the
// answer over into are deleted. A refusal (ErrRichRefused) sends that answer the usual way and
// is remembered for the chat.
type RichMessenger interface {
	// RichFits reports whether text may go out as one rich message in chat: the platform takes
	// rich messages there and text, rendered, is within their limits.
	RichFits(chat chat.Ref, text string) bool
	// SendRich posts text as a new rich message, with the error reporting of Send.
	SendRich(ctx context.Context, chat chat.Ref, text string, opts SendOptions) (MessageRef, error)
	// EditRich turns a message the bot sent into a rich message showing text (its controls go),
	// with the error reporting of Edit.
	EditRich(ctx context.Context, msg MessageRef, text string) error
	// Delete removes a message the bot sent; one already gone is reported with ErrMessageGone.
	Delete(ctx context.Context, msg MessageRef) error
}

// LengthUnit is how a platform counts message length.
type LengthUnit int

// Units platforms count in.
const (
	Runes LengthUnit = iota // Unicode code points (Discord)
	UTF16                   // UTF-16 code units (Telegram)
)

// Rate is a budget of N requests per Per.
type Rate struct {
	N   int
	Per time.Duration
}

// Limits are a platform's length and pacing rules. Zero rates mean no limit of that kind.
type Limits struct {
	MaxLen   int        // the longest text one message may hold
	Unit     LengthUnit // the unit MaxLen is counted in
	MaxFiles int        // the most files one message may carry (Discord 10); 0 means one
	// MaxLines is the most lines one message may hold before the platform's UI clips it
	// (Discord's Components V2 text display); 0 means no limit.
	MaxLines int
	PerChat  Rate // sends and edits in one chat (Telegram ~1/s; Discord 5 per 5 s per channel)
	PerGroup Rate // extra budget for group chats (Telegram 20/min)
	Global   Rate // across all chats of the bot (Telegram 30/s)
}

// RateLimitError is a 429: the platform asks to wait RetryAfter before the next request in Scope.
type RateLimitError struct {
	RetryAfter time.Duration
	Global     bool // the whole bot is limited, not only this chat
	Err        error
}

func (e *RateLimitError) Error() string {
	scope := "chat"
	if e.Global {
		scope = "global"
	}
	return fmt.Sprintf("rate limited (%s), retry after %s: %v", scope, e.RetryAfter, e.Err)
}

func (e *RateLimitError) Unwrap() error { return e.Err }

// Errors platforms report in a form the delivery engine acts on. Adapters wrap their SDK's error
// with one of these (fmt.Errorf("...: %w", ErrNotModified)) so the original text is kept.
var (
	// ErrNotModified: the edit carried the text the message already has. Counts as delivered.
	ErrNotModified = errors.New("message is not modified")
	// ErrMessageGone: the message cannot be edited any more (deleted, too old). The delivery
	// engine falls back to a new message with the missing text.
	ErrMessageGone = errors.New("message can no longer be edited")
	// ErrTooLong: the platform refused the text as too long.
	ErrTooLong = errors.New("message is too long")
	// ErrTemporary: a server error or timeout that may succeed when retried.
	ErrTemporary = errors.New("temporary platform error")
	// ErrDraftsRefused: the platform does not take drafts from this bot (Drafter).
	ErrDraftsRefused = errors.New("drafts are not available")
	// ErrRichRefused: the platform refused a rich message (RichMessenger) in this chat.
	ErrRichRefused = errors.New("rich message refused")
)

// Handler receives every addressed Inbound message of an adapter, with the Responder to answer
// it. Handle may block for the whole turn; adapters call it on their own goroutine per message.
type Handler interface {
	Handle(ctx context.Context, in Inbound, out Responder)
}

// Responder answers one Inbound message.
type Responder interface {
	// NewReply starts the streamed reply to the message.
	NewReply(ctx context.Context) Reply
	// Notice sends a short one-off message (command answers, "busy", "rate limited").
	Notice(ctx context.Context, text string) error
	// SupportsStreaming reports whether the reply should be streamed by edits.
	SupportsStreaming() bool
}

// ThreadTitler is implemented by the Responder of a message whose answer titles the thread or
// topic the bot opened (Inbound.TitlesThread). The pipeline renames it at most once, with a
// short title the model gave, after the answer.
type ThreadTitler interface {
	// ThreadOpened reports whether the thread was opened (false before the first answer, and
	// when the platform refused it and the answer went to the chat).
	ThreadOpened() bool
	// TitleThread renames the thread to title (cut to what the platform takes), in one paced
	// request; ErrNoThread when it was not opened.
	TitleThread(ctx context.Context, title string) error
}

// ErrNoThread: the message's thread or topic was not opened, so there is nothing to rename.
var ErrNoThread = errors.New("no thread was opened for this message")

// Reply is one answer, streamed into the chat. The text given to Update and Finish is always the
// whole visible answer so far, never a delta.
type Reply interface {
	// Update shows text as the newest preview. It never blocks; previews that wait coalesce.
	Update(text string)
	// Working turns the typing indicator on while the model thinks or a tool runs.
	Working(on bool)
	// Finish delivers the final text and files and returns when they are delivered or have
	// definitively failed.
	Finish(ctx context.Context, text string, files []chat.File) error
}
