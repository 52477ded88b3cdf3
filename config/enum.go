package config

import (
	"fmt"
	"slices"
	"strings"
)

// The string enums of config.toml. Each is a type with its one list of values; decoding a file
// checks the value (UnmarshalText), so the packages that take one (pipeline, the adapters'
// wiring) trust it and never check it again. A value written as an ${ENV} reference is checked
// once it is expanded.

// Driver is storage.driver: the database.
type Driver string

// The storage drivers.
const (
	DriverSQLite   Driver = "sqlite"
	DriverPostgres Driver = "postgres"
)

// Drivers lists storage.driver's values.
var Drivers = []Driver{DriverSQLite, DriverPostgres}

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Driver) UnmarshalText(b []byte) error { return parseEnum(d, b, Drivers) }

// Cache is [[models]] cache: how requests help the provider's prompt cache.
type Cache string

// The ways of helping a prompt cache.
const (
	// CacheAuto sends nothing extra: OpenAI, DeepSeek, Gemini and most hosted models cache a
	// repeated prefix by themselves (the default).
	CacheAuto Cache = "auto"
	// CacheAnthropic marks cache_control breakpoints on the stable prefix and the last history
	// block, as Anthropic's and OpenRouter's OpenAI-compatible endpoints take them.
	CacheAnthropic Cache = "anthropic"
	// CacheOff sends nothing extra either; it says the provider caches nothing.
	CacheOff Cache = "off"
)

// Caches lists [[models]] cache's values.
var Caches = []Cache{CacheAuto, CacheAnthropic, CacheOff}

// UnmarshalText implements encoding.TextUnmarshaler.
func (c *Cache) UnmarshalText(b []byte) error { return parseEnum(c, b, Caches) }

// ExceptionHandling is output.exception_handling: what a user sees of a failed turn.
type ExceptionHandling string

// The ways of showing a failure.
const (
	ShowHint  ExceptionHandling = "show-hint"  // the failure's kind and what to do (output.failure_hint when the bot itself failed)
	ShowError ExceptionHandling = "show-error" // the error itself
	Hide      ExceptionHandling = "hide"       // nothing
)

// ExceptionHandlings lists output.exception_handling's values.
var ExceptionHandlings = []ExceptionHandling{ShowHint, ShowError, Hide}

// UnmarshalText implements encoding.TextUnmarshaler.
func (e *ExceptionHandling) UnmarshalText(b []byte) error {
	return parseEnum(e, b, ExceptionHandlings)
}

// Reasoning is output.reasoning: how the model's reasoning (reasoning_content and <think>
// blocks) is shown.
type Reasoning string

// The ways of showing reasoning.
const (
	ReasoningCollapsed Reasoning = "collapsed" // folded under "Thinking" (the default)
	ReasoningHidden    Reasoning = "hidden"    // not shown at all
	ReasoningInline    Reasoning = "inline"    // shown as a quote above the answer
)

// Reasonings lists output.reasoning's values.
var Reasonings = []Reasoning{ReasoningCollapsed, ReasoningHidden, ReasoningInline}

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *Reasoning) UnmarshalText(b []byte) error { return parseEnum(r, b, Reasonings) }

// Scope is chat.scope: who shares a conversation in a group chat.
type Scope string

// The conversation scopes.
const (
	// ScopeChat: all members of a group chat (or of one forum topic or thread) share one
	// conversation.
	ScopeChat Scope = "chat"
	// ScopeUser: each member of a group chat has a conversation of their own there.
	ScopeUser Scope = "user"
)

// Scopes lists chat.scope's values.
var Scopes = []Scope{ScopeChat, ScopeUser}

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Scope) UnmarshalText(b []byte) error { return parseEnum(s, b, Scopes) }

// Busy is chat.busy: what a message does to a conversation that is answering an earlier one.
type Busy string

// The busy policies.
const (
	BusyQueue     Busy = "queue"     // it waits its turn (up to chat.queue_size wait)
	BusyInterrupt Busy = "interrupt" // it cancels the running turn and drops the waiting ones
)

// Busies lists chat.busy's values.
var Busies = []Busy{BusyQueue, BusyInterrupt}

// UnmarshalText implements encoding.TextUnmarshaler.
func (b *Busy) UnmarshalText(t []byte) error { return parseEnum(b, t, Busies) }

// TelegramMode is telegram.mode: how updates arrive.
type TelegramMode string

// The Telegram update modes.
const (
	ModePolling TelegramMode = "polling"
	ModeWebhook TelegramMode = "webhook"
)

// TelegramModes lists telegram.mode's values.
var TelegramModes = []TelegramMode{ModePolling, ModeWebhook}

// UnmarshalText implements encoding.TextUnmarshaler.
func (m *TelegramMode) UnmarshalText(b []byte) error { return parseEnum(m, b, TelegramModes) }

// Switch is a feature that is on where the platform offers it ("auto") or "off":
// telegram.drafts and telegram.rich.
type Switch string

// The switch positions.
const (
	Auto Switch = "auto"
	Off  Switch = "off"
)

// Switches lists a Switch's values.
var Switches = []Switch{Auto, Off}

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Switch) UnmarshalText(b []byte) error { return parseEnum(s, b, Switches) }

// On reports whether the feature may be used.
func (s Switch) On() bool { return s != Off }

// ThreadMode is discord.threads: whether the bot opens a thread for each conversation.
type ThreadMode string

// The thread modes.
const (
	ThreadsOff  ThreadMode = "off"  // answers in the channel (the default)
	ThreadsAuto ThreadMode = "auto" // a conversation started in a channel gets a thread of its own
)

// ThreadModes lists discord.threads' values.
var ThreadModes = []ThreadMode{ThreadsOff, ThreadsAuto}

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *ThreadMode) UnmarshalText(b []byte) error { return parseEnum(t, b, ThreadModes) }

// Transport is mcp.servers[].transport: how an MCP server is reached.
type Transport string

// The MCP transports.
const (
	TransportStdio Transport = "stdio"
	TransportSSE   Transport = "sse"
	TransportHTTP  Transport = "http"
)

// Transports lists the MCP transports.
var Transports = []Transport{TransportStdio, TransportSSE, TransportHTTP}

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *Transport) UnmarshalText(b []byte) error { return parseEnum(t, b, Transports) }

// MCPAuth is mcp.servers[].auth: how the bot authenticates to a remote MCP server.
type MCPAuth string

// The MCP server authentications.
const (
	AuthNone  MCPAuth = "none"  // headers only
	AuthOAuth MCPAuth = "oauth" // an admin connects the server on the admin page
)

// MCPAuths lists mcp.servers[].auth's values.
var MCPAuths = []MCPAuth{AuthNone, AuthOAuth}

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *MCPAuth) UnmarshalText(b []byte) error { return parseEnum(a, b, MCPAuths) }

// ParallelMode is tools.parallel: which tool rounds run their calls side by side.
type ParallelMode string

// The parallel modes.
const (
	// ParallelReadOnly: a round whose calls are all safe (read-only or configured parallel).
	ParallelReadOnly ParallelMode = "read_only"
	// ParallelOff: every round runs one call after another.
	ParallelOff ParallelMode = "off"
)

// ParallelModes lists tools.parallel's values.
var ParallelModes = []ParallelMode{ParallelReadOnly, ParallelOff}

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *ParallelMode) UnmarshalText(b []byte) error { return parseEnum(p, b, ParallelModes) }

// LogLevel is log.level.
type LogLevel string

// LogLevels lists log.level's values, most verbose first.
var LogLevels = []LogLevel{"debug", "info", "warn", "error"}

// UnmarshalText implements encoding.TextUnmarshaler.
func (l *LogLevel) UnmarshalText(b []byte) error { return parseEnum(l, b, LogLevels) }

// LogFormat is log.format.
type LogFormat string

// LogFormats lists log.format's values.
var LogFormats = []LogFormat{"text", "json"}

// UnmarshalText implements encoding.TextUnmarshaler.
func (f *LogFormat) UnmarshalText(b []byte) error { return parseEnum(f, b, LogFormats) }

// enumReason starts the reason of a value that is not one of its enum's: Parse names the key
// of such a decoding error.
const enumReason = "must be one of "

// parseEnum sets *dst to the value of b when it is one of values. A value holding an ${ENV}
// reference is taken as written: expandEnv checks it once it is expanded.
func parseEnum[T ~string](dst *T, b []byte, values []T) error {
	v := T(b)
	if !slices.Contains(values, v) && !strings.Contains(string(v), "${") {
		quoted := make([]string, len(values))
		for i, a := range values {
			quoted[i] = fmt.Sprintf("%q", a)
		}
		return fmt.Errorf("%s%s, got %q", enumReason, strings.Join(quoted, ", "), v)
	}
	*dst = v
	return nil
}
