package discord

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/bwmarrin/discordgo"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	"relaybot/chat"
	"relaybot/internal/ellipsis"
)

// maxThreadName is the longest thread name Discord takes, in characters.
const maxThreadName = 100

// defaultAutoArchive is the minutes of inactivity after which Discord archives a thread the bot
// opens when Options.AutoArchive is zero: a day.
const defaultAutoArchive = 1440

// archiveDurations are the auto_archive_duration values Discord takes, in minutes.
var archiveDurations = []int{60, 1440, 4320, 10080}

// threads opens a thread for each conversation started in a guild channel (Options.Threads):
// Discord gives a thread started from a message the message's id, so the conversation's chat is
// known before the thread exists, and the thread is opened when the answer begins (a message
// the bot does not answer opens none). Opening is one request through the delivery engine,
// paced in the channel's budgets with its 429s waited out; a thread already opened for the
// message (Discord's 160004: another replica or an earlier run opened it) is used; any other
// refusal sends the answer to the channel, as without threads, and the log says why.
type threads struct {
	opts    Options
	log     *slog.Logger
	session *discordgo.Session
	engine  *delivery.Engine
	access  *access
	replies replies
	bot     *botIdentity
	// untitled are the threads /new opened whose first question has not come yet (here): its
	// answer titles them.
	untitled sync.Map
}

// takeUntitled reports whether thread is one /new opened that has no title yet, and forgets it:
// only its first question titles it.
func (t *threads) takeUntitled(thread string) bool {
	_, ok := t.untitled.LoadAndDelete(thread)
	return ok
}

// opens reports whether a guild message that starts a conversation in channelID (no thread,
// no command) opens a thread of its own.
func (t *threads) opens(channelID string) bool {
	if !t.opts.Threads {
		return false
	}
	return len(t.opts.ThreadChannels) == 0 || slices.Contains(t.opts.ThreadChannels, channelID)
}

// newThreadName names a thread that /new opens without words of its own.
const newThreadName = "New conversation"

// threadName names the thread message in opens after its question: its first line, cut to what
// Discord takes; /new's thread after /new's words, else newThreadName; a message without text
// after its sender.
func threadName(in adapters.Inbound) string {
	text, userName := in.Text, in.UserName
	if in.Command == "new" {
		if text = in.Args; strings.TrimSpace(text) == "" {
			return newThreadName
		}
	}
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	line = strings.Join(strings.Fields(line), " ")
	if line == "" {
		line = "Question from " + cmp.Or(userName, "a member")
	}
	return ellipsis.Cut(line, maxThreadName)
}

// archiveMinutes is Options.AutoArchive, or a day when unset.
func (t *threads) archiveMinutes() int {
	if t.opts.AutoArchive == 0 {
		return defaultAutoArchive
	}
	return t.opts.AutoArchive
}

// open opens the public thread of message messageID in channel parent, named name, and
// reports whether the answer goes there.
func (t *threads) open(ctx context.Context, parent chat.Ref, messageID, name string) bool {
	err := t.engine.Do(ctx, delivery.Request{Chat: parent, Class: delivery.ClassMessage, Kind: delivery.EventSend,
		Run: func(ctx context.Context) error {
			_, err := t.session.MessageThreadStartComplex(parent.ChatID, messageID,
				&discordgo.ThreadStart{Name: name, AutoArchiveDuration: t.archiveMinutes()}, reqOpts(ctx)...)
			return classify("opening a thread on message "+messageID, err)
		}})
	switch {
	case err == nil:
		t.access.noteThread(messageID, threadInfo{parent: parent.ChatID, owner: t.bot.userID()})
		t.log.Info("discord: thread opened for a conversation", "channel", parent.ChatID, "thread", messageID)
		return true
	case restCode(err) == discordgo.ErrCodeThreadAlreadyCreatedForThisMessage:
		// Opened before (by another replica, or by a run that stopped midway): find it, use it.
		info, lerr := t.access.threadOf(ctx, messageID)
		if lerr != nil || info.parent != parent.ChatID {
			t.log.Warn("discord: the message's thread exists but cannot be found; answering in the channel",
				"channel", parent.ChatID, "thread", messageID, "err", lerr)
			return false
		}
		t.log.Info("discord: the message's thread was already open; answering in it", "channel", parent.ChatID, "thread", messageID)
		return true
	default:
		t.log.Warn("discord: could not open a thread for the conversation; answering in the channel",
			"channel", parent.ChatID, "message", messageID, "err", err)
		return false
	}
}

// rename sets a thread's name, in one paced request.
func (t *threads) rename(ctx context.Context, thread chat.Ref, name string) error {
	return t.engine.Do(ctx, delivery.Request{Chat: thread, Class: delivery.ClassMessage, Kind: delivery.EventEdit,
		Run: func(ctx context.Context) error {
			_, err := t.session.ChannelEdit(thread.ChatID, &discordgo.ChannelEdit{Name: name}, reqOpts(ctx)...)
			return classify("renaming thread "+thread.ChatID, err)
		}})
}

// reopen unarchives a thread, in one paced request.
func (t *threads) reopen(ctx context.Context, thread chat.Ref) error {
	no := false
	return t.engine.Do(ctx, delivery.Request{Chat: thread, Class: delivery.ClassMessage, Kind: delivery.EventEdit,
		Run: func(ctx context.Context) error {
			_, err := t.session.ChannelEdit(thread.ChatID, &discordgo.ChannelEdit{Archived: &no}, reqOpts(ctx)...)
			return classify("reopening archived thread "+thread.ChatID, err)
		}})
}

// restCode is the Discord JSON error code an error carries, 0 when none.
func restCode(err error) int {
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Message != nil {
		return re.Message.Code
	}
	return 0
}

// archived reports whether a request failed because its thread is archived (and, for the
// bot's own messages, locked: Discord unarchives an unlocked thread a message is sent to) or
// gone (deleted by a moderator: Unknown Channel).
func archived(err error) bool {
	code := restCode(err)
	return code == discordgo.ErrCodePerformedOperationOnArchivedThread || code == discordgo.ErrCodeUnknownChannel
}

// threadResponder answers a message that opens a thread: the thread is opened with the first
// answer (a reply or a notice) and the answer goes there, or to the channel if it cannot be.
type threadResponder struct {
	t         *threads
	parent    chat.Ref // the channel the message was posted in
	thread    chat.Ref // the thread it opens, whose id is the message's
	messageID string
	asker     string
	name      string
	command   string // the message's command: "new", or "" for a question

	mu     sync.Mutex
	tried  bool
	opened bool
}

var _ adapters.ThreadTitler = (*threadResponder)(nil)

// target opens the thread on the first call and returns where answers go.
func (r *threadResponder) target(ctx context.Context) chat.Ref {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.tried {
		r.tried = true
		r.opened = r.t.open(ctx, r.parent, r.messageID, r.name)
		if r.opened && r.command == "new" {
			r.t.untitled.Store(r.thread.ChatID, struct{}{})
		}
	}
	if r.opened {
		return r.thread
	}
	return r.parent
}

func (r *threadResponder) NewReply(ctx context.Context) adapters.Reply {
	return r.t.replies.start(ctx, r.target(ctx), r.messageID, r.asker, true)
}

func (r *threadResponder) Notice(ctx context.Context, text string) error {
	return r.t.engine.Notice(ctx, r.target(ctx), text, adapters.SendOptions{ReplyTo: r.messageID})
}

func (r *threadResponder) SupportsStreaming() bool { return true }

// ThreadOpened reports whether the message's thread was opened (or found already there).
func (r *threadResponder) ThreadOpened() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.opened
}

// TitleThread renames the thread the message opened to title, cut to Discord's 100 characters.
func (r *threadResponder) TitleThread(ctx context.Context, title string) error {
	title = strings.Join(strings.Fields(title), " ")
	if !r.ThreadOpened() {
		return adapters.ErrNoThread
	}
	if title == "" {
		return errors.New("discord: empty thread title")
	}
	return r.t.rename(ctx, r.thread, ellipsis.Cut(title, maxThreadName))
}

// closedNote heads an answer that goes to the channel because its thread is archived and the
// bot may not reopen it, or was deleted. (A channel mention would not survive the reply's inert rendering.)
const closedNote = "*This conversation's thread is closed, so the answer is here.*\n\n"

// inThreadResponder answers a message in a thread the bot opened: when the thread turns out to
// be archived and locked (Discord refuses the answer with 50083), the bot reopens it where it
// may and answers there, else (or when the thread was deleted meanwhile) answers in the parent
// channel with a note. Nothing is dropped.
type inThreadResponder struct {
	t         *threads
	thread    chat.Ref
	parent    chat.Ref
	messageID string
	asker     string
}

func (r inThreadResponder) NewReply(ctx context.Context) adapters.Reply {
	return &closedAwareReply{r: r, inner: r.t.replies.start(ctx, r.thread, r.messageID, r.asker, true)}
}

func (r inThreadResponder) Notice(ctx context.Context, text string) error {
	err := r.t.engine.Notice(ctx, r.thread, text, adapters.SendOptions{ReplyTo: r.messageID})
	if !archived(err) {
		return err
	}
	return r.recover(ctx, err, text, nil)
}

func (r inThreadResponder) SupportsStreaming() bool { return true }

var _ adapters.ThreadTitler = inThreadResponder{}

// ThreadOpened is true: the message is in a thread the bot opened.
func (r inThreadResponder) ThreadOpened() bool { return true }

// TitleThread renames the thread, cut to Discord's 100 characters; the pipeline calls it only
// for the first question in a thread /new opened (Inbound.TitlesThread).
func (r inThreadResponder) TitleThread(ctx context.Context, title string) error {
	title = strings.Join(strings.Fields(title), " ")
	if title == "" {
		return errors.New("discord: empty thread title")
	}
	return r.t.rename(ctx, r.thread, ellipsis.Cut(title, maxThreadName))
}

// recover delivers text and files once the thread refused them as archived: in the thread
// reopened, else in the parent channel under a note.
func (r inThreadResponder) recover(ctx context.Context, cause error, text string, files []chat.File) error {
	err := r.t.reopen(ctx, r.thread)
	if err == nil {
		r.t.log.Info("discord: archived thread reopened to answer in it", "thread", r.thread.ChatID)
		return r.t.replies.start(ctx, r.thread, r.messageID, r.asker, false).Finish(ctx, text, files)
	}
	r.t.log.Warn("discord: thread is archived and cannot be reopened; answering in its channel",
		"thread", r.thread.ChatID, "channel", r.parent.ChatID, "cause", cause, "err", err)
	return r.t.replies.start(ctx, r.parent, "", r.asker, false).Finish(ctx, closedNote+text, files)
}

// closedAwareReply is a reply in a thread the bot opened that recovers from the thread being
// archived (inThreadResponder).
type closedAwareReply struct {
	r     inThreadResponder
	inner adapters.Reply
}

func (c *closedAwareReply) Update(text string) { c.inner.Update(text) }
func (c *closedAwareReply) Working(on bool)    { c.inner.Working(on) }

func (c *closedAwareReply) Finish(ctx context.Context, text string, files []chat.File) error {
	err := c.inner.Finish(ctx, text, files)
	if !archived(err) {
		return err
	}
	return c.r.recover(ctx, err, text, files)
}

// responderFor returns the responder of message messageID read as in: one that opens its
// thread, one that answers in a thread the bot opened, or the plain one.
func (b *inbox) responderFor(in adapters.Inbound, messageID string) adapters.Responder {
	t := b.threads
	parent := chat.Ref{Platform: chat.Discord, ChatID: in.ParentChatID}
	switch {
	case t != nil && in.OpensThread:
		return &threadResponder{t: t, parent: parent, thread: in.Chat, messageID: messageID, asker: in.UserID,
			name: threadName(in), command: in.Command}
	case t != nil && in.ParentChatID != "" && b.botThread(in.Chat.ChatID):
		return inThreadResponder{t: t, thread: in.Chat, parent: parent, messageID: messageID, asker: in.UserID}
	}
	return b.answer(in.Chat, messageID, in.UserID)
}

// botThread reports whether channelID is a thread the bot opened, as far as the adapter knows
// without asking Discord.
func (b *inbox) botThread(channelID string) bool {
	b.access.mu.Lock()
	info, ok := b.access.parents[channelID]
	b.access.mu.Unlock()
	if !ok {
		if c := b.access.state.channel(channelID); c != nil && c.IsThread() {
			info = threadInfo{parent: c.ParentID, owner: c.OwnerID}
		}
	}
	id := b.bot.userID()
	return id != "" && info.owner == id
}
