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
	"net/http"
	"relaybot/chat"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
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
	// AllowedGuilds, AllowedChannels and AllowedRoles restrict where and for whom the bot
	// answers in guilds; empty means no restriction of that kind. A thread is allowed when it
	// or its parent channel is listed. When any of them is set, a direct message (or a slash
	// command in one) is answered only for a user in AccessUsers or a member of an allowed guild
	// (AllowedGuilds, else the guilds of AllowedChannels, else every guild the bot is in) who
	// holds an allowed role there when AllowedRoles is set; the membership is asked of Discord
	// and remembered for a minute.
	AllowedGuilds, AllowedChannels, AllowedRoles []string
	// AccessUsers are user ids listed in the bot's [access] allow_users or admins: they may
	// always send direct messages, whatever the guild rules.
	AccessUsers []string
	// NoDMs refuses every direct message and every slash command used in one.
	NoDMs bool
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

// plainMessenger is the adapter without FileAttacher: a Components V2 message shows no
// attachment that no component exposes, so files go in messages of their own.
type plainMessenger struct{ a *Adapter }

func (m plainMessenger) Send(ctx context.Context, chat chat.Ref, text string, opts adapters.SendOptions) (adapters.MessageRef, error) {
	return m.a.Send(ctx, chat, text, opts)
}

func (m plainMessenger) Edit(ctx context.Context, msg adapters.MessageRef, text string) error {
	return m.a.Edit(ctx, msg, text)
}

func (m plainMessenger) EditStreaming(ctx context.Context, msg adapters.MessageRef, text string) error {
	return m.a.EditStreaming(ctx, msg, text)
}

func (m plainMessenger) SendFiles(ctx context.Context, chat chat.Ref, files []chat.File, caption string, opts adapters.SendOptions) (adapters.MessageRef, error) {
	return m.a.SendFiles(ctx, chat, files, caption, opts)
}

func (m plainMessenger) Typing(ctx context.Context, chat chat.Ref) error {
	return m.a.Typing(ctx, chat)
}

// StopButtonID is the custom_id of the Stop button on a streaming reply.
const StopButtonID = "relaybot:stop"

// applicationCommands are the bot's commands as Discord's application commands: each argument an
// optional string option, offering its choices when it has some.
func applicationCommands(cs adapters.Commands) []*discordgo.ApplicationCommand {
	out := make([]*discordgo.ApplicationCommand, 0, len(cs))
	for _, c := range cs {
		ac := &discordgo.ApplicationCommand{Name: c.Name, Description: c.Description()}
		for _, a := range c.Args {
			o := &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionString, Name: a.Name, Description: a.Help}
			for _, ch := range a.Choices {
				o.Choices = append(o.Choices, &discordgo.ApplicationCommandOptionChoice{Name: ch, Value: ch})
			}
			ac.Options = append(ac.Options, o)
		}
		out = append(out, ac)
	}
	return out
}

// Adapter is one bot connection to Discord. It implements adapters.Messenger for the delivery
// engine; Run receives messages.
type Adapter struct {
	opts Options
	log  *slog.Logger
	// session makes the REST requests; the gateway connections are sessions of their own, one
	// per shard (shards.go).
	session *discordgo.Session
	rt      http.RoundTripper
	gw      gatewayPlan  // set by Run before any shard connects
	http    *http.Client // images users send
	engine  *delivery.Engine
	stops   *stopTracker
	// questions are the open approval questions (buttons "relaybot:approve:…").
	questions adapters.Questions

	mu      sync.Mutex
	running bool
	stopped bool // Run ended: no new handler goroutines
	botID   string
	botName string // the bot's username, which a text command may name ("/reset@name")
	appID   string
	parents map[string]string // channel id → parent id ("" for none), for AllowedChannels
	guildOf map[string]string // channel id → guild id, for the DM rule with AllowedChannels
	dmUsers map[string]dmVerdict
	shards  map[int]*discordgo.Session // connected shards by id, for their state
	// handedOver holds, per channel, a channel closed when the channel's latest message has been
	// handed to the handler (or dropped): the next message waits for it, so a channel's messages
	// reach the pipeline in the order the gateway sent them.
	handedOver map[string]chan struct{}
	handlers   sync.WaitGroup

	identMu    sync.Mutex
	identified map[int]time.Time // identify bucket → when its last identify went out
	registered sync.Once
}

var (
	_ adapters.Messenger    = (*Adapter)(nil)
	_ adapters.FileAttacher = (*Adapter)(nil)
)

// New creates an adapter; it does not connect until Run.
func New(opts Options) (*Adapter, error) {
	if opts.Token == "" {
		return nil, errors.New("discord: token is required")
	}
	if opts.APIBase == "" {
		opts.APIBase = defaultAPIBase
	}
	if opts.MaxImageBytes <= 0 {
		opts.MaxImageBytes = 10 << 20
	}
	if opts.GlobalPerSecond < 0 {
		return nil, fmt.Errorf("discord: global budget %d a second is negative", opts.GlobalPerSecond)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	rt, err := newRewriter(opts.APIBase, opts.HTTPTransport)
	if err != nil {
		return nil, err
	}
	if opts.Shards < 0 {
		return nil, fmt.Errorf("discord: %d shards: want a positive count, or 0 for Discord's", opts.Shards)
	}
	a := &Adapter{
		opts:       opts,
		log:        opts.Logger,
		rt:         rt,
		http:       &http.Client{Transport: rt, Timeout: time.Minute},
		stops:      newStopTracker(),
		parents:    map[string]string{},
		guildOf:    map[string]string{},
		dmUsers:    map[string]dmVerdict{},
		shards:     map[int]*discordgo.Session{},
		identified: map[int]time.Time{},
	}
	a.questions.Book = opts.Questions
	if a.session, err = a.newSession(); err != nil {
		return nil, err
	}
	dopts := opts.Delivery
	if dopts.Logger == nil {
		dopts.Logger = opts.Logger
	}
	if dopts.TypingInterval <= 0 {
		dopts.TypingInterval = 8 * time.Second // Discord shows typing for 10 s
	}
	var m adapters.Messenger = a
	if opts.ComponentsV2 {
		m = plainMessenger{a}
	}
	a.engine = delivery.New(m, limitsFor(opts), dopts)
	rt.pace = func(ctx context.Context) (func(), error) {
		return a.engine.Place(ctx, chat.Ref{Platform: chat.Discord}, delivery.ClassBotWide)
	}
	return a, nil
}

// newSession builds a discordgo session with the adapter's transport and gateway settings.
func (a *Adapter) newSession() (*discordgo.Session, error) {
	s, err := discordgo.New("Bot " + a.opts.Token)
	if err != nil {
		return nil, fmt.Errorf("discord: creating session: %w", err)
	}
	s.Client = &http.Client{Transport: a.rt}
	// The delivery engine owns retries and rate limits: discordgo must hand 429s and 5xx back.
	s.ShouldRetryOnRateLimit = false
	s.MaxRestRetries = 0
	s.Identify.Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages |
		discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent
	// Reconnecting is Run's job (keepConnected): discordgo's own loop cannot be cancelled and
	// can reopen the gateway after Close. Open still resumes the session (session id and
	// sequence are kept), so events sent meanwhile are replayed.
	s.ShouldReconnectOnError = false
	// Handlers only filter and spawn, so they run in gateway order on the reader goroutine.
	s.SyncEvents = true
	s.Dialer = &websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 15 * time.Second}
	return s, nil
}

// Name is "discord", the platform's name in logs and conversation keys.
func (a *Adapter) Name() string { return "discord" }

// Limits returns the limits replies are paced by: the package's Limits with the configured
// global budget.
func (a *Adapter) Limits() adapters.Limits { return a.engine.Limits() }

// Engine returns the delivery engine replies go through.
func (a *Adapter) Engine() *delivery.Engine { return a.engine }

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
	var err error
	if a.gw, err = a.plan(runCtx); err != nil {
		a.shutdown()
		return err
	}
	var leases []adapters.Lease
	if a.opts.ShardLeases != nil {
		if leases, err = a.opts.ShardLeases.Join(runCtx, a.gw.count); err != nil {
			a.shutdown()
			return fmt.Errorf("discord: sharing %d shards with the other replicas: %w", a.gw.count, err)
		}
	}
	var wg sync.WaitGroup
	if leases == nil {
		if err := a.runShards(runCtx, h, &wg); err != nil {
			a.shutdown()
			return err
		}
	} else {
		a.log.Info("discord: sharing the gateway shards with the other replicas", "shards", a.gw.count)
		for id, l := range leases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a.holdShard(runCtx, h, l, id)
			}()
		}
	}
	a.adoptOrphans(runCtx, h, &wg)
	<-ctx.Done()
	cancel()
	wg.Wait()
	a.shutdown()
	return nil
}

// shutdown stops new handler goroutines and waits for the running ones.
func (a *Adapter) shutdown() {
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
	a.handlers.Wait()
}

// spawn runs fn on a tracked goroutine unless Run has ended.
func (a *Adapter) spawn(fn func()) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return false
	}
	a.handlers.Add(1)
	go func() {
		defer a.handlers.Done()
		fn()
	}()
	return true
}

// onReady learns who the bot is from a shard's READY.
func (a *Adapter) onReady(r *discordgo.Ready) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.User != nil {
		a.botID = r.User.ID
		a.botName = r.User.Username
		if a.appID == "" {
			a.appID = r.User.ID
		}
	}
	if r.Application != nil && r.Application.ID != "" {
		a.appID = r.Application.ID
	}
}

func (a *Adapter) botUserID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botID
}

func (a *Adapter) botUserName() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botName
}

func (a *Adapter) registerCommands(ctx context.Context) error {
	a.mu.Lock()
	appID := a.appID
	a.mu.Unlock()
	return a.botWide(ctx, "registering application commands", func(ctx context.Context) error {
		_, err := a.session.ApplicationCommandBulkOverwrite(appID, "", applicationCommands(a.opts.Commands), a.reqOpts(ctx)...)
		return err
	})
}

// channel looks a channel up over REST.
func (a *Adapter) channel(ctx context.Context, channelID string) (*discordgo.Channel, error) {
	var c *discordgo.Channel
	err := a.botWide(ctx, "looking up channel "+channelID, func(ctx context.Context) (err error) {
		c, err = a.session.Channel(channelID, a.reqOpts(ctx)...)
		return err
	})
	return c, err
}

// botWide makes run's one REST request, which Discord counts against the bot's global limit
// though it is no message in a chat, through the delivery engine: paced within this replica's
// share of that limit, at the priority of final messages, its 429s waited out and its temporary
// failures retried. what names the request in its error.
func (a *Adapter) botWide(ctx context.Context, what string, run func(ctx context.Context) error) error {
	return a.engine.Do(ctx, delivery.Request{Chat: chat.Ref{Platform: chat.Discord}, Class: delivery.ClassBotWide, Kind: delivery.EventLookup,
		Run: func(ctx context.Context) error { return classify(what, run(ctx)) }})
}

// reqOpts are the per-request options of every REST call the adapter makes, each through the
// delivery engine: the caller's context, marked as paced by the engine (the transport paces
// the requests discordgo makes on its own), no internal retries of 429s or 5xx.
func (a *Adapter) reqOpts(ctx context.Context) []discordgo.RequestOption {
	return []discordgo.RequestOption{
		discordgo.WithContext(accounted(ctx)),
		discordgo.WithRetryOnRatelimit(false),
		discordgo.WithRestRetries(0),
	}
}
