// Package config loads config.toml into typed, validated settings. Every error names the key
// that is wrong and why; secrets come from ${ENV} references, expanded after parsing so that a
// value can never break the TOML syntax.
package config

import (
	"encoding"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"relaybot/policy"
	"relaybot/provider"
)

// Config is the whole config.toml.
type Config struct {
	Storage  Storage  `toml:"storage"`
	Models   []Model  `toml:"models"`
	Agent    Agent    `toml:"agent"`
	Output   Output   `toml:"output"`
	Chat     Chat     `toml:"chat"`
	Access   Access   `toml:"access"`
	Tools    Tools    `toml:"tools"`
	Telegram Telegram `toml:"telegram"`
	Discord  Discord  `toml:"discord"`
	MCP      MCP      `toml:"mcp"`
	Admin    Admin    `toml:"admin"`
	Log      Log      `toml:"log"`
	Quotas   Quotas   `toml:"quotas"`
	Media    Media    `toml:"media"`
	Speech   Speech   `toml:"speech"`
	OTel     OTel     `toml:"otel"`
	Tasks    Tasks    `toml:"tasks"`

	Embeddings Embeddings `toml:"embeddings"`
	Memory     Memory     `toml:"memory"`
	Knowledge  Knowledge  `toml:"knowledge"`

	// Warnings are problems that did not stop loading (a value replaced by its default).
	Warnings []string `toml:"-"`
	// SecretKey is BOT_SECRET_KEY decoded (32 bytes), read when an MCP server has
	// auth = "oauth"; nil otherwise.
	SecretKey []byte `toml:"-"`

	// File is the file Load read, which a reload reads again; empty when the config was parsed
	// from bytes.
	File string `toml:"-"`

	// sources are where each key the file or the environment set came from (Settings).
	sources map[string]source
}

// Tasks configures reminders and scheduled tasks (package tasks): the schedule_task, list_tasks
// and cancel_task tools and the /tasks and /timezone commands.
type Tasks struct {
	// Enabled offers the tools and runs the scheduler.
	Enabled bool `toml:"enabled"`
	// MaxPerUser caps the tasks one person keeps that still have runs to come.
	MaxPerUser int `toml:"max_per_user"`
	// MinEvery is the shortest recurrence an "every" task may have.
	MinEvery Span `toml:"min_every"`
	// MisfireGrace is how late a run may fire after downtime; an older run is skipped and its
	// owner told.
	MisfireGrace Span `toml:"misfire_grace"`
	// DefaultTimezone is the zone of a person who never set one with /timezone (IANA name).
	DefaultTimezone string `toml:"default_timezone"`
}

// Storage selects the database.
type Storage struct {
	Driver Driver `toml:"driver"`
	DSN    string `toml:"dsn"`
	// Retention is how long turns and audit rows are kept; 0 keeps them for ever.
	Retention time.Duration `toml:"retention_days"`
}

// Model is one LLM candidate; the first is primary, the rest are fallbacks in order. Its
// endpoint (name, base_url, api_key, model, timeout_sec) is the provider's noun, as the runner
// takes it.
type Model struct {
	provider.Endpoint
	SupportsTools  bool `toml:"supports_tools"`
	SupportsVision bool `toml:"supports_vision"`
	// ContextWindow is the tokens the model reads at most; MaxOutputTokens the room kept for its
	// answer. Left out: KnownBudget of the model id.
	ContextWindow   int `toml:"context_window"`
	MaxOutputTokens int `toml:"max_output_tokens"`
	// PriceIn and PriceOut are what a million prompt and completion tokens cost (in any one
	// currency, the same for every model); 0 counts the model as free.
	PriceIn  float64 `toml:"price_in"`
	PriceOut float64 `toml:"price_out"`
	// PriceCachedIn is what a million prompt tokens the provider served from its prompt cache
	// cost, PriceCacheWrite what a million it wrote to the cache cost (Anthropic's cache
	// writes); left out, PriceIn.
	PriceCachedIn   float64 `toml:"price_cached_in"`
	PriceCacheWrite float64 `toml:"price_cache_write"`
	// Cache is how requests help the provider's prompt cache: "auto" (nothing extra: the
	// provider caches prefixes by itself), "anthropic" (cache_control breakpoints) or "off".
	Cache Cache `toml:"cache"`
}

// Agent tunes the agent runner.
type Agent struct {
	SystemPrompt       string `toml:"system_prompt"`
	MaxToolRounds      int    `toml:"max_tool_rounds"`
	StreamFlushChunks  int    `toml:"stream_flush_chunks"`
	RemoveThink        bool   `toml:"remove_think"`
	HistoryRounds      int    `toml:"history_rounds"`
	ToolResultMaxChars int    `toml:"tool_result_max_chars"`
	// CompactAt is the share of the history's room past which older rounds are summarised
	// (0 < x <= 1); ToolResultShare the share older tool results may fill before they are elided.
	CompactAt       float64 `toml:"compact_at"`
	ToolResultShare float64 `toml:"tool_result_share"`
}

// Output decides what users see.
type Output struct {
	TrackFunctionCalls bool              `toml:"track_function_calls"`
	ExceptionHandling  ExceptionHandling `toml:"exception_handling"`
	FailureHint        string            `toml:"failure_hint"`
	// Reasoning is how the model's reasoning is shown: "collapsed" (default), "hidden" or
	// "inline". agent.remove_think = true removes it before it could be shown.
	Reasoning Reasoning `toml:"reasoning"`
}

// Chat holds the conversation rules of the pipeline.
type Chat struct {
	Scope            Scope         `toml:"scope"`
	Busy             Busy          `toml:"busy"`
	QueueSize        int           `toml:"queue_size"`
	MaxTurnsInFlight int           `toml:"max_turns_in_flight"`
	TurnWait         time.Duration `toml:"turn_wait_sec"`
	RateLimitPerMin  int           `toml:"rate_limit_per_minute"`
	ShutdownGrace    time.Duration `toml:"shutdown_grace_sec"`
	TriggerPrefix    string        `toml:"trigger_prefix"`
	MaxImageBytes    int           `toml:"max_image_bytes"`
	TurnTimeout      time.Duration `toml:"turn_timeout_sec"`
	// HelpText answers /help; empty (the default) lists the bot's commands, from the same
	// table as Discord's slash commands and Telegram's command menu.
	HelpText          string `toml:"help_text"`
	BusyText          string `toml:"busy_text"`
	RateLimitedText   string `toml:"rate_limited_text"`
	InterruptedMarker string `toml:"stopped_marker"`
	// IdleReset starts a fresh conversation after this long without messages; 0: never.
	IdleReset time.Duration `toml:"idle_reset_minutes"`
	// SelectableModels are the [[models]] names /model may pick; empty: all.
	SelectableModels []string `toml:"selectable_models"`
}

// Access lists who may talk to the bot. IDs are "platform:id" ("telegram:12345") or "*:id".
type Access struct {
	AllowUsers []string `toml:"allow_users"`
	DenyUsers  []string `toml:"deny_users"`
	AllowChats []string `toml:"allow_chats"`
	DenyChats  []string `toml:"deny_chats"`
	Admins     []string `toml:"admins"`
}

// UsersOn returns the user ids that allow_users and admins list for platform ("discord:123"
// or "*:123", the platform in any case), for the adapters' private-chat rules.
func (a Access) UsersOn(platform string) []string {
	var ids []string
	for _, e := range append(slices.Clone(a.AllowUsers), a.Admins...) {
		p, id, ok := strings.Cut(e, ":")
		p, id = strings.ToLower(strings.TrimSpace(p)), strings.TrimSpace(id)
		if ok && id != "" && (p == "*" || p == strings.ToLower(platform)) && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// Tools configures the tool loaders.
type Tools struct {
	// Allow, when not empty, is the list of tool names offered in every chat.
	Allow []string `toml:"allow"`
	// PerChat maps "platform:chat_id" to the tools offered there, replacing Allow.
	PerChat map[string][]string `toml:"per_chat"`
	// Plugins enables compiled-in plugins by name.
	Plugins []string `toml:"plugins"`
	// SkillDirs are folders holding one skill per subfolder (SKILL.md).
	SkillDirs []string `toml:"skill_dirs"`
	// FetchAllowPrivate lets fetch_url reach loopback, private and link-local addresses.
	FetchAllowPrivate bool `toml:"fetch_allow_private"`
	// Native enables built-in tools by name; empty means all.
	Native []string `toml:"native"`
	// Policy are the [[tools.policy]] rules: allow, ask or deny a tool for roles and chats.
	Policy []policy.Rule `toml:"policy"`
	// ApprovalTimeout is how long an "ask" call waits for an answer before it is denied.
	ApprovalTimeout time.Duration `toml:"approval_timeout_sec"`
	// ElicitationTimeout is how long a tool's question (MCP elicitation) waits for an answer
	// before the server is told cancel.
	ElicitationTimeout time.Duration `toml:"elicitation_timeout_sec"`
	// Parallel is "read_only" (a round whose calls are all safe runs them side by side) or "off".
	Parallel ParallelMode `toml:"parallel"`
	// MaxParallel bounds the calls of a round running at once.
	MaxParallel int `toml:"max_parallel"`
	// ParallelTools are tool names (or globs) safe to run side by side whatever they declare.
	ParallelTools []string `toml:"parallel_tools"`
	// MaxFileBytes caps one file a tool returns; larger ones are left out of the reply.
	MaxFileBytes int `toml:"max_file_bytes"`
	// MaxFilesPerTurn caps the files the tools of one answer return, over all its rounds.
	MaxFilesPerTurn int `toml:"max_files_per_turn"`
	// AlwaysAllow is how long an "always allow" answer holds.
	AlwaysAllow time.Duration `toml:"always_allow_days"`
	// MaxOpenQuestions is how many approval questions of one user may wait at once.
	MaxOpenQuestions int `toml:"max_open_questions"`
	// WebSearch is [tools.web_search]: the web_search tool.
	WebSearch WebSearch `toml:"web_search"`
	// Images is [tools.images]: the generate_image tool.
	Images Images `toml:"images"`
}

// Telegram configures the Telegram adapter.
type Telegram struct {
	Enabled       bool         `toml:"enabled"`
	Token         string       `toml:"token"`
	APIEndpoint   string       `toml:"api_endpoint"`
	Mode          TelegramMode `toml:"mode"`
	WebhookListen string       `toml:"webhook_listen"`
	WebhookURL    string       `toml:"webhook_url"`
	WebhookSecret string       `toml:"webhook_secret"`
	AllowedChats  []string     `toml:"allowed_chats"`
	AllowedUsers  []string     `toml:"allowed_users"`
	Stream        bool         `toml:"stream"`
	// Drafts streams answers in private chats as Telegram drafts (sendMessageDraft), each part
	// persisted as a message: "auto" (default) or "off" (stream by edits everywhere).
	Drafts Switch `toml:"drafts"`
	// Rich sends each final answer that fits one Telegram rich message (sendRichMessage, up to
	// 32,768 characters) as one: "auto" (default) or "off" (plain messages of 4,096).
	Rich Switch `toml:"rich"`
	// OffsetFile keeps the polling offset and the messages whose turns have not finished across
	// restarts; "" means telegram.offset next to the SQLite database (data/ with Postgres),
	// "off" keeps the offset on Telegram's server only. See OffsetPath.
	OffsetFile string `toml:"offset_file"`
	// GlobalPerSecond is the bot's budget of sends and edits a second across all chats
	// (default 30, Telegram's broadcast limit); above 30 needs PaidBroadcast, at most 1,000,
	// and then budgets the sends only: edits and drafts keep the free 30.
	GlobalPerSecond int `toml:"global_per_second"`
	// PaidBroadcast sends allow_paid_broadcast with every message sent, which lifts Telegram's
	// limit for them to up to 1,000 a second for a fee in Telegram Stars per message above 30.
	// Edits and drafts take no such parameter and stay within the free 30 a second.
	PaidBroadcast bool `toml:"paid_broadcast"`
	// PrivateTopics opens a topic for each conversation in a private chat, where the bot has
	// topics enabled (Bot API: has_topics_enabled, createForumTopic): a message in the main
	// chat starts a new topic named from it, a message in a topic continues that topic.
	PrivateTopics bool `toml:"private_topics"`
}

// OffsetFileOff turns the Telegram offset file off.
const OffsetFileOff = "off"

// OffsetPath returns the offset file of the Telegram adapter: telegram.offset_file, or by
// default telegram.offset in the SQLite database's folder (data/telegram.offset with
// Postgres); "" when it is turned off.
func (c *Config) OffsetPath() string {
	switch c.Telegram.OffsetFile {
	case OffsetFileOff:
		return ""
	case "":
		if path := c.SQLitePath(); path != "" {
			return filepath.Join(filepath.Dir(path), "telegram.offset")
		}
		return filepath.Join("data", "telegram.offset")
	}
	return c.Telegram.OffsetFile
}

// SQLitePath returns the file of the SQLite database (the DSN without a "file:" prefix and
// query), or "" with another driver.
func (c *Config) SQLitePath() string {
	if c.Storage.Driver != "sqlite" {
		return ""
	}
	path := strings.TrimPrefix(c.Storage.DSN, "file:")
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	return path
}

// Discord configures the Discord adapter.
type Discord struct {
	Enabled         bool     `toml:"enabled"`
	Token           string   `toml:"token"`
	APIBase         string   `toml:"api_base"`
	AllowedGuilds   []string `toml:"allowed_guilds"`
	AllowedChannels []string `toml:"allowed_channels"`
	AllowedRoles    []string `toml:"allowed_roles"`
	// AllowDMs answers direct messages (default true); with any allowed_* list set, only from
	// members who pass the lists in an allowed guild, or users listed in [access].
	AllowDMs         bool `toml:"allow_dms"`
	RegisterCommands bool `toml:"register_commands"`
	// ComponentsV2 sends replies as Components V2 messages (a container with a text display of
	// up to 4,000 characters and the Stop button); MaxLines splits them at that many lines too.
	ComponentsV2 bool `toml:"components_v2"`
	MaxLines     int  `toml:"max_lines"`
	// GlobalPerSecond is the bot's budget of REST requests a second (default 50, Discord's
	// global limit; large bots are granted more by Discord).
	GlobalPerSecond int `toml:"global_per_second"`
	// ShardsRaw is discord.shards as written: "auto" (default) or a positive number. Shards is
	// the checked count, 0 for "auto" (the count Discord recommends in GET /gateway/bot).
	ShardsRaw any `toml:"shards"`
	Shards    int `toml:"-"`
	// Threads is "auto" (a message that starts a conversation in a channel opens a thread on
	// it, where the answer and the rest of the conversation go) or "off" (the default:
	// answers in the channel).
	Threads ThreadMode `toml:"threads"`
	// ThreadChannels are the channels whose conversations get threads with threads = "auto";
	// empty means every channel the bot answers in.
	ThreadChannels []string `toml:"thread_channels"`
	// AutoArchive is the minutes of inactivity after which Discord archives a thread the bot
	// opened: 60, 1440, 4320 or 10080.
	AutoArchive int `toml:"auto_archive"`
}

// DiscordAutoArchive lists the thread archive durations Discord takes, in minutes (an hour, a
// day, three days, a week): discord.auto_archive's values.
var DiscordAutoArchive = []int{60, 1440, 4320, 10080}

// MaxDiscordShards bounds discord.shards: far more than any bot needs (Discord recommends one
// shard per 1,000 guilds), small enough that a typo is caught.
const MaxDiscordShards = 10000

// ParseDiscordShards reads a discord.shards value: "auto" is 0, a positive whole number (or its
// digits as a string, as ${ENV} expansion gives) is that count.
func ParseDiscordShards(v any) (int, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case int64:
		if x < 1 || x > MaxDiscordShards {
			return 0, fmt.Errorf("must be \"auto\" or between 1 and %d, got %d", MaxDiscordShards, x)
		}
		return int(x), nil
	case string:
		s := strings.TrimSpace(x)
		if s == "auto" || s == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("must be \"auto\" or a positive whole number, got %q", x)
		}
		return ParseDiscordShards(n)
	}
	return 0, fmt.Errorf("must be \"auto\" or a positive whole number, got %v", v)
}

// MCP lists the MCP servers to connect to.
type MCP struct {
	Servers []MCPServer `toml:"servers"`
}

// MCPServer is one MCP server.
type MCPServer struct {
	Name           string            `toml:"name"`
	Transport      Transport         `toml:"transport"`
	Command        string            `toml:"command"`
	Args           []string          `toml:"args"`
	Env            map[string]string `toml:"env"`
	URL            string            `toml:"url"`
	Headers        map[string]string `toml:"headers"`
	ConnectTimeout time.Duration     `toml:"connect_timeout_sec"`
	// ToolCallTimeoutRaw is the value as written; ToolCallTimeout is the checked duration
	// (0 means no deadline).
	ToolCallTimeoutRaw any           `toml:"tool_call_timeout_sec"`
	ToolCallTimeout    time.Duration `toml:"-"`
	// TaskTimeout bounds a call that runs as an MCP task (a tool the server runs as a task),
	// instead of the call timeout; absent: DefaultMCPTaskTimeout.
	TaskTimeout time.Duration `toml:"task_timeout_sec"`
	// ReadResource offers the model the server's read_resource tool (a resource by URI).
	ReadResource bool `toml:"read_resource"`
	// AttachResources are resource URIs of the server put into every turn of AttachChats (chat
	// references as in [access]) as data.
	AttachResources []string `toml:"attach_resources"`
	AttachChats     []string `toml:"attach_chats"`
	// Prompts offers the server's prompts as /prompt NAME args in every chat.
	Prompts bool `toml:"prompts"`
	// ToolPrefix names the server's tools for the model: "web_" offers "search" as
	// "web_search"; "{server}" in it stands for the server's name ("{server}__").
	ToolPrefix string `toml:"tool_prefix"`
	// Parallel lets the server's tools run side by side with other safe calls of a round
	// whatever they declare (readOnlyHint).
	Parallel bool `toml:"parallel"`
	// Auth is "none" (default: headers only) or "oauth" (sse and http: an admin connects the
	// server on the admin page's Servers page).
	Auth MCPAuth `toml:"auth"`
	// ClientID and ClientSecret (auth = "oauth") are a client registered by hand at the
	// authorization server, used instead of dynamic client registration.
	ClientID     string `toml:"client_id"`
	ClientSecret string `toml:"client_secret"`
	// Scopes (auth = "oauth") are asked for; empty: those the server asks for.
	Scopes []string `toml:"scopes"`
	// Local says the admin runs this (sse, http) server inside: it may be on loopback, a
	// private network or link-local, and its OAuth metadata may use plain http. Without it
	// the bot refuses such addresses, as fetch_url does.
	Local bool `toml:"local"`
	// MaxMessageBytes bounds one message the server sends (a stdio line, an SSE event, a JSON
	// body); absent: DefaultMCPMaxMessageBytes.
	MaxMessageBytes int `toml:"max_message_bytes"`
}

// ToolName returns the name the model sees for the server's tool name.
func (s MCPServer) ToolName(name string) string {
	return strings.ReplaceAll(s.ToolPrefix, "{server}", s.Name) + name
}

// Admin configures the admin listener (web page, JSON API, web chat, metrics).
type Admin struct {
	Enabled bool   `toml:"enabled"`
	Listen  string `toml:"listen"`
	Token   string `toml:"token"`
	WebChat bool   `toml:"web_chat"`
	// PublicURL is the address browsers use ("https://bot.example.com") when a proxy in front
	// terminates TLS; an https URL makes the session and chat cookies Secure.
	PublicURL string `toml:"public_url"`
	// TrustedProxies are the reverse proxies (IP addresses or CIDR prefixes) whose
	// X-Forwarded-For and X-Forwarded-Proto headers the admin listener believes.
	TrustedProxies []string `toml:"trusted_proxies"`
}

// OTel configures OpenTelemetry traces of turns (OTLP over HTTP/protobuf). The standard OTEL_*
// environment variables (endpoint, headers, sampler, service name, resource) are honoured too.
type OTel struct {
	// Enabled exports traces; they are also on whenever OTEL_EXPORTER_OTLP_ENDPOINT (or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, unless OTEL_SDK_DISABLED=true.
	Enabled bool `toml:"enabled"`
	// Endpoint is the collector's OTLP/HTTP URL ("http://collector:4318"); empty: the
	// environment's, else http://localhost:4318.
	Endpoint string `toml:"endpoint"`
	// CaptureContent puts message texts and tool arguments and results (redacted as in the
	// audit log) on the spans.
	CaptureContent bool `toml:"capture_content"`
	// TraceURL links the admin page's turns and tool calls to a tracing UI: {trace_id} is
	// replaced by the trace id ("https://tempo.example/trace/{trace_id}").
	TraceURL string `toml:"trace_url"`
}

// Quotas caps what each user and each chat may spend on the models.
type Quotas struct {
	User      policy.Limits     `toml:"user"`
	Chat      policy.Limits     `toml:"chat"`
	Overrides []policy.Override `toml:"overrides"`
	// AdminsCounted holds bot admins to the quotas too (default: admins are exempt).
	AdminsCounted bool `toml:"admins_counted"`
}

// Log configures logging.
type Log struct {
	Level  LogLevel  `toml:"level"`
	Format LogFormat `toml:"format"`
}

// day is the unit of the *_days keys.
const day = 24 * time.Hour

// defaultModelTimeout bounds a model call whose entry sets no timeout_sec.
const defaultModelTimeout = 2 * time.Minute

// DefaultMCPMaxMessageBytes is used when max_message_bytes is absent.
const DefaultMCPMaxMessageBytes = 16 << 20

// DefaultMCPTaskTimeout is used when task_timeout_sec is absent.
const DefaultMCPTaskTimeout = time.Hour

// DefaultMCPToolCallTimeout is used when tool_call_timeout_sec is absent or invalid.
const DefaultMCPToolCallTimeout = 300 * time.Second

// Default returns the configuration used for every key a file leaves out.
func Default() Config {
	return Config{
		Storage: Storage{Driver: DriverSQLite, DSN: "data/bot.db", Retention: 30 * day},
		Tasks:   Tasks{Enabled: true, MaxPerUser: 20, MinEvery: Span(5 * time.Minute), MisfireGrace: Span(time.Hour), DefaultTimezone: "UTC"},
		Agent: Agent{
			SystemPrompt:       "You are a helpful assistant in a chat. Answer concisely.",
			MaxToolRounds:      128,
			StreamFlushChunks:  8,
			HistoryRounds:      100,
			ToolResultMaxChars: 20000,
			CompactAt:          0.75,
			ToolResultShare:    0.25,
		},
		Output: Output{ExceptionHandling: ShowHint, FailureHint: "Request failed.", Reasoning: ReasoningCollapsed},
		Chat: Chat{
			Scope:             ScopeChat,
			Busy:              BusyQueue,
			QueueSize:         8,
			MaxTurnsInFlight:  64,
			TurnWait:          time.Minute,
			RateLimitPerMin:   60,
			ShutdownGrace:     30 * time.Second,
			MaxImageBytes:     5 << 20,
			TurnTimeout:       15 * time.Minute,
			BusyText:          "I am still busy with earlier messages in this chat; please try again in a moment.",
			RateLimitedText:   "You are sending messages too fast; please wait a minute.",
			InterruptedMarker: "[stopped]",
		},
		Tools: Tools{Plugins: []string{"audit_query"}, ApprovalTimeout: 5 * time.Minute, MaxFileBytes: 10 << 20, MaxFilesPerTurn: 10,
			ElicitationTimeout: 5 * time.Minute, Parallel: ParallelReadOnly, MaxParallel: 4,
			AlwaysAllow: 30 * day, MaxOpenQuestions: 3, WebSearch: defaultWebSearch(), Images: defaultImages()},
		Telegram:  Telegram{APIEndpoint: "https://api.telegram.org/bot%s/%s", Mode: ModePolling, Stream: true, Drafts: Auto, Rich: Auto, GlobalPerSecond: 30},
		Discord:   Discord{APIBase: "https://discord.com/api/v10", RegisterCommands: true, AllowDMs: true, MaxLines: 17, GlobalPerSecond: 50, ShardsRaw: "auto", Threads: ThreadsOff, AutoArchive: 1440},
		Admin:     Admin{Enabled: true, Listen: "127.0.0.1:8080", WebChat: true},
		Log:       Log{Level: "info", Format: "text"},
		Media:     defaultMedia(),
		Speech:    defaultSpeech(),
		Memory:    defaultMemory(),
		Knowledge: defaultKnowledge(),
	}
}

// Path picks the config file: the flag value, then $BOT_CONFIG, then ./config.toml.
func Path(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if p := os.Getenv("BOT_CONFIG"); p != "" {
		return p
	}
	return "config.toml"
}

// Load reads, expands and validates the file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg, err := Parse(data, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	cfg.File = path
	return cfg, nil
}

// Parse decodes TOML text, expands ${ENV} references with lookup and validates the result.
func Parse(data []byte, lookup func(string) (string, bool)) (*Config, error) {
	cfg := Default()
	md, err := toml.Decode(string(data), &cfg)
	if err != nil {
		var perr toml.ParseError
		switch {
		case errors.As(err, &perr) && perr.LastKey != "" && strings.HasPrefix(perr.Message, enumReason):
			// A value an enum type refused (parseEnum): named by its key, like validate's errors.
			return nil, fmt.Errorf("%s: %s", entryKey(data, perr.LastKey, perr.Position.Line), perr.Message)
		case errors.As(err, &perr) && perr.LastKey != "" && strings.HasPrefix(perr.Message, "invalid duration"):
			return nil, durationError(entryKey(data, perr.LastKey, perr.Position.Line), strings.TrimPrefix(perr.Message, "invalid duration: "))
		case errors.As(err, &perr):
			return nil, fmt.Errorf("line %d: %s", perr.Position.Line, perr.Message)
		}
		return nil, err
	}
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return nil, err
	}
	scaleDurations(reflect.ValueOf(&cfg).Elem(), raw)
	if und := md.Undecoded(); len(und) > 0 {
		return nil, unknownKeys(und)
	}
	seen := envSeen{missing: map[string][]string{}, set: map[string][]string{}}
	var refused []error
	expandEnv(reflect.ValueOf(&cfg).Elem(), "", lookup, seen, &refused)
	if len(refused) > 0 {
		return nil, errors.Join(refused...)
	}
	if err := cfg.fillEntryDefaults(md); err != nil {
		return nil, err
	}
	cfg.sources = sourcesOf(md, seen.set)
	if err := cfg.validate(seen.missing); err != nil {
		return nil, err
	}
	if err := cfg.loadSecretKey(lookup); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// entryKey names a key the decoder reports without the index of its [[table]] entry
// ("mcp.servers.transport") with the index of the entry that holds line ("mcp.servers[1].transport"):
// the entry is the last [[table]] header above the line.
func entryKey(data []byte, key string, line int) string {
	lines := strings.Split(string(data), "\n")
	lines = lines[:min(max(line-1, 0), len(lines))]
	parts := strings.Split(key, ".")
	for n := len(parts) - 1; n >= 1; n-- {
		table := strings.Join(parts[:n], ".")
		entries := 0
		for _, l := range lines {
			if h, ok := strings.CutPrefix(strings.TrimSpace(l), "[["); ok && strings.HasPrefix(h, table+"]]") {
				entries++
			}
		}
		if entries > 0 {
			return fmt.Sprintf("%s[%d].%s", table, entries-1, strings.Join(parts[n:], "."))
		}
	}
	return key
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// envSeen are the variables ${NAME} references read, by key: those not set, and those set.
type envSeen struct{ missing, set map[string][]string }

// expandEnv replaces ${NAME} and ${NAME:-default} in every string reachable from v, recording
// under the key path the variables that were not set and those that were. An expanded value of an enum type is
// checked by its UnmarshalText, which decoding could not do; what it refuses goes to refused.
func expandEnv(v reflect.Value, key string, lookup func(string) (string, bool), seen envSeen, refused *[]error) {
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		if !strings.Contains(s, "${") {
			return
		}
		v.SetString(envRef.ReplaceAllStringFunc(s, func(ref string) string {
			m := envRef.FindStringSubmatch(ref)
			if val, ok := lookup(m[1]); ok && val != "" {
				seen.set[key] = append(seen.set[key], m[1])
				return val
			}
			if m[2] != "" {
				return m[3]
			}
			seen.missing[key] = append(seen.missing[key], m[1])
			return ""
		}))
		if !v.CanAddr() {
			return
		}
		if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
			if err := u.UnmarshalText([]byte(v.String())); err != nil {
				*refused = append(*refused, fmt.Errorf("%s: %w", key, err))
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < v.NumField(); i++ {
			f := t.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				// An embedded struct's keys stand in the table itself ([speech]).
				expandEnv(v.Field(i), key, lookup, seen, refused)
				continue
			}
			name := f.Tag.Get("toml")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			expandEnv(v.Field(i), join(key, name), lookup, seen, refused)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			expandEnv(v.Index(i), fmt.Sprintf("%s[%d]", key, i), lookup, seen, refused)
		}
	case reflect.Map:
		if v.Type().Elem().Kind() != reflect.String {
			return
		}
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			expandEnv(e, join(key, fmt.Sprint(k.Interface())), lookup, seen, refused)
			v.SetMapIndex(k, e)
		}
	case reflect.Interface:
		if s, ok := v.Interface().(string); ok {
			e := reflect.New(reflect.TypeOf("")).Elem()
			e.SetString(s)
			expandEnv(e, key, lookup, seen, refused)
			v.Set(e)
		}
	}
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// fillEntryDefaults applies defaults inside array entries ([[models]], [[mcp.servers]]), whose
// zero values TOML cannot tell from "left out".
func (c *Config) fillEntryDefaults(md toml.MetaData) error {
	keys := md.Keys()
	modelHas := func(i int, name string) bool { return hasEntryKey(keys, "models", i, name) }
	for i := range c.Models {
		m := &c.Models[i]
		if !modelHas(i, "supports_tools") {
			m.SupportsTools = true
		}
		if m.Timeout == 0 && !modelHas(i, "timeout_sec") {
			m.Timeout = defaultModelTimeout
		}
		if m.Name == "" {
			m.Name = m.Model
		}
		if !modelHas(i, "price_cached_in") {
			m.PriceCachedIn = m.PriceIn
		}
		if !modelHas(i, "price_cache_write") {
			m.PriceCacheWrite = m.PriceIn
		}
		if m.Cache == "" {
			m.Cache = CacheAuto
		}
		known := KnownBudget(m.Model)
		if m.ContextWindow == 0 {
			m.ContextWindow = known.ContextWindow
		}
		if m.MaxOutputTokens == 0 {
			m.MaxOutputTokens = min(known.MaxOutputTokens, m.ContextWindow/4)
		}
	}
	c.fillSpeechDefaults()
	c.fillEmbeddingDefaults()
	c.fillKnowledgeDefaults()
	for i := range c.MCP.Servers {
		s := &c.MCP.Servers[i]
		key := fmt.Sprintf("mcp.servers[%d]", i)
		if s.ConnectTimeout == 0 {
			s.ConnectTimeout = 30 * time.Second
		}
		if s.TaskTimeout == 0 {
			s.TaskTimeout = DefaultMCPTaskTimeout
		}
		if s.MaxMessageBytes == 0 {
			s.MaxMessageBytes = DefaultMCPMaxMessageBytes
		}
		if s.Auth == "" {
			s.Auth = AuthNone
		}
		d, warn := ParseToolCallTimeout(s.ToolCallTimeoutRaw)
		s.ToolCallTimeout = d
		if warn != "" {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s.tool_call_timeout_sec: %s; using %d", key, warn, int(DefaultMCPToolCallTimeout.Seconds())))
		}
	}
	return nil
}

// hasEntryKey reports whether the file set key name in entry i of the array of tables at table.
// BurntSushi/toml's MetaData keys do not carry the entry index, so entries are counted by the
// position of their own key in the order keys were defined.
func hasEntryKey(keys []toml.Key, table string, i int, name string) bool {
	entry := -1
	for _, k := range keys {
		if len(k) == 1 && k[0] == table {
			entry++
			continue
		}
		if entry == i && len(k) == 2 && k[0] == table && k[1] == name {
			return true
		}
	}
	return false
}

// ParseToolCallTimeout turns a tool_call_timeout_sec value into a duration. Absent means the
// default; 0 means no deadline; a negative, non-numeric, non-finite or absurd value means the
// default and a warning that says why.
func ParseToolCallTimeout(v any) (time.Duration, string) {
	var secs float64
	switch x := v.(type) {
	case nil:
		return DefaultMCPToolCallTimeout, ""
	case int64:
		secs = float64(x)
	case float64:
		secs = x
	default:
		return DefaultMCPToolCallTimeout, fmt.Sprintf("must be a number of seconds, got %v", v)
	}
	switch {
	case math.IsNaN(secs) || math.IsInf(secs, 0):
		return DefaultMCPToolCallTimeout, fmt.Sprintf("must be finite, got %v", secs)
	case secs < 0:
		return DefaultMCPToolCallTimeout, fmt.Sprintf("must not be negative, got %v", secs)
	case secs > 7*24*3600:
		return DefaultMCPToolCallTimeout, fmt.Sprintf("must be at most a week (604800), got %v", secs)
	}
	return time.Duration(secs * float64(time.Second)), ""
}

// LogValue keeps secrets out of logs when a Config is logged.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("storage.driver", string(c.Storage.Driver)),
		slog.Int("models", len(c.Models)),
		slog.Bool("telegram", c.Telegram.Enabled),
		slog.Bool("discord", c.Discord.Enabled),
		slog.Int("mcp.servers", len(c.MCP.Servers)),
		slog.String("admin.listen", c.Admin.Listen),
	)
}
