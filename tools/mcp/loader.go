// Package mcp is the MCP tool loader: one mcp-go client per configured MCP server (stdio, legacy
// SSE or streamable HTTP). Servers connect in the background and never stop the bot; a server
// that fails is retried with backoff, a crashed stdio server is restarted, a server that ends its
// session is reconnected once and the call retried once, and every call has the server's deadline.
package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"relaybot/audit"
	"relaybot/tools"
)

// Transports a ServerConfig may name.
const (
	TransportStdio = "stdio"
	TransportSSE   = "sse"
	TransportHTTP  = "http"
)

// Defaults used when a ServerConfig or an Option leaves a value at zero.
const (
	DefaultConnectTimeout = 30 * time.Second
	DefaultBackoffBase    = 2 * time.Second
	DefaultBackoffMax     = 60 * time.Second
	DefaultReconnectWait  = 30 * time.Second
	// DefaultToolCallTimeout replaces a negative ToolCallTimeout.
	DefaultToolCallTimeout = 300 * time.Second
)

// ServerConfig is one MCP server.
type ServerConfig struct {
	// Name identifies the server in tool specs, errors, logs and the audit log.
	Name string
	// Transport is "stdio", "sse" or "http" (streamable HTTP; a server that answers the
	// handshake with 400, 404 or 405 is retried over SSE).
	Transport string
	// Command, Args and Env start a stdio server. The process gets PATH, HOME and a few other
	// harmless variables of the bot's environment plus Env, never the rest of it (the bot's
	// tokens stay out of third-party servers).
	Command string
	Args    []string
	Env     map[string]string
	// URL and Headers reach a remote (sse, http) server.
	URL     string
	Headers map[string]string
	// Auth, when set, authorizes every request to a remote server (auth = "oauth").
	Auth Authorizer
	// ConnectTimeout bounds connect, initialize and the first tool listing; 0 means
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// ToolCallTimeout bounds each tool call; 0 means no deadline, a negative value
	// DefaultToolCallTimeout (with a warning).
	ToolCallTimeout time.Duration
	// TaskTimeout bounds a task-augmented call (a tool that runs as an MCP task), instead of
	// ToolCallTimeout; 0 means DefaultTaskTimeout.
	TaskTimeout time.Duration
	// ToolPrefix goes before every tool name of the server as the model and the audit log see
	// it ("web_" offers "search" as "web_search"); "{server}" in it stands for Name. The
	// server is always called with its own name. Empty: the server's names as they are.
	ToolPrefix string
	// Parallel lets calls to the server's tools run side by side with the other safe calls of
	// their round, whatever the tools declare (readOnlyHint).
	Parallel bool
	// ReadResource offers the model the server's read_resource tool (named with ToolPrefix):
	// one of the server's resources by URI, audited and judged like any tool.
	ReadResource bool
	// AttachResources are resource URIs of the server put into every turn of AttachChats (chat
	// references as chat.ParseRef reads them, matched as chat rules are: a thread's chat and a
	// Discord thread's channel too; one that does not parse is left out with a warning).
	AttachResources []string
	AttachChats     []string
	// Prompts offers the server's prompts as /prompt commands.
	Prompts bool
	// MaxMessageBytes bounds one message the server sends (a stdio line, an SSE event, a JSON
	// body): a longer one fails the read (a stdio server is restarted, an HTTP answer refused)
	// instead of growing the bot's memory; 0 means DefaultMaxMessageBytes.
	MaxMessageBytes int
	// Local says the admin runs the remote server inside: its connections may reach loopback,
	// private and link-local addresses (internal/outbound); without it they are refused.
	// Redirects stay within the URL's origin either way.
	Local bool

	// dial, set by tests, replaces the transport with an in-process one.
	dial func() transport.Interface
}

// ErrUnavailable is wrapped by the error of a call to a server that is down or reconnecting;
// such calls fail at once instead of waiting out a timeout. It matches tools.ErrUnavailable.
var ErrUnavailable error = unavailableError{}

type unavailableError struct{}

func (unavailableError) Error() string { return "MCP server unavailable" }

// Is makes errors.Is(err, tools.ErrUnavailable) true: the audit records such a call as
// unavailable.
func (unavailableError) Is(target error) bool { return target == tools.ErrUnavailable }

// Option tunes a Loader.
type Option func(*options)

type options struct {
	backoffBase, backoffMax time.Duration
	reconnectWait           time.Duration
	tracer                  CallTracer
	memory                  ToolMemory
	tasks                   TaskBook
	taskSweep               time.Duration
}

// CallTracer traces the tools/call requests of a Loader. StartCall is called before each
// request with the server's and the tool's name (the server's own name of it); it returns the
// context to send the request in, the fields to put in the request's params._meta (the W3C
// trace context: traceparent, tracestate), and end, to call with the request's error (nil on
// success) once it is answered. It must not block.
type CallTracer interface {
	StartCall(ctx context.Context, server, tool string) (_ context.Context, meta map[string]any, end func(error))
}

// WithCallTracer traces every tools/call request with t.
func WithCallTracer(t CallTracer) Option {
	return func(o *options) { o.tracer = t }
}

// WithBackoff sets the delays between connection attempts of a failed server: base, then
// doubling up to max (2 s and 60 s by default).
func WithBackoff(base, max time.Duration) Option {
	return func(o *options) {
		if base > 0 {
			o.backoffBase = base
		}
		if max > 0 {
			o.backoffMax = max
		}
	}
}

// WithReconnectWait sets how long callers wait for a shared reconnect after a server ended its
// session (30 s by default).
func WithReconnectWait(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.reconnectWait = d
		}
	}
}

// Loader offers the tools of the configured MCP servers. It implements tools.Loader and is safe
// for concurrent use.
type Loader struct {
	servers []*serverConn
	logger  *slog.Logger
	opts    options

	mu      sync.Mutex
	started bool
	closed  bool
	warned  map[string]bool // tool name collisions already logged
}

var _ tools.Loader = (*Loader)(nil)

// NewLoader returns a Loader for servers; nothing connects before Start. A nil logger means
// slog.Default().
func NewLoader(servers []ServerConfig, logger *slog.Logger, opts ...Option) *Loader {
	if logger == nil {
		logger = slog.Default()
	}
	o := options{backoffBase: DefaultBackoffBase, backoffMax: DefaultBackoffMax, reconnectWait: DefaultReconnectWait, taskSweep: leftTaskSweep}
	for _, opt := range opts {
		opt(&o)
	}
	return newLoader(servers, logger, o, nil)
}

// newLoader returns a Loader for servers, holding kept's server of a name instead of a new one
// (Next).
func newLoader(servers []ServerConfig, logger *slog.Logger, o options, kept map[string]*serverConn) *Loader {
	l := &Loader{logger: logger, opts: o, warned: map[string]bool{}}
	names := map[string]bool{}
	for _, cfg := range servers {
		if s := kept[cfg.Name]; s != nil && !names[cfg.Name] && s.hold(l) {
			names[cfg.Name] = true
			l.servers = append(l.servers, s)
			continue
		}
		if cfg.ToolCallTimeout < 0 {
			logger.Warn("MCP server's tool call timeout is negative; using the default",
				"mcp_server", cfg.Name, "timeout", cfg.ToolCallTimeout, "default", DefaultToolCallTimeout)
			cfg.ToolCallTimeout = DefaultToolCallTimeout
		}
		s := newServerConn(l, cfg, o)
		if s.invalid == nil && names[cfg.Name] {
			s.invalid = fmt.Errorf("another MCP server is also named %q", cfg.Name)
		}
		names[cfg.Name] = true
		l.servers = append(l.servers, s)
	}
	return l
}

// Next returns a Loader for servers (a reload's) that holds l's connection to each server named
// in keep, whose configuration the caller found unchanged: its session, its tools and its calls
// in flight go on, shared by both Loaders until each is closed. The other servers are new and
// connect when the new Loader starts; closing l then disconnects only the servers the new
// Loader does not hold. A kept name l has no server of, or whose server l's Close already
// stopped, is connected anew.
func (l *Loader) Next(servers []ServerConfig, keep []string) *Loader {
	kept := map[string]*serverConn{}
	for _, name := range keep {
		if s := l.server(name); s != nil {
			kept[name] = s
		}
	}
	return newLoader(servers, l.logger, l.opts, kept)
}

// Start connects every server in the background and keeps them connected until ctx ends or
// Close is called. It never fails: a server that cannot connect is logged, marked down and
// retried. Calling Start again does nothing; a server held from another Loader (Next) runs on.
func (l *Loader) Start(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return
	}
	l.started = true
	for _, s := range l.servers {
		s.start(ctx)
	}
}

// WaitStarted blocks until every server has made its first connection attempt (it is up or
// down) or ctx ends, so the first turns can see the tools of servers that came up quickly.
func (l *Loader) WaitStarted(ctx context.Context) error {
	for _, s := range l.servers {
		select {
		case <-s.firstDone:
		case <-ctx.Done():
			return fmt.Errorf("waiting for MCP server %q: %w", s.cfg.Name, ctx.Err())
		}
	}
	return nil
}

// Close disconnects every server no other Loader holds (Next), stops their stdio server
// processes and waits for their goroutines to end. Calling it again does nothing.
func (l *Loader) Close() {
	l.mu.Lock()
	closed := l.closed
	l.started, l.closed = true, true // a Start after Close does nothing
	l.mu.Unlock()
	if closed {
		return
	}
	for _, s := range l.servers {
		s.release(l)
	}
}

// Source reports audit.SourceMCP.
func (l *Loader) Source() audit.Source { return audit.SourceMCP }

// Tools lists the tools of the servers that are up, in configuration order. When two servers
// offer the same name, the first server's tool is listed.
func (l *Loader) Tools(context.Context) []tools.Spec {
	var out []tools.Spec
	seen := map[string]bool{}
	for _, s := range l.servers {
		specs, up := s.toolSpecs()
		if !up {
			continue
		}
		for _, spec := range specs {
			if seen[spec.Name] {
				continue
			}
			seen[spec.Name] = true
			out = append(out, spec)
		}
	}
	return out
}

// Call runs a tool on the server that offers it: call.Server when set (the server whose tool
// the turn offered and judged, which is then the only one it may run on), else the first that
// is up. The error wraps tools.ErrNotFound when no server has the tool, tools.ErrTimeout when
// the server's tool_call_timeout passed, and ErrUnavailable when the server is down or
// reconnecting.
func (l *Loader) Call(ctx context.Context, call tools.Invocation) (tools.Result, error) {
	s := l.route(call.Name)
	if call.Server != "" {
		s = l.server(call.Server)
		if s == nil {
			return tools.Result{}, fmt.Errorf("MCP tool '%s' was offered by server '%s', which is no longer configured; it is not run elsewhere", call.Name, call.Server)
		}
		if _, known := s.offers(call.Name); !known {
			return tools.Result{}, fmt.Errorf("MCP tool '%s' was offered by server '%s', which no longer offers it; it is not run elsewhere", call.Name, call.Server)
		}
	}
	if s == nil {
		return tools.Result{}, fmt.Errorf("%w: %s (no MCP server offers it)", tools.ErrNotFound, call.Name)
	}
	args := map[string]any{}
	if len(call.Arguments) > 0 {
		if err := json.Unmarshal(call.Arguments, &args); err != nil {
			return tools.Result{}, fmt.Errorf("arguments of MCP tool '%s' are not a JSON object: %w", call.Name, err)
		}
		if args == nil {
			args = map[string]any{}
		}
	}
	return s.call(ctx, call.Name, args, call.Running)
}

// route picks the server for a tool: the first server that is up and offers it, else the first
// server that offered it last time it was up (its call then fails at once with its state).
func (l *Loader) route(name string) *serverConn {
	var fallback *serverConn
	for _, s := range l.servers {
		up, known := s.offers(name)
		if up {
			return s
		}
		if known && fallback == nil {
			fallback = s
		}
	}
	return fallback
}

// Unavailable names the server of a tool it does not list now and says why
// (tools.UnavailableTeller): a server down, reconnecting or waiting for a login that offered
// the tool when it was last up, or, for a server not up since the start (before its first
// login), one whose tools the tool memory remembers or whose tool_prefix the name carries. The reason wraps ErrUnavailable, or oauth.ErrNeedsLogin
// ("needs an admin to log in again"). A name no server can be told by is nil.
func (l *Loader) Unavailable(name string) (server string, why error) {
	for _, s := range l.servers {
		if s.mayOffer(name) {
			return s.cfg.Name, s.unavailable()
		}
	}
	return "", nil
}

// server returns the configured server called name, or nil.
func (l *Loader) server(name string) *serverConn {
	for _, s := range l.servers {
		if s.cfg.Name == name {
			return s
		}
	}
	return nil
}

// Health reports every server's state, in configuration order.
func (l *Loader) Health() []tools.ServerHealth {
	out := make([]tools.ServerHealth, 0, len(l.servers))
	for _, s := range l.servers {
		out = append(out, s.health())
	}
	return out
}

// noteCollisions logs, once per name, tools that two servers offer.
func (l *Loader) noteCollisions() {
	owner := map[string]string{}
	var found [][3]string
	for _, s := range l.servers {
		specs, up := s.toolSpecs()
		if !up {
			continue
		}
		for _, spec := range specs {
			if first, ok := owner[spec.Name]; ok {
				found = append(found, [3]string{spec.Name, first, s.cfg.Name})
				continue
			}
			owner[spec.Name] = s.cfg.Name
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range found {
		key := c[0] + "\x00" + c[2]
		if l.warned[key] {
			continue
		}
		l.warned[key] = true
		l.logger.Warn("two MCP servers offer the same tool; the later server's tool is not offered",
			"tool", c[0], "offered_by", c[1], "not_offered_by", c[2])
	}
}

// toolNamePattern is what chat-completion APIs accept as a function name.
var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// timeoutError is a tool call that ran past its server's tool_call_timeout.
type timeoutError struct {
	tool, server string
	after        time.Duration
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("MCP tool '%s' on server '%s' timed out after %s seconds",
		e.tool, e.server, strconv.FormatFloat(e.after.Seconds(), 'g', -1, 64))
}

// Unwrap makes errors.Is(err, tools.ErrTimeout) true.
func (e *timeoutError) Unwrap() error { return tools.ErrTimeout }
