// Package telegram connects the bot to Telegram through the Bot API (go-telegram-bot-api v5):
// it receives messages by long polling or a webhook, turns them into adapters.Inbound values,
// and streams replies through the shared delivery engine with Telegram's limits.
package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	"relaybot/chat"
	"relaybot/internal/logredact"
)

// Limits returns Telegram's limits: 4096 UTF-16 units per message; about one message a second
// per chat (a short burst allowed), 20 a minute per group, 30 a second in all; edits count.
func Limits() adapters.Limits {
	return adapters.Limits{MaxLen: 4096, Unit: adapters.UTF16,
		PerChat: adapters.Rate{N: 3, Per: 3 * time.Second}, PerGroup: adapters.Rate{N: 20, Per: time.Minute},
		Global: adapters.Rate{N: 30, Per: time.Second}}
}

// Paid broadcast: without it Telegram takes about 30 messages a second from a bot; a bot that
// sends allow_paid_broadcast may send up to 1,000 and pays for each message above 30.
const (
	freeGlobalPerSecond = 30
	paidGlobalPerSecond = 1000
)

// Options configure an Adapter.
type Options struct {
	Token string
	// Access is whom the adapter answers at the start; SetAccess changes it.
	Access
	// APIEndpoint is the Bot API URL format, "https://api.telegram.org/bot%s/%s" by default;
	// the file download URL is derived from it ("/bot%s/%s" → "/file/bot%s/%s").
	APIEndpoint string
	Mode        string // "polling" (default) or "webhook"
	// Webhook mode: the address to listen on, the public URL Telegram posts to, and the secret
	// Telegram sends in X-Telegram-Bot-Api-Secret-Token (requests without it are refused).
	WebhookListen, WebhookURL, WebhookSecret string
	// Webhook bounds the webhook server's connections (timeouts, sizes, how many at once).
	Webhook WebhookLimits
	// WebhookListener, when set, is served instead of a listener on WebhookListen (tests serve
	// the webhook in memory); Webhook.MaxConns still caps its connections.
	WebhookListener net.Listener
	// TriggerPrefix addresses the bot in a group when a message starts with it (it is removed).
	TriggerPrefix string
	// Stream makes replies stream by edits (Responder.SupportsStreaming).
	Stream bool
	// Drafts streams replies in private chats as drafts (sendMessageDraft) instead of edits,
	// persisted as messages; a bot that is refused drafts falls back to edits.
	Drafts bool
	// Rich sends each final answer that fits one rich message (sendRichMessage: 32,768
	// characters, collapsed <details> for folded tool lines and reasoning) as one, replacing
	// the messages it streamed into; a chat that refuses one gets plain messages from then on.
	Rich bool
	// MaxImageBytes caps a downloaded photo; 0 means 10 MiB, negative turns photos off.
	MaxImageBytes int
	// OffsetFile keeps, across restarts, the polling offset and every update handed to the
	// Handler that it has not finished with (see journal.go): after a crash the next run hands
	// those over again, marked Redelivered, so nothing is missed, and none it finished is
	// handed over twice. The webhook mode keeps its unfinished updates there too. Empty keeps
	// the offset only on the server: a crash loses the messages whose turns were running.
	OffsetFile string
	// PollTimeout is the long-polling wait; default 30s.
	PollTimeout time.Duration
	// RetryAfterUnit is what one unit of retry_after lasts; 1s (tests shorten it together with
	// their server).
	RetryAfterUnit time.Duration
	Logger         *slog.Logger
	// Delivery tunes the delivery engine (Observer for metrics, retries, typing interval).
	Delivery delivery.Options
	// GlobalPerSecond is the budget of sends and edits a second across all chats; 0 means 30.
	// Above 30 needs PaidBroadcast; at most 1,000.
	GlobalPerSecond int
	// PaidBroadcast sends allow_paid_broadcast with every message sent (the methods that take
	// it), lifting Telegram's limit for them to GlobalPerSecond, at most 1,000 a second. Edits
	// and drafts take no such parameter: they stay within Telegram's free 30 a second, which
	// the delivery engine budgets apart (delivery.Options.Paid).
	PaidBroadcast bool
	// HTTPClient is used for every request; default a client without a global timeout (each
	// request has its own deadline) that keeps as many idle connections to the Bot API as
	// GlobalPerSecond (see botTransport).
	HTTPClient *http.Client
	// Ledger, when several replicas serve the bot, takes each update once for all of them (by
	// bot id and update id); nil keeps the check in this process's memory.
	Ledger adapters.Ledger
	// PollLease, when several replicas serve the bot in polling mode, lets one of them poll at a
	// time; nil polls unconditionally.
	PollLease adapters.Lease
	// Questions, when several replicas serve the bot, records the questions this adapter
	// posts, so that a press of their buttons reaching another replica (a webhook behind a
	// load balancer, the poller moved) is carried to the turn that asked; nil answers only the
	// presses of this process's own questions.
	Questions adapters.QuestionBook
	// Commands, when set, are the bot's commands (the pipeline's table): Run sets them as the
	// bot's command menu (setMyCommands) before it receives.
	Commands adapters.Commands
	// PrivateTopics opens a topic for each conversation in private chats (topics.go): Run
	// turns the bot's topics in private chats on (setMySettings) when getMe says they are off;
	// where that fails, private chats are answered as before and the log says so once.
	PrivateTopics bool
}

// Access is whom the adapter answers and what it asks Telegram about them: [telegram]'s allow
// lists and the [access] users they let through, which a reload may change (SetAccess).
type Access struct {
	// ChatAdmins asks Telegram (getChatMember, remembered a minute) whether the sender of a
	// group message administers the chat (Inbound.ChatAdmin), for tool policies and quotas
	// that name chat admins.
	ChatAdmins bool
	// AllowedChats and AllowedUsers restrict who is answered (chat ids; user ids or usernames);
	// empty means everyone. A private chat is a chat: it passes AllowedChats when its id (the
	// user's id) is listed, or when the user is in AccessUsers.
	AllowedChats, AllowedUsers []string
	// AccessUsers are user ids listed in the bot's [access] allow_users or admins: their
	// private chats with the bot pass AllowedChats.
	AccessUsers []string
}

// accessSets is an Access as the inbound path reads it.
type accessSets struct {
	chatAdmins                              bool
	allowedChats, allowedUsers, accessUsers map[string]bool
}

func newAccessSets(a Access) *accessSets {
	return &accessSets{chatAdmins: a.ChatAdmins, allowedChats: set(a.AllowedChats, false),
		allowedUsers: set(a.AllowedUsers, true), accessUsers: set(a.AccessUsers, false)}
}

// SetAccess makes acc whom the adapter answers from the next update on (a reload); updates
// being handled keep the rules they were let in by.
func (a *Adapter) SetAccess(acc Access) { a.access.Store(newAccessSets(acc)) }

// Adapter is one Telegram bot connection.
type Adapter struct {
	opts   Options
	api    *api
	engine *delivery.Engine
	log    *slog.Logger
	self   tgbotapi.User

	access atomic.Pointer[accessSets]

	journal *journal // nil without OffsetFile

	// callbackRoutes route button presses by the prefix of their data; questions are the open
	// approval questions.
	callbackRoutes map[string]callbackRoute
	questions      adapters.Questions
	admins         adminCache
	topics         topics

	mu     sync.Mutex
	offset int64
}

// New checks the options, asks Telegram who the bot is (getMe), and returns the adapter.
func New(opts Options) (*Adapter, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	log := slog.New(logredact.NewHandler(opts.Logger.Handler(), func(s string) string { return redactToken(opts.Token, s) }))

	a := &api{base: opts.HTTPClient, endpoint: opts.APIEndpoint, token: opts.Token, retryAfterUnit: opts.RetryAfterUnit, log: log}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bot, err := tgbotapi.NewBotAPIWithClient(opts.Token, opts.APIEndpoint, ctxClient{ctx: ctx, base: opts.HTTPClient})
	if err != nil {
		return nil, a.classify(ctx, "getMe", err)
	}
	a.bot = bot

	ad := &Adapter{
		opts:   opts,
		api:    a,
		log:    log,
		self:   bot.Self,
		admins: adminCache{m: map[adminKey]adminVerdict{}},
	}
	ad.SetAccess(opts.Access)
	ad.questions.Book = opts.Questions
	ad.topics.a = ad
	ad.callbackRoutes = map[string]callbackRoute{approvePrefix: ad.onApprovePress}
	dopts := opts.Delivery
	dopts.Logger = log
	dopts.IsGroup = func(c chat.Ref) bool { return strings.HasPrefix(c.ChatID, "-") }
	lim := Limits()
	lim.Global.N = min(opts.GlobalPerSecond, freeGlobalPerSecond)
	if opts.PaidBroadcast {
		// Only the sends carry allow_paid_broadcast: they get the paid budget, drafts and
		// edits keep the free one.
		dopts.Paid = adapters.Rate{N: opts.GlobalPerSecond, Per: time.Second}
	}
	ad.engine = delivery.New(&messenger{api: a, drafts: opts.Drafts, paid: opts.PaidBroadcast, rich: opts.Rich}, lim, dopts)
	if err := ad.openJournal(); err != nil {
		return nil, err
	}
	return ad, nil
}

// fill checks the options New needs and sets the defaults of those left zero.
func (opts *Options) fill() error {
	if opts.Token == "" {
		return errors.New("telegram: token is empty")
	}
	if opts.APIEndpoint == "" {
		opts.APIEndpoint = tgbotapi.APIEndpoint
	}
	if strings.Count(opts.APIEndpoint, "%s") != 2 {
		return fmt.Errorf("telegram: api_endpoint %q must contain two %%s (token, method)", opts.APIEndpoint)
	}
	switch opts.Mode {
	case "":
		opts.Mode = "polling"
	case "polling":
	case "webhook":
		if opts.WebhookListen == "" || opts.WebhookURL == "" {
			return errors.New("telegram: webhook mode needs webhook_listen and webhook_url")
		}
		if opts.WebhookSecret == "" {
			return errors.New("telegram: webhook mode needs webhook_secret")
		}
	default:
		return fmt.Errorf("telegram: mode %q is neither \"polling\" nor \"webhook\"", opts.Mode)
	}
	if opts.MaxImageBytes == 0 {
		opts.MaxImageBytes = 10 << 20
	}
	switch {
	case opts.GlobalPerSecond == 0:
		opts.GlobalPerSecond = freeGlobalPerSecond
	case opts.GlobalPerSecond < 0 || opts.GlobalPerSecond > paidGlobalPerSecond:
		return fmt.Errorf("telegram: global budget %d a second is outside 1-%d", opts.GlobalPerSecond, paidGlobalPerSecond)
	case opts.GlobalPerSecond > freeGlobalPerSecond && !opts.PaidBroadcast:
		return fmt.Errorf("telegram: global budget %d a second needs paid broadcast (Telegram allows %d otherwise)", opts.GlobalPerSecond, freeGlobalPerSecond)
	}
	if opts.PollTimeout <= 0 {
		opts.PollTimeout = 30 * time.Second
	}
	if opts.RetryAfterUnit <= 0 {
		opts.RetryAfterUnit = time.Second
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Transport: botTransport(opts.GlobalPerSecond)}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// botTransport is http.DefaultTransport's settings, but keeping up to perSecond idle
// connections to the Bot API instead of Go's 2 per host: the requests in flight at once are
// about the budget of a second (sends, edits and drafts, typing within it) and the long poll,
// and with 2 kept a busy bot opened a new connection (a TCP and TLS handshake with Telegram)
// for most turns: 258 in 15 s of 100 chats. Idle connections still close after the default
// 90 s.
func botTransport(perSecond int) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = perSecond
	tr.MaxIdleConns = max(tr.MaxIdleConns, perSecond)
	return tr
}

// openJournal loads the offset file, when there is one, and resumes from its offset; a file
// another bot wrote is started over.
func (a *Adapter) openJournal() error {
	if a.opts.OffsetFile == "" {
		return nil
	}
	j, dropped, err := loadJournal(a.opts.OffsetFile, a.self.ID)
	if err != nil {
		return fmt.Errorf("telegram: %w", err)
	}
	if j.foreignBot != 0 {
		a.log.Warn("telegram: offset file was written for another bot; starting over", "file", a.opts.OffsetFile,
			"file_bot", j.foreignBot, "unfinished_updates_dropped", dropped)
	}
	a.journal = j
	a.offset = j.offset
	return nil
}

func set(items []string, users bool) map[string]bool {
	if len(items) == 0 {
		return nil
	}
	m := map[string]bool{}
	for _, it := range items {
		it = strings.TrimSpace(it)
		it = strings.TrimPrefix(it, "telegram:")
		if users {
			it = strings.ToLower(strings.TrimPrefix(it, "@"))
		}
		m[it] = true
	}
	return m
}

// Engine is the adapter's delivery engine (for metrics and direct notices).
func (a *Adapter) Engine() *delivery.Engine { return a.engine }

// Name is "telegram", the platform's name in logs and conversation keys.
func (a *Adapter) Name() string { return "telegram" }

// Limits returns the limits replies are paced by: the package's Limits with the configured
// global budget.
func (a *Adapter) Limits() adapters.Limits { return a.engine.Limits() }

// BotUsername is the bot's username from getMe.
func (a *Adapter) BotUsername() string { return a.self.UserName }

// Run receives updates until ctx ends, handing every addressed message to h on its own
// goroutine. It returns after the handlers it started have returned and the delivery engine
// has closed; an error only when receiving cannot start (a webhook that cannot listen or
// register). Run may be called once.
func (a *Adapter) Run(ctx context.Context, h adapters.Handler) error {
	var wg sync.WaitGroup
	defer a.engine.Close()
	if a.journal != nil {
		if err := a.journal.open(); err != nil {
			return fmt.Errorf("telegram: %w", err)
		}
		defer func() { // after every handler has finished
			if err := a.journal.close(); err != nil {
				a.log.Error("telegram: offset file not saved", "file", a.opts.OffsetFile, "err", err)
			}
		}()
	}
	defer wg.Wait()
	dispatch := func(id int64, m *message, handedOver int, placed func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer a.finished(id)
			if placed != nil {
				defer placed() // not addressed to the bot, or a handler that never said
			}
			in, ok := a.inbound(ctx, m)
			if !ok {
				return
			}
			in.Redelivered, in.Placed = handedOver > 0, placed
			if in.Redelivered {
				in.Redeliveries = a.handOver(id, handedOver)
			}
			if a.topics.opens(in) {
				in, _ = a.topics.open(ctx, in)
			} else {
				in.TitlesThread = a.topics.takeUntitled(in)
			}
			h.Handle(ctx, in, a.responderFor(in))
		}()
	}
	act := func(u *update) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in, ok := a.action(ctx, u)
			if !ok {
				return
			}
			h.Handle(ctx, in, a.engine.Responder(in.Chat, adapters.SendOptions{}, a.opts.Stream))
		}()
	}
	if a.journal != nil {
		// Updates a crashed run took but did not finish go first, oldest first.
		ids, raws := a.journal.unfinished()
		for _, id := range ids {
			var u update
			if err := json.Unmarshal(raws[id], &u); err != nil || u.Message == nil {
				a.log.Warn("telegram: undecodable update in the offset file skipped", "update", id, "err", err)
				a.finished(id)
				continue
			}
			a.log.Info("telegram: handing over again an update a previous run did not finish", "update", id)
			dispatch(id, u.Message, 1, nil)
		}
	}
	a.setCommands(ctx)
	a.topics.start(ctx)
	a.adoptOrphans(ctx, &wg, dispatch)
	if a.opts.Mode == "webhook" {
		return a.runWebhook(ctx, dispatch, act)
	}
	return a.runPollingLeased(ctx, dispatch, act)
}

// handOver counts a handover of update id after a run stopped before finishing it, at least
// atLeast (the count known elsewhere, such as the shared ledger's adoptions): atLeast without
// an offset file (nothing survives the run to count with).
func (a *Adapter) handOver(id int64, atLeast int) int {
	if a.journal == nil {
		return max(atLeast, 1)
	}
	n, err := a.journal.handOver(id, atLeast)
	if err != nil {
		a.log.Warn("telegram: the handover of an unfinished update not counted in the offset file", "update", id, "err", err)
	}
	return n
}

// finished records that the handler is done with update id.
func (a *Adapter) finished(id int64) {
	a.doneShared(id)
	if a.journal == nil {
		return
	}
	if err := a.journal.done(id); err != nil {
		a.log.Warn("telegram: offset file not updated; a restart may hand this update over again", "update", id, "err", err)
	}
}

// take records updates about to be handed over, and the offset after them, in the offset file.
func (a *Adapter) take(ids []int64, raws []json.RawMessage, offset int64) {
	if a.journal == nil || len(ids) == 0 && offset == 0 {
		return
	}
	if err := a.journal.take(ids, raws, offset); err != nil {
		a.log.Error("telegram: offset file not written; a crash before these turns end would lose them", "file", a.opts.OffsetFile, "updates", len(ids), "err", err)
	}
}

// redactToken removes the bot token, raw and URL-escaped, from s.
func redactToken(token, s string) string {
	if token == "" {
		return s
	}
	s = strings.ReplaceAll(s, token, "<redacted>")
	return strings.ReplaceAll(s, url.PathEscape(token), "<redacted>")
}

// Post sends text to ref through the delivery engine, for a message nobody sent (a scheduled
// task's reminder), and returns once Telegram confirmed it or it failed for good.
func (a *Adapter) Post(ctx context.Context, ref chat.Ref, text string) error {
	return a.engine.Notice(ctx, ref, text, adapters.SendOptions{})
}

// ChatResponder answers in ref a message nobody sent (a scheduled task's prompt): replies
// stream as this adapter's do, with a Stop button, and its questions (approvals) can be asked.
func (a *Adapter) ChatResponder(ref chat.Ref) adapters.Responder {
	return askResponder{Responder: a.engine.Responder(ref, adapters.SendOptions{Stoppable: true}, a.opts.Stream), a: a, chat: ref}
}
