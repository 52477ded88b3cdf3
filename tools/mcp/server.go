package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"relaybot/chat"
	"relaybot/tools"
)

// serverConn keeps one server connected: run is its lifecycle, call runs tools on it.
type serverConn struct {
	cfg     ServerConfig
	opts    options
	logger  *slog.Logger
	invalid error // a config error: the server is never connected
	redact  *redactor
	// attachChats are cfg.AttachChats parsed.
	attachChats []chat.Ref

	refresh   chan struct{} // notifications/tools/list_changed arrived
	reconnect chan struct{} // a caller found the session ended
	firstDone chan struct{} // closed after the first connection attempt
	firstOnce sync.Once

	mu           sync.Mutex
	state        tools.ServerState
	lastErr      string
	needsLogin   bool // the last failure was for want of an OAuth login
	firstLogin   bool // ... and the login wanted is the first one (oauth.ErrNeverLoggedIn)
	since        time.Time
	transport    string
	version      string // the protocol version of the current or last session
	resources    []tools.ServerResource
	templateList []tools.ServerResourceTemplate
	promptList   []tools.ServerPrompt
	specs        []tools.Spec // while up: current; while down: as last listed
	names        map[string]bool
	// remembered are the model's names of the tools the tool memory had for the server at the
	// start (ToolMemory); rememberedNow the server's own names last written there from here.
	remembered    map[string]bool
	rememberedNow []string
	sess          *session      // nil unless up
	reconnectDone chan struct{} // non-nil while callers wait for a new session

	// life is who holds the server and its run: Loaders share a server a reload kept
	// (Loader.Next), and the last one to let go stops it.
	life serverLife
}

// serverLife is the holders and the run of a server.
type serverLife struct {
	mu sync.Mutex
	// holders are the Loaders holding the server, the newest last: its tool collisions are
	// noted in the newest's list.
	holders []*Loader
	stopped bool               // the last holder let go: never started again
	cancel  context.CancelFunc // ends run; nil before start
	done    chan struct{}      // closed when run returned
}

// hold adds l to the server's holders, unless the server was stopped.
func (s *serverConn) hold(l *Loader) bool {
	s.life.mu.Lock()
	defer s.life.mu.Unlock()
	if s.life.stopped {
		return false
	}
	s.life.holders = append(s.life.holders, l)
	return true
}

// start runs the server in the background unless it runs already or was stopped.
func (s *serverConn) start(ctx context.Context) {
	s.life.mu.Lock()
	defer s.life.mu.Unlock()
	if s.life.cancel != nil || s.life.stopped {
		return
	}
	ctx, s.life.cancel = context.WithCancel(ctx)
	s.life.done = make(chan struct{})
	go func() {
		defer close(s.life.done)
		s.run(ctx)
	}()
}

// release lets l go; once no Loader holds the server it is stopped, and release waits for its
// run to return.
func (s *serverConn) release(l *Loader) {
	s.life.mu.Lock()
	s.life.holders = slices.DeleteFunc(s.life.holders, func(h *Loader) bool { return h == l })
	if len(s.life.holders) > 0 || s.life.stopped {
		s.life.mu.Unlock()
		return
	}
	s.life.stopped = true
	cancel, done := s.life.cancel, s.life.done
	s.life.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// noteCollisions notes the tool collisions among the servers of the newest Loader holding s.
func (s *serverConn) noteCollisions() {
	s.life.mu.Lock()
	var l *Loader
	if n := len(s.life.holders); n > 0 {
		l = s.life.holders[n-1]
	}
	s.life.mu.Unlock()
	if l != nil {
		l.noteCollisions()
	}
}

func newServerConn(l *Loader, cfg ServerConfig, o options) *serverConn {
	red := newRedactor(cfg.URL)
	s := &serverConn{
		cfg: cfg, opts: o, life: serverLife{holders: []*Loader{l}},
		logger:    newRedactingLogger(l.logger, red).With("mcp_server", cfg.Name),
		redact:    red,
		refresh:   make(chan struct{}, 1),
		reconnect: make(chan struct{}, 1),
		firstDone: make(chan struct{}),
		state:     tools.ServerConnecting,
		since:     time.Now(),
		transport: cfg.Transport,
	}
	s.invalid = validate(cfg)
	for _, c := range cfg.AttachChats {
		ref, err := chat.ParseRef(c)
		if err != nil {
			s.logger.Warn("MCP server's attach_chats entry left out", "chat", c, "err", err)
			continue
		}
		s.attachChats = append(s.attachChats, ref)
	}
	return s
}

func validate(cfg ServerConfig) error {
	if cfg.Name == "" {
		return errors.New("MCP server has no name")
	}
	if cfg.dial != nil {
		return nil
	}
	switch cfg.Transport {
	case TransportStdio:
		if cfg.Command == "" {
			return errors.New("stdio MCP server has no command")
		}
	case TransportSSE, TransportHTTP:
		if cfg.URL == "" {
			return fmt.Errorf("%s MCP server has no url", cfg.Transport)
		}
	default:
		return fmt.Errorf("unknown MCP transport %q (want stdio, sse or http)", cfg.Transport)
	}
	return nil
}

// session is one connection: a client, its transport and, for stdio, its process.
type session struct {
	client   *client.Client
	lost     chan struct{} // closed when the connection or process is gone
	lostOnce sync.Once
	lostErr  error
	closeFn  func()
	// tooLarge records a message the server sent over max_message_bytes (nil in process).
	tooLarge *capTrip
	// renewed is set before a session the server ended is closed: calls still in flight on it
	// are cancelled by the close and retried on the new session like the call that found out.
	renewed atomic.Bool
	// calls are the tool calls in flight, for their progress and questions.
	calls *calls
	// ext follows the calls a 2026-07-28 server makes tasks (exttask.go); nil on transports
	// that carry no such session.
	ext *extTasks
	// version is the negotiated protocol version; caps what the server said it offers.
	version string
	caps    mcpgo.ServerCapabilities
	// taskTools are the tools that take tasks, by the server's name, as last listed.
	taskMu    sync.Mutex
	taskTools map[string]mcpgo.TaskSupport
	// resources are the server's, as last listed; resourceTool says the bot's read_resource
	// tool is offered on this session.
	resources    []tools.ServerResource
	resourceTool bool
	prompts      []tools.ServerPrompt
	// moreResources says the server listed more resources than are kept; templates are its
	// resource templates as listed (for the Servers page) and compiled (for read_resource).
	moreResources bool
	templateList  []tools.ServerResourceTemplate
	templates     []uriTemplate
	// attached keeps the text of the attached resources the session subscribed to (subscribe.go).
	attached attachedCache
}

// resourceCatalog is what a session's listing found of the server's resources.
type resourceCatalog struct {
	resources     []tools.ServerResource
	moreResources bool
	templateList  []tools.ServerResourceTemplate
	templates     []uriTemplate
}

func (ss *session) setResources(c resourceCatalog, tool bool) {
	ss.taskMu.Lock()
	defer ss.taskMu.Unlock()
	ss.resources, ss.resourceTool = c.resources, tool
	ss.moreResources, ss.templateList, ss.templates = c.moreResources, c.templateList, c.templates
}

func (ss *session) listedTemplates() []tools.ServerResourceTemplate {
	ss.taskMu.Lock()
	defer ss.taskMu.Unlock()
	return ss.templateList
}

func (ss *session) setPrompts(listed []tools.ServerPrompt) {
	ss.taskMu.Lock()
	defer ss.taskMu.Unlock()
	ss.prompts = listed
}

func (ss *session) listedPrompts() []tools.ServerPrompt {
	ss.taskMu.Lock()
	defer ss.taskMu.Unlock()
	return ss.prompts
}

func (ss *session) listed() ([]tools.ServerResource, bool) {
	ss.taskMu.Lock()
	defer ss.taskMu.Unlock()
	return ss.resources, ss.resourceTool
}

// modern reports whether the session speaks the stateless protocol (2026-07-28 and later).
func (ss *session) modern() bool { return mcpgo.IsModernProtocol(ss.version) }

func (ss *session) markLost(err error) {
	ss.lostOnce.Do(func() {
		ss.lostErr = err
		close(ss.lost)
	})
}

func (ss *session) close() { ss.closeFn() }

// sessionEnd says why serve returned.
type sessionEnd int

const (
	endClosed    sessionEnd = iota // the loader is closing
	endLost                        // the connection or process went away
	endReconnect                   // the server ended the session
)

// run connects the server and keeps it connected until ctx ends.
func (s *serverConn) run(ctx context.Context) {
	defer s.markFirstDone()
	if s.invalid != nil {
		s.logger.Error("MCP server not started: invalid configuration", "err", s.invalid)
		s.setDown(s.invalid)
		return
	}
	s.recall(ctx)
	attempt := 0
	for {
		s.setConnecting()
		sess, specs, err := s.connect(ctx)
		if ctx.Err() != nil {
			if sess != nil {
				sess.close()
			}
			s.setDown(errors.New("loader closed"))
			return
		}
		if err != nil {
			err = s.redact.err(err)
			delay := s.backoff(attempt)
			attempt++
			s.setDown(err)
			s.markFirstDone()
			s.logger.Warn("MCP server unavailable; its tools are not offered", "err", err, "retry_in", delay)
			if !sleepOrWake(ctx, delay, s.authWake()) {
				return
			}
			continue
		}
		upAt := time.Now()
		s.setUp(sess, specs)
		s.markFirstDone()
		s.remember(ctx, specs)
		s.logger.Info("MCP server connected", "transport", s.transportName(), "tools", len(specs))

		end, lostErr := s.serve(ctx, sess)
		s.detach()
		if end == endReconnect {
			sess.renewed.Store(true)
		}
		sess.close()
		switch end {
		case endClosed:
			s.setDown(errors.New("loader closed"))
			return
		case endReconnect:
			attempt = 0
			s.logger.Info("MCP server ended the session; reconnecting")
		case endLost:
			// A server that stayed up for a while starts the backoff afresh; one that dies
			// right after each start (a crash loop) keeps backing off further.
			if time.Since(upAt) >= s.opts.backoffMax {
				attempt = 0
			}
			lostErr = s.redact.err(lostErr)
			delay := s.backoff(attempt)
			attempt++
			s.setDown(lostErr)
			s.logger.Warn("MCP server connection lost; restarting", "err", lostErr, "retry_in", delay)
			if !sleepOrWake(ctx, delay, s.authWake()) {
				return
			}
		}
	}
}

// serve waits while the session is up, refreshing the tool list when the server says it changed.
// It cancels the tasks stopped processes left on the server at once and every taskSweep.
func (s *serverConn) serve(ctx context.Context, sess *session) (sessionEnd, error) {
	s.cancelLeft(ctx, sess)
	var sweep <-chan time.Time
	if s.booked() {
		t := time.NewTicker(s.opts.taskSweep)
		defer t.Stop()
		sweep = t.C
	}
	for {
		select {
		case <-sweep:
			s.cancelLeft(ctx, sess)
		case <-ctx.Done():
			return endClosed, nil
		case <-sess.lost:
			return endLost, sess.lostErr
		case <-s.reconnect:
			return endReconnect, nil
		case <-s.refresh:
			lctx, cancel := context.WithTimeout(ctx, s.connectTimeout())
			specs, err := s.catalog(lctx, sess)
			cancel()
			switch {
			case err == nil:
				s.setResources(sess)
				changed := s.setSpecs(specs)
				s.logger.Info("MCP server's tool list read again", "tools", len(specs), "changed", changed)
				s.remember(ctx, specs)
			case ctx.Err() != nil:
				return endClosed, nil
			case sessionEnded(err):
				return endReconnect, nil
			default:
				s.logger.Warn("MCP server's tool list could not be refreshed; keeping the old one", "err", s.redact.err(err))
			}
		}
	}
}

func (s *serverConn) backoff(attempt int) time.Duration {
	d := s.opts.backoffBase
	for i := 0; i < attempt && d < s.opts.backoffMax; i++ {
		d *= 2
	}
	return min(d, s.opts.backoffMax)
}

func (s *serverConn) connectTimeout() time.Duration {
	if s.cfg.ConnectTimeout > 0 {
		return s.cfg.ConnectTimeout
	}
	return DefaultConnectTimeout
}

// sleepOrWake waits d, or less when wake is ready; false when ctx ended.
func sleepOrWake(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-wake:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *serverConn) markFirstDone() { s.firstOnce.Do(func() { close(s.firstDone) }) }

// State changes. Each wakes callers waiting for a reconnect once the outcome is known.

func (s *serverConn) setConnecting() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != tools.ServerConnecting {
		s.state, s.since = tools.ServerConnecting, time.Now()
	}
}

func (s *serverConn) setUp(sess *session, specs []tools.Spec) {
	s.mu.Lock()
	s.sess = sess
	s.version = sess.version
	s.resources, _ = sess.listed()
	s.templateList = sess.listedTemplates()
	s.promptList = sess.listedPrompts()
	s.state, s.since, s.lastErr, s.needsLogin, s.firstLogin = tools.ServerUp, time.Now(), "", false, false
	s.setSpecsLocked(specs)
	s.wakeLocked()
	s.mu.Unlock()
	s.noteCollisions()
}

func (s *serverConn) setDown(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sess = nil
	if s.state != tools.ServerDown {
		s.state, s.since = tools.ServerDown, time.Now()
	}
	s.lastErr = err.Error()
	s.needsLogin = needsLogin(err)
	s.firstLogin = neverLoggedIn(err)
	s.wakeLocked()
}

// setResources keeps the resources sess listed last.
func (s *serverConn) setResources(sess *session) {
	listed, _ := sess.listed()
	templates := sess.listedTemplates()
	prompts := sess.listedPrompts()
	s.mu.Lock()
	s.resources, s.templateList, s.promptList = listed, templates, prompts
	s.mu.Unlock()
}

// setSpecs replaces the tool list and reports whether it changed.
func (s *serverConn) setSpecs(specs []tools.Spec) bool {
	s.mu.Lock()
	changed := !slices.EqualFunc(s.specs, specs, func(a, b tools.Spec) bool {
		return a.Name == b.Name && a.Description == b.Description && bytes.Equal(a.Parameters, b.Parameters)
	})
	s.setSpecsLocked(specs)
	s.mu.Unlock()
	s.noteCollisions()
	return changed
}

func (s *serverConn) setSpecsLocked(specs []tools.Spec) {
	s.specs = specs
	s.names = make(map[string]bool, len(specs))
	for _, sp := range specs {
		s.names[sp.Name] = true
	}
}

// detach takes the session out of service before it is closed, so no new call picks it up.
func (s *serverConn) detach() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sess = nil
	s.state, s.since = tools.ServerConnecting, time.Now()
	select {
	case <-s.reconnect:
	default:
	}
	select {
	case <-s.refresh:
	default:
	}
}

func (s *serverConn) wakeLocked() {
	if s.reconnectDone != nil {
		close(s.reconnectDone)
		s.reconnectDone = nil
	}
}

func (s *serverConn) setTransport(name string) {
	s.mu.Lock()
	s.transport = name
	s.mu.Unlock()
}

func (s *serverConn) transportName() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.transport
}

func (s *serverConn) toolSpecs() ([]tools.Spec, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.specs, s.state == tools.ServerUp
}

func (s *serverConn) offers(name string) (up, known bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	known = s.names[name]
	return known && s.state == tools.ServerUp, known
}

// mayOffer reports whether name is a tool of this server while it is not up: one it offered
// when last up, or, before it listed tools here, one the tool memory remembers or a name with
// its tool_prefix.
func (s *serverConn) mayOffer(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == tools.ServerUp {
		return false
	}
	return s.names[name] || s.knownWhileDownLocked(name)
}

func (s *serverConn) health() tools.ServerHealth {
	s.mu.Lock()
	defer s.mu.Unlock()
	return tools.ServerHealth{
		Name: s.cfg.Name, Transport: s.transport, ProtocolVersion: s.version, State: s.state,
		LastError: s.lastErr, Tools: len(s.specs), Since: s.since, Resources: s.resources,
		ResourceTemplates: s.templateList, Prompts: s.promptList,
	}
}

// prefix is the server's tool_prefix with {server} replaced.
func (c ServerConfig) prefix() string {
	return strings.ReplaceAll(c.ToolPrefix, "{server}", c.Name)
}

// call runs a tool (name as the model sees it), reconnecting once and retrying once when the server ended its session.
func (s *serverConn) call(ctx context.Context, name string, args map[string]any, r tools.Running) (tools.Result, error) {
	for attempt := 0; ; attempt++ {
		sess, err := s.current(ctx)
		if needsLogin(err) {
			return tools.Result{}, err
		}
		if err != nil {
			return tools.Result{}, fmt.Errorf("MCP tool '%s' not run: %w", name, err)
		}
		res, err := s.callOnce(ctx, sess, strings.TrimPrefix(name, s.cfg.prefix()), args, r)
		if err == nil {
			return convertResult(name, res)
		}
		if needsLogin(err) {
			// The transport dropped the session: the lifecycle reconnects, finds no login and
			// keeps the server down until an admin logs in.
			return tools.Result{}, &needsLoginError{server: s.cfg.Name, first: neverLoggedIn(err)}
		}
		if attempt == 0 && ctx.Err() == nil && (sessionEnded(err) || sess.renewed.Load()) {
			if rerr := s.renew(ctx, sess); rerr != nil {
				return tools.Result{}, fmt.Errorf("%w; reconnecting failed: %w", err, rerr)
			}
			continue
		}
		return tools.Result{}, err
	}
}

func (s *serverConn) callOnce(ctx context.Context, sess *session, name string, args map[string]any, r tools.Running) (_ *mcpgo.CallToolResult, err error) {
	req := mcpgo.CallToolRequest{}
	req.Params.Meta = &mcpgo.Meta{}
	if t := s.opts.tracer; t != nil {
		var meta map[string]any
		var end func(error)
		ctx, meta, end = t.StartCall(ctx, s.cfg.Name, name)
		defer func() { end(err) }()
		if len(meta) > 0 {
			req.Params.Meta.AdditionalFields = meta
		}
	}
	if _, tool := sess.listed(); tool && name == readResourceTool {
		uri, _ := args["uri"].(string)
		if uri != "" {
			if err := sess.readable(s.cfg.Name, uri); err != nil {
				return nil, fmt.Errorf("%s: %w", readResourceTool, err)
			}
		}
		return s.readResource(ctx, sess, uri)
	}
	if sess.asTask(name) {
		return s.callTask(ctx, sess, name, args, req.Params.Meta.AdditionalFields, r)
	}
	cctx, cancel := ctx, func() {}
	switch t := s.cfg.ToolCallTimeout; {
	case sess.ext.on():
		// The server may make the call a task: then the task timeout applies instead.
		cctx, cancel = s.extContext(ctx, r)
	case t > 0:
		cctx, cancel = context.WithTimeoutCause(ctx, t, fmt.Errorf("the call timeout of %s passed", t))
	}
	defer cancel()
	// Every call carries a progress token; its progress and questions reach r while it runs.
	cctx, w, unwatch := sess.calls.watch(cctx, r)
	defer unwatch()
	req.Params.Meta.ProgressToken = w.token
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := sess.client.CallTool(cctx, req)
	if err != nil {
		return nil, s.callErr(ctx, cctx, sess, name, err, s.cfg.ToolCallTimeout)
	}
	return res, nil
}

// callErr says why a call on sess failed: stopped (ctx ended), out of time (cctx, the call's own
// deadline of limit, ended), the server gone, or the server's own error.
func (s *serverConn) callErr(ctx, cctx context.Context, sess *session, name string, err error, limit time.Duration) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("MCP tool '%s' on server '%s' was cancelled: %w", name, s.cfg.Name, ctx.Err())
	case errors.As(context.Cause(cctx), new(*limitPassed)):
		var lp *limitPassed
		errors.As(context.Cause(cctx), &lp)
		return &timeoutError{tool: name, server: s.cfg.Name, after: lp.after}
	case errors.Is(cctx.Err(), context.DeadlineExceeded) || pastDeadline(cctx):
		// The SSE transport's own response timer, set to the deadline, can fire first.
		return &timeoutError{tool: name, server: s.cfg.Name, after: limit}
	case sess.tooLarge.Err() != nil:
		// The connection broke at the message (stdio, SSE) or the answer was it (HTTP).
		return fmt.Errorf("MCP tool '%s': %w", name, sess.tooLarge.Err())
	case errors.Is(err, transport.ErrTransportClosed) || isClosed(sess):
		return fmt.Errorf("MCP server '%s' went away during the call of '%s': %w: %w", s.cfg.Name, name, ErrUnavailable, s.redact.err(err))
	}
	if s.cfg.URL != "" && s.cfg.dial == nil && unreachable(err) {
		// The remote is gone (the bot holds no connection to notice it otherwise): the
		// lifecycle marks it down and reconnects with backoff.
		err = s.redact.err(err)
		sess.markLost(fmt.Errorf("tool call failed: %w", err))
		return fmt.Errorf("MCP server '%s' cannot be reached: %w: %w", s.cfg.Name, ErrUnavailable, err)
	}
	return fmt.Errorf("MCP tool '%s' on server '%s': %w", name, s.cfg.Name, s.redact.err(err))
}

// unreachable reports whether err is a network failure rather than an answer: a request that
// got no HTTP response at all (a *url.Error: refused, reset, or a kept-alive connection the
// server closed as the request went out) counts, an HTTP error status does not.
func unreachable(err error) bool {
	var op *net.OpError
	var ue *url.Error
	return errors.As(err, &op) || errors.As(err, &ue) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

func isClosed(sess *session) bool {
	select {
	case <-sess.lost:
		return true
	default:
		return false
	}
}

// current returns the session to call on. While a reconnect is under way it waits for it;
// otherwise a server that is not up fails at once.
func (s *serverConn) current(ctx context.Context) (*session, error) {
	s.mu.Lock()
	sess, done := s.sess, s.reconnectDone
	s.mu.Unlock()
	if sess != nil {
		return sess, nil
	}
	if done != nil {
		if err := s.wait(ctx, done); err != nil {
			return nil, err
		}
		s.mu.Lock()
		sess = s.sess
		s.mu.Unlock()
		if sess != nil {
			return sess, nil
		}
	}
	return nil, s.unavailable()
}

// renew gets a new session after failed reported that the server ended it. Concurrent callers
// share one reconnect and wait for it up to the reconnect wait.
func (s *serverConn) renew(ctx context.Context, failed *session) error {
	s.mu.Lock()
	if s.sess != nil && s.sess != failed {
		s.mu.Unlock()
		return nil // another caller's reconnect already finished
	}
	done := s.reconnectDone
	if done == nil {
		if s.sess == nil && s.state == tools.ServerDown {
			s.mu.Unlock()
			return s.unavailable()
		}
		done = make(chan struct{})
		s.reconnectDone = done
		if s.sess == failed {
			select {
			case s.reconnect <- struct{}{}:
			default:
			}
		}
	}
	s.mu.Unlock()
	if err := s.wait(ctx, done); err != nil {
		return err
	}
	s.mu.Lock()
	up := s.sess != nil
	s.mu.Unlock()
	if !up {
		return s.unavailable()
	}
	return nil
}

func (s *serverConn) wait(ctx context.Context, done chan struct{}) error {
	t := time.NewTimer(s.opts.reconnectWait)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("MCP server '%s' did not reconnect within %s: %w", s.cfg.Name, s.opts.reconnectWait, ErrUnavailable)
	}
}

func (s *serverConn) unavailable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.needsLogin:
		return &needsLoginError{server: s.cfg.Name, first: s.firstLogin}
	case s.state == tools.ServerDown:
		return fmt.Errorf("MCP server '%s' is down (%s): %w", s.cfg.Name, s.lastErr, ErrUnavailable)
	case s.lastErr != "":
		return fmt.Errorf("MCP server '%s' is reconnecting (last error: %s): %w", s.cfg.Name, s.lastErr, ErrUnavailable)
	default:
		return fmt.Errorf("MCP server '%s' is not connected yet: %w", s.cfg.Name, ErrUnavailable)
	}
}

// sessionEnded reports whether the transport says the server no longer knows the session: the
// streamable-HTTP transport answers 404 for the session id (ErrSessionTerminated). It never reads
// the text of an error: a tool's own error may say "session not found" about something else, and
// taking it for the end of the session would run a non-idempotent tool twice. JSON-RPC defines no
// error code for an ended session (mcp-go keeps no code beyond the standard ones), and the SSE
// transport's end shows as a lost stream, which the lifecycle reconnects.
func sessionEnded(err error) bool {
	return errors.Is(err, transport.ErrSessionTerminated)
}
