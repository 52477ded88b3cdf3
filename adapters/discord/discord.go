// Package discord connects the bot to Discord through github.com/bwmarrin/discordgo: it receives
// messages and interactions over the gateway (one connection per shard it holds, reopening it
// and resuming the session when it drops), turns the ones meant for the bot into
// adapters.Inbound values, and delivers replies
// over REST through the shared delivery engine (adapters/delivery), which owns pacing and rate
// limits.
//
// Conversations: a direct message channel, a guild text channel and a thread are each their own
// chat. A thread is a channel of its own on Discord (with its own rate-limit bucket), so its
// chat.Ref.ChatID is the thread's channel id and ThreadID stays empty; the parent channel only
// matters for AllowedChannels.
//
// Replies: the first message references the user's message; every send and edit carries
// allowed_mentions with nothing to parse, so the model's text can never ping @everyone, a role
// or a user. A streaming reply shows a ▌ cursor and a Stop button; both go when it is final.
package discord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	"relaybot/chat"
)

// Limits returns Discord's limits: 2,000 characters (code points) and 10 attachments per message, 5 creates or
// edits per 5 seconds per channel (shared by every reply in the channel) and 50 requests per
// second for the whole bot.
func Limits() adapters.Limits {
	return adapters.Limits{MaxLen: 2000, Unit: adapters.Runes, MaxFiles: maxFilesPerMessage,
		PerChat: adapters.Rate{N: 5, Per: 5 * time.Second}, Global: adapters.Rate{N: 50, Per: time.Second}}
}

// Options configure an Adapter.
type Options struct {
	// Token is the bot token (without the "Bot " prefix). Required.
	Token string
	// APIBase is the REST API base; empty means https://discord.com/api/v10. The gateway
	// address is asked of it (GET /gateway). Requests discordgo makes to discord.com are sent
	// here by the session's HTTP transport; no package-level discordgo state is changed.
	APIBase string
	// Access is where and for whom the bot answers at the start; SetAccess changes it.
	Access
	// TriggerPrefix, when set, addresses the bot in guild channels by starting a message with
	// it (besides mentioning the bot or replying to it).
	TriggerPrefix string
	// RegisterCommands registers Commands as global application commands at start.
	RegisterCommands bool
	// Commands are the bot's commands (the pipeline's table), registered as slash commands.
	Commands adapters.Commands
	// MaxImageBytes caps each image a user sends; larger images are skipped. Default 10 MiB.
	MaxImageBytes int
	// Logger receives the adapter's logs; nil discards them.
	Logger *slog.Logger
	// Delivery tunes the delivery engine (Observer for metrics, retries); a zero
	// TypingInterval means 8 s, since Discord shows typing for 10 s.
	Delivery delivery.Options
	// HTTPTransport is the transport under the API rewriting; nil means http.DefaultTransport.
	HTTPTransport http.RoundTripper
	// GatewayDial, when set, opens the gateway's connections instead of the network (tests
	// connect them in memory, as HTTPTransport does the REST requests).
	GatewayDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// ComponentsV2 sends replies as Components V2 messages: a container with a text display
	// (4,000 characters instead of 2,000) and the Stop button in the same container. Files then
	// go in messages of their own.
	ComponentsV2 bool
	// MaxLines splits Components V2 replies at this many lines as well, so the client never
	// clips them; 0 means 17.
	MaxLines int
	// Ledger, when several replicas serve the bot, lets one of them take each message and
	// interaction (a gateway may deliver an event twice, and two sessions may hold one shard
	// for a moment); nil takes them all. When it is an adapters.Journal, each message is kept
	// until its turn ends, and the messages of replicas that died mid-turn are taken over and
	// answered again (Inbound.Redelivered).
	Ledger adapters.Ledger
	// Shards is how many gateway shards the bot uses; 0 uses the count Discord recommends
	// (GET /gateway/bot). A guild's events arrive on shard (guild_id >> 22) % Shards, direct
	// messages on shard 0.
	Shards int
	// ShardLeases, when several replicas serve the bot, hands the shards out among them: this
	// adapter connects only the shards whose lease it holds, and closes a shard's connection
	// when its lease is lost. Nil connects every shard.
	ShardLeases adapters.Shards
	// Questions, when several replicas serve the bot, records the questions this adapter
	// posts, so that a press of their buttons reaching another replica (another shard holder)
	// is carried to the turn that asked; nil answers only the presses of this process's own
	// questions.
	Questions adapters.QuestionBook
	// GlobalPerSecond is the bot's budget of REST requests a second; 0 means Discord's default
	// of 50 (Discord grants large bots more).
	GlobalPerSecond int
	// Threads opens a public thread on each guild message that starts a conversation in a
	// channel (one addressed to the bot outside a thread, no command), in ThreadChannels or
	// every channel when that is empty; the thread is the conversation's chat (its id is the
	// message's; Inbound.ParentChatID is the channel) and is opened when the answer begins. In
	// a thread the bot opened, every message is for the bot without a mention.
	Threads        bool
	ThreadChannels []string
	// AutoArchive is the minutes of inactivity after which Discord archives a thread the bot
	// opened: 60, 1440, 4320 or 10080; 0 means 1440.
	AutoArchive int
}

// componentsV2Len is what one Components V2 message holds: 4,000 characters of text across
// all its components, less the Stop button's label.
const componentsV2Len = 4000 - len("Stop")

// limitsFor returns the limits replies are paced and split by under opts.
func limitsFor(opts Options) adapters.Limits {
	l := Limits()
	if opts.GlobalPerSecond > 0 {
		l.Global.N = opts.GlobalPerSecond
	}
	if opts.ComponentsV2 {
		l.MaxLen, l.MaxLines = componentsV2Len, opts.MaxLines
		if l.MaxLines <= 0 {
			l.MaxLines = 17
		}
	}
	return l
}

// StopButtonID is the custom_id of the Stop button on a streaming reply.
const StopButtonID = "relaybot:stop"

// Adapter is one bot connection to Discord, composed of parts: the messenger the delivery
// engine sends, edits and types through (messenger.go); the REST requests that are no message
// in a chat (rest.go); the gateway and its shards (gateway.go, shards.go); the messages it
// receives (inbound.go) under the guild rules (access.go); and the interactions: slash
// commands, the Stop button and question presses (interactions.go, ask.go). Run receives.
type Adapter struct {
	log          *slog.Logger
	engine       *delivery.Engine
	messenger    *messenger
	gateway      *gateway
	inbox        *inbox
	interactions *interactions
	work         *workers

	mu      sync.Mutex
	running bool
}

var _ adapters.QuestionCloser = (*Adapter)(nil)

// New creates an adapter; it does not connect until Run.
func New(opts Options) (*Adapter, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	rt, err := newRewriter(opts.APIBase, opts.HTTPTransport)
	if err != nil {
		return nil, err
	}
	session, err := newSession(opts, rt)
	if err != nil {
		return nil, err
	}
	a := &Adapter{log: opts.Logger, work: &workers{}}
	stops := newStopTracker()
	a.messenger = &messenger{session: session, stops: stops, v2: opts.ComponentsV2}
	var m adapters.Messenger = a.messenger
	if opts.ComponentsV2 {
		m = plainMessenger{a.messenger}
	}
	a.engine = delivery.New(m, limitsFor(opts), opts.Delivery)
	rt.pace = func(ctx context.Context) (func(), error) {
		return a.engine.Place(ctx, chat.Ref{Platform: chat.Discord}, delivery.ClassBotWide)
	}
	api := &rest{session: session, engine: a.engine}
	bot := &botIdentity{}
	state := &shardStates{shards: map[int]*discordgo.Session{}}
	acc := newAccess(opts, api, state)
	led := &ledger{l: opts.Ledger, log: opts.Logger}
	replies := replies{engine: a.engine, stops: stops}
	a.interactions = &interactions{log: opts.Logger, engine: a.engine, session: session, ledger: led, access: acc,
		replies: replies, work: a.work}
	a.interactions.questions.Book = opts.Questions
	a.inbox = &inbox{opts: opts, log: opts.Logger, http: &http.Client{Transport: rt, Timeout: time.Minute},
		bot: bot, access: acc, ledger: led, work: a.work, answer: a.interactions.responder}
	if opts.Threads {
		a.inbox.threads = &threads{opts: opts, log: opts.Logger, session: session, engine: a.engine, access: acc,
			replies: replies, bot: bot}
	}
	a.gateway = newGateway(opts, rt, api, bot, state, receivers{message: a.inbox.onMessage, interaction: a.interactions.onInteraction})
	return a, nil
}

// fill checks the options New needs and sets the defaults of those left zero.
func (opts *Options) fill() error {
	if opts.Token == "" {
		return errors.New("discord: token is required")
	}
	if opts.APIBase == "" {
		opts.APIBase = defaultAPIBase
	}
	if opts.MaxImageBytes <= 0 {
		opts.MaxImageBytes = 10 << 20
	}
	if opts.GlobalPerSecond < 0 {
		return fmt.Errorf("discord: global budget %d a second is negative", opts.GlobalPerSecond)
	}
	if opts.AutoArchive != 0 && !slices.Contains(archiveDurations, opts.AutoArchive) {
		return fmt.Errorf("discord: auto-archive after %d minutes: Discord takes %v", opts.AutoArchive, archiveDurations)
	}
	if opts.Shards < 0 {
		return fmt.Errorf("discord: %d shards: want a positive count, or 0 for Discord's", opts.Shards)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Delivery.Logger == nil {
		opts.Delivery.Logger = opts.Logger
	}
	if opts.Delivery.TypingInterval <= 0 {
		opts.Delivery.TypingInterval = 8 * time.Second // Discord shows typing for 10 s
	}
	return nil
}

// Name is "discord", the platform's name in logs and conversation keys.
func (a *Adapter) Name() string { return "discord" }

// Limits returns the limits replies are paced by: the package's Limits with the configured
// global budget.
func (a *Adapter) Limits() adapters.Limits { return a.engine.Limits() }

// Engine returns the delivery engine replies go through.
func (a *Adapter) Engine() *delivery.Engine { return a.engine }

// CloseQuestion sets a question's text and takes its buttons off, through the channel's
// budgets in the delivery engine; a failure is logged. It implements adapters.QuestionCloser:
// a survivor closes the questions of a replica that was taken over with it.
func (a *Adapter) CloseQuestion(ctx context.Context, ref chat.Ref, messageID, text string) {
	a.interactions.closeQuestion(ctx, ref, messageID, text)
}

// Run connects to the gateway and hands every addressed message and command to h, each on its
// own goroutine, until ctx ends. It then disconnects, waits for the handlers to return and
// returns nil. The gateway is sharded as Options.Shards says: without ShardLeases every shard
// is connected here, with them only the shards this replica holds. A dropped gateway
// connection is reopened and the session resumed (events sent meanwhile are replayed); replies
// already streaming go over REST and are not affected. Run may be called once.
func (a *Adapter) Run(ctx context.Context, h adapters.Handler) error {
	a.mu.Lock()
	if a.running {
		a.mu.Unlock()
		return errors.New("discord: Run called twice")
	}
	a.running = true
	a.mu.Unlock()
	defer a.engine.Close()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if err := a.gateway.run(runCtx, h, &wg); err != nil {
		a.work.stop()
		return err
	}
	a.inbox.adoptOrphans(runCtx, h, &wg)
	<-ctx.Done()
	cancel()
	wg.Wait()
	a.work.stop()
	return nil
}

// workers are the goroutines handling messages and interactions, each on its own.
type workers struct {
	mu      sync.Mutex
	stopped bool // Run ended: no new handler goroutines
	wg      sync.WaitGroup
}

// stop stops new handler goroutines and waits for the running ones.
func (w *workers) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.wg.Wait()
}

// spawn runs fn on a tracked goroutine unless Run has ended.
func (w *workers) spawn(fn func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return false
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		fn()
	}()
	return true
}

// Post sends text to ref through the delivery engine, for a message nobody sent (a scheduled
// task's reminder), and returns once Discord confirmed it or it failed for good.
func (a *Adapter) Post(ctx context.Context, ref chat.Ref, text string) error {
	return a.engine.Notice(ctx, ref, text, adapters.SendOptions{})
}

// ChatResponder answers in ref a message nobody sent (a scheduled task's prompt), as a message's
// replies are: streamed with a Stop button, its questions (approvals) asked with buttons.
func (a *Adapter) ChatResponder(ref chat.Ref) adapters.Responder {
	return a.interactions.responder(ref, "", "")
}
