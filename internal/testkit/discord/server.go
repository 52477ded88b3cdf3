// Package discord is a loopback Discord server for tests and benchmarks: a REST API under
// /api/v10 and a gateway WebSocket that speak Discord's wire protocol closely enough for
// github.com/bwmarrin/discordgo to run against them unchanged.
//
// The server keeps what a user would see in every channel (the current content of each message,
// in order, with buttons, attachments and who was pinged), records every REST call with its time,
// enforces Discord's per-channel budget (5 requests per 5 seconds, creates and edits share it)
// and the global one (50 requests per second) with real 429 responses, refuses files over the
// upload limit with 413, routes gateway events by shard as Discord does (Config.Shards), and
// injects faults on demand: deleted messages, 5xx answers, 429
// storms and dropped gateway connections.
package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"relaybot/internal/testkit/memnet"
)

// Route names the kind of REST request a Call was.
type Route string

// Routes the server answers.
const (
	RouteGateway             Route = "gateway"
	RouteGetChannel          Route = "get_channel"
	RouteStartThread         Route = "start_thread"
	RouteModifyChannel       Route = "modify_channel"
	RouteGetMember           Route = "get_member"
	RouteCreateMessage       Route = "create_message"
	RouteEditMessage         Route = "edit_message"
	RouteDeleteMessage       Route = "delete_message"
	RouteTyping              Route = "typing"
	RouteCommands            Route = "commands"
	RouteInteractionCallback Route = "interaction_callback"
	RouteWebhookEdit         Route = "webhook_edit"
	RouteWebhookDelete       Route = "webhook_delete"
	RouteWebhookFollowup     Route = "webhook_followup"
	RouteAttachment          Route = "attachment"
	RouteOther               Route = "other"
)

// Channel types the server knows (Discord's numbering).
const (
	ChannelGuildText    = 0
	ChannelDM           = 1
	ChannelPublicThread = 11
)

// Config tunes a Server. The zero value is Discord's behaviour with a bot named "relaybot".
type Config struct {
	// Token is the bot token without the "Bot " prefix; requests must carry "Bot <Token>".
	// Empty means "test-token".
	Token string
	// BotID and BotName describe the bot user; ApplicationID its application.
	BotID, BotName, ApplicationID string
	// BudgetN requests per BudgetWindow per channel for creates and edits (default 5 per 5 s).
	BudgetN      int
	BudgetWindow time.Duration
	// GlobalN requests per GlobalWindow for the whole bot, every REST request with the bot
	// token counted (default 50 per second, Discord's global limit).
	GlobalN      int
	GlobalWindow time.Duration
	// HeartbeatInterval announced in hello (default 41.25 s, Discord's usual value).
	HeartbeatInterval time.Duration
	// MaxUploadBytes is the largest file a message may carry (default 10 MiB, Discord's limit
	// for bots); a request with a larger file is answered 413 with code 40005, as Discord does.
	MaxUploadBytes int
	// Shards is the shard count GET /gateway/bot recommends and the least a session may
	// identify with (default 1). As on Discord, a session identifies as shard [id, count]
	// (no shard field means [0, 1]); a guild's events go to the sessions of shard
	// (guild_id >> 22) % count, direct messages to shard 0. Identifying with fewer shards than
	// this closes the connection with 4011 "Sharding required.", a shard id out of range with
	// 4010 "Invalid shard.". Two sessions may identify the same shard: both get its events.
	Shards int
	// MaxConcurrency is the session_start_limit.max_concurrency GET /gateway/bot reports: how
	// many shards may identify at once (default 1, Discord's for most bots; not enforced).
	MaxConcurrency int
	// InteractionDeadline is how long after an interaction is dispatched its initial response
	// (the callback) is taken; a later one is answered 404 "Unknown interaction" (10062), as
	// Discord invalidates the token of an interaction not answered within 3 seconds. Default
	// 3 s; negative takes a callback at any time.
	InteractionDeadline time.Duration
	// InMemory serves on a memnet listener instead of a loopback port, for tests in a
	// testing/synctest bubble (make the server inside it): the client dials it with Dial, for
	// REST (an http.Transport's DialContext) and the gateway alike, and every wait, the
	// server's rate-limit windows included, is on the bubble's clock.
	InMemory bool
	// ManageThreads grants the bot MANAGE_THREADS: it may reopen a thread a moderator locked.
	// Without it, unarchiving a locked thread is refused 403 Missing Permissions (50013).
	ManageThreads bool
}

// Attachment is a file on a message.
type Attachment struct {
	ID          string
	Filename    string
	ContentType string
	Data        []byte
	URL         string
	// Size, when set, is the size reported instead of len(Data) (a file too large to hold).
	Size int
	// DurationSecs and Waveform describe a voice message's recording (IS_VOICE_MESSAGE).
	DurationSecs float64
	Waveform     string
}

// FlagVoiceMessage is IS_VOICE_MESSAGE: the message is a voice message, one audio/ogg
// attachment with its duration and waveform, and no content.
const FlagVoiceMessage = 1 << 13

// Button is a button component on a message.
type Button struct {
	CustomID string
	Label    string
	Style    int
	// URL is set on a link button (style 5), which has no CustomID.
	URL string
}

// Message is a message as users see it now.
type Message struct {
	ID        string
	ChannelID string
	GuildID   string
	AuthorID  string
	AuthorBot bool
	// Content is the text users read: the content, or for a Components V2 message (Flags has
	// FlagComponentsV2) its text displays joined by blank lines.
	Content string
	// ReferenceID is the id of the message this one replies to.
	ReferenceID string
	Buttons     []Button
	Attachments []Attachment
	// Pings: who was notified by this message under its allowed_mentions.
	MentionEveryone bool
	MentionRoles    []string
	MentionUsers    []string
	Flags           int
	Edits           int
	CreatedAt       time.Time
	EditedAt        time.Time
	// InteractionID is set on interaction responses.
	InteractionID string
}

// Call is one REST request the server received.
type Call struct {
	Time      time.Time
	Method    string
	Path      string
	Route     Route
	ChannelID string
	MessageID string
	Status    int
	// RetryAfter is the wait a 429 asked for.
	RetryAfter time.Duration
	// Body is the JSON payload (payload_json of multipart requests).
	Body []byte
	// AllowedMentions is the raw allowed_mentions object, nil when the request had none.
	AllowedMentions []byte
	Files           []Attachment
}

// Channel is a channel the server knows.
type Channel struct {
	ID       string
	GuildID  string
	ParentID string
	Type     int
	Name     string
	// OwnerID is who opened a thread; Archived, Locked and AutoArchive (minutes) are its
	// thread_metadata.
	OwnerID     string
	Archived    bool
	Locked      bool
	AutoArchive int
}

// Command is an application command registered by the bot.
type Command struct {
	ID          string
	Name        string
	Description string
	GuildID     string
	// Options are the command's options, in order.
	Options []CommandOption
}

// CommandOption is one option of a registered application command.
type CommandOption struct {
	Type        int    `json:"type"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Required    bool   `json:"required"`
	// Choices are the values the option offers (their names).
	Choices    []string `json:"-"`
	RawChoices []struct {
		Name  string `json:"name"`
		Value any    `json:"value"`
	} `json:"choices"`
}

// Server is a running loopback Discord. Create it with New and stop it with Close.
type Server struct {
	cfg  Config
	url  string           // "http://127.0.0.1:port", or "http://discord.test" in memory
	http *httptest.Server // nil in memory
	mem  *memnet.Listener // nil on loopback
	srv  *http.Server     // serves mem

	mu           sync.Mutex
	nextID       uint64
	channels     map[string]*Channel
	guilds       []string
	members      map[string]map[string][]string // guild id → user id → role ids
	messages     map[string]*message            // by id, deleted ones included
	order        map[string][]string            // channel id → message ids in order
	calls        []Call
	buckets      map[string]*bucket
	global       bucket
	faults       []*fault
	storms       []*storm
	commands     []Command
	interactions map[string]*interaction // by token
	sessions     map[string]*session
	identifies   int
	// shardIdentifies counts identifies by shard id.
	shardIdentifies map[int]int
	resumes         int
	changed         chan struct{} // closed and replaced whenever state changes
}

type message struct {
	Message
	deleted bool
	v2      json.RawMessage // the components of a Components V2 message, as sent
}

type bucket struct {
	count   int
	resetAt time.Time
}

type fault struct {
	route      Route
	status     int
	n          int
	html       bool          // answer with an HTML page instead of Discord's JSON error
	retryAfter time.Duration // Retry-After header of an html fault (whole seconds); 0 for none
}

type storm struct {
	channelID  string
	n          int
	retryAfter time.Duration
}

type interaction struct {
	id, token, channelID, guildID string
	created                       time.Time // dispatched
	messageID                     string    // component interactions: the message clicked
	responded                     bool
	originalID                    string // the response message
}

// New starts a server on a loopback port.
func New(cfg Config) *Server {
	if cfg.Token == "" {
		cfg.Token = "test-token"
	}
	if cfg.BotID == "" {
		cfg.BotID = "100000000000000001"
	}
	if cfg.BotName == "" {
		cfg.BotName = "relaybot"
	}
	if cfg.ApplicationID == "" {
		cfg.ApplicationID = cfg.BotID
	}
	if cfg.BudgetN == 0 {
		cfg.BudgetN = 5
	}
	if cfg.BudgetWindow == 0 {
		cfg.BudgetWindow = 5 * time.Second
	}
	if cfg.GlobalN == 0 {
		cfg.GlobalN = 50
	}
	if cfg.GlobalWindow == 0 {
		cfg.GlobalWindow = time.Second
	}
	if cfg.MaxUploadBytes == 0 {
		cfg.MaxUploadBytes = 10 << 20
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = 41250 * time.Millisecond
		if cfg.InMemory {
			// discordgo's Close sleeps a second holding its session lock, and a heartbeat (or
			// its ack) takes that lock: one due within that second waits on a mutex, which a
			// synctest bubble cannot see past, and the test hangs. In memory, heartbeats come
			// once a day of the bubble's clock, past the end of any test.
			cfg.HeartbeatInterval = 24 * time.Hour
		}
	}
	if cfg.Shards <= 0 {
		cfg.Shards = 1
	}
	if cfg.MaxConcurrency <= 0 {
		cfg.MaxConcurrency = 1
	}
	s := &Server{
		cfg:             cfg,
		nextID:          1200000000000000000,
		channels:        map[string]*Channel{},
		members:         map[string]map[string][]string{},
		messages:        map[string]*message{},
		order:           map[string][]string{},
		buckets:         map[string]*bucket{},
		interactions:    map[string]*interaction{},
		sessions:        map[string]*session{},
		shardIdentifies: map[int]int{},
		changed:         make(chan struct{}),
	}
	if cfg.InMemory {
		s.mem = memnet.Listen("discord.test:80")
		s.srv = &http.Server{Handler: http.HandlerFunc(s.serveHTTP)}
		s.url = "http://discord.test"
		go func() { _ = s.srv.Serve(s.mem) }()
		return s
	}
	s.http = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	s.url = s.http.URL
	return s
}

// Close drops every gateway connection and stops the server.
func (s *Server) Close() {
	s.DropGateway()
	if s.srv != nil {
		_ = s.srv.Close()
		return
	}
	s.http.CloseClientConnections()
	s.http.Close()
}

// Dial connects to a server made InMemory, whatever the address; on loopback it dials the
// network. Its signature is that of http.Transport.DialContext and websocket.Dialer.NetDialContext.
func (s *Server) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if s.mem != nil {
		return s.mem.Dial(ctx, network, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// InMemory reports whether the server serves in memory (Config.InMemory).
func (s *Server) InMemory() bool { return s.mem != nil }

// APIBase is the REST base to give the adapter ("http://127.0.0.1:port/api/v10").
func (s *Server) APIBase() string { return s.url + "/api/v10" }

// GatewayURL is the WebSocket address GET /gateway returns.
func (s *Server) GatewayURL() string {
	return "ws" + strings.TrimPrefix(s.url, "http") + "/gateway"
}

// Token is the bot token the server accepts (without "Bot ").
func (s *Server) Token() string { return s.cfg.Token }

// BotID is the bot user's id.
func (s *Server) BotID() string { return s.cfg.BotID }

// ApplicationID is the bot's application id.
func (s *Server) ApplicationID() string { return s.cfg.ApplicationID }

// NewID returns a fresh snowflake.
func (s *Server) NewID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newIDLocked()
}

func (s *Server) newIDLocked() string {
	s.nextID++
	return strconv.FormatUint(s.nextID, 10)
}

// AddChannel registers a channel (guild text channel, DM or thread). Channels used in
// UserMessage are registered automatically: a guild text channel when GuildID is set, else a DM.
func (s *Server) AddChannel(c Channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addChannelLocked(c)
}

func (s *Server) addChannelLocked(c Channel) {
	cp := c
	s.channels[c.ID] = &cp
	if c.GuildID != "" && !slices.Contains(s.guilds, c.GuildID) {
		s.guilds = append(s.guilds, c.GuildID)
	}
}

// AddMember makes userID a member of guildID holding roleIDs (GET /guilds/{guild}/members/{user}
// answers it; anyone else is an Unknown Member). Adding a member again replaces their roles.
func (s *Server) AddMember(guildID, userID string, roleIDs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.members[guildID] == nil {
		s.members[guildID] = map[string][]string{}
	}
	s.members[guildID][userID] = slices.Clone(roleIDs)
	if !slices.Contains(s.guilds, guildID) {
		s.guilds = append(s.guilds, guildID)
	}
}

// Channel returns a channel the server knows (threads the bot opened included), and whether it
// exists.
func (s *Server) Channel(id string) (Channel, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.channels[id]
	if !ok {
		return Channel{}, false
	}
	return *c, true
}

// Threads returns the threads opened in a channel, in no particular order.
func (s *Server) Threads(parentID string) []Channel {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Channel
	for _, c := range s.channels {
		if c.Type == ChannelPublicThread && c.ParentID == parentID {
			out = append(out, *c)
		}
	}
	return out
}

// ArchiveThread archives a thread as Discord does after its inactivity or a moderator does,
// locked when locked (then only members with MANAGE_THREADS may reopen it).
func (s *Server) ArchiveThread(id string, locked bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.channels[id]
	if !ok || c.Type != ChannelPublicThread {
		return fmt.Errorf("archive thread %s: unknown thread", id)
	}
	c.Archived, c.Locked = true, locked
	s.notifyLocked()
	return nil
}

// DeleteChannel deletes a channel (a thread) as a moderator does: requests naming it answer
// 404 Unknown Channel (10003).
func (s *Server) DeleteChannel(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.channels[id]; !ok {
		return fmt.Errorf("delete channel %s: unknown channel", id)
	}
	delete(s.channels, id)
	for _, mid := range s.order[id] {
		s.messages[mid].deleted = true
	}
	s.notifyLocked()
	return nil
}

// Messages returns the visible messages of a channel, oldest first, as users see them now.
func (s *Server) Messages(channelID string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, id := range s.order[channelID] {
		m := s.messages[id]
		if m.deleted {
			continue
		}
		out = append(out, copyMessage(m.Message))
	}
	return out
}

// BotMessages returns the visible messages the bot wrote in a channel, oldest first.
func (s *Server) BotMessages(channelID string) []Message {
	var out []Message
	for _, m := range s.Messages(channelID) {
		if m.AuthorID == s.cfg.BotID {
			out = append(out, m)
		}
	}
	return out
}

// Message returns one message by id, and whether it exists and is not deleted.
func (s *Server) Message(id string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[id]
	if !ok || m.deleted {
		return Message{}, false
	}
	return copyMessage(m.Message), true
}

func copyMessage(m Message) Message {
	m.Buttons = slices.Clone(m.Buttons)
	m.Attachments = slices.Clone(m.Attachments)
	m.MentionRoles = slices.Clone(m.MentionRoles)
	m.MentionUsers = slices.Clone(m.MentionUsers)
	return m
}

// Calls returns every REST call so far, in arrival order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// CallsTo returns the calls of some routes, in arrival order.
func (s *Server) CallsTo(routes ...Route) []Call {
	var out []Call
	for _, c := range s.Calls() {
		if slices.Contains(routes, c.Route) {
			out = append(out, c)
		}
	}
	return out
}

// Commands returns the application commands the bot registered last.
func (s *Server) Commands() []Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.commands)
}

// DeleteMessage deletes a message as a moderator would: it disappears from the channel and
// later edits of it answer 404 Unknown Message (10008).
func (s *Server) DeleteMessage(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[id]
	if !ok || m.deleted {
		return fmt.Errorf("delete message %s: unknown message", id)
	}
	m.deleted = true
	s.notifyLocked()
	return nil
}

// FailNext makes the next n requests of a route answer with an HTTP status (a 5xx usually).
func (s *Server) FailNext(route Route, status, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &fault{route: route, status: status, n: n})
}

// ProxyRateLimit makes the next n requests of a route answer 429 with an HTML page, as a
// proxy or Cloudflare in front of Discord does, instead of Discord's JSON body. retryAfter is
// sent as a Retry-After header in whole seconds (rounded up); 0 sends no header.
func (s *Server) ProxyRateLimit(route Route, n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &fault{route: route, status: http.StatusTooManyRequests, n: n, html: true, retryAfter: retryAfter})
}

// Storm makes the next n message creates or edits in a channel ("" for any channel) answer 429
// with retryAfter, whatever the budget says, as Discord does under a shared or global limit.
func (s *Server) Storm(channelID string, n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.storms = append(s.storms, &storm{channelID: channelID, n: n, retryAfter: retryAfter})
}

// Identifies and Resumes count the gateway identify (op 2) and resume (op 6) payloads received.
func (s *Server) Identifies() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.identifies
}

// LiveShards returns, for each shard id, how many sessions identified as that shard are
// connected now (READY or RESUMED received): 1 everywhere when each shard has one connection.
func (s *Server) LiveShards() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]int{}
	for _, ss := range s.sessions {
		if ss.live() {
			out[ss.shard]++
		}
	}
	return out
}

// ShardIdentifies counts the identify payloads received for shard id (of any count).
func (s *Server) ShardIdentifies(id int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shardIdentifies[id]
}

// Resumes counts the gateway resume payloads that resumed a session.
func (s *Server) Resumes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resumes
}

// WaitFor blocks until cond (called with no server lock held) is true, the state changes are
// polled on every server change; it returns ctx's error if ctx ends first.
func (s *Server) WaitFor(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for discord test server state: %w", ctx.Err())
		}
	}
}

// WaitReady waits until a gateway session is connected and has received READY or RESUMED.
func (s *Server) WaitReady(ctx context.Context) error {
	return s.WaitFor(ctx, s.connected)
}

func (s *Server) connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.sessions {
		if ss.live() {
			return true
		}
	}
	return false
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// errNoSession is returned by dispatching helpers when no bot is connected.
var errNoSession = errors.New("no gateway session has identified (for the guild's shard)")
