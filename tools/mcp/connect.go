package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"relaybot/internal/outbound"
	"relaybot/tools"
)

// clientVersion is what the bot tells servers it is.
const clientVersion = "1.0.0"

// forever stands in for "no deadline" where mcp-go insists on one (the SSE response wait): the
// call's context carries the real deadline.
const forever = 100 * 365 * 24 * time.Hour

// connect opens a session and lists its tools within the connect timeout. ctx bounds the
// session's life.
func (s *serverConn) connect(ctx context.Context) (*session, []tools.Spec, error) {
	cctx, cancel := context.WithTimeout(ctx, s.connectTimeout())
	defer cancel()
	switch {
	case s.cfg.dial != nil:
		return s.handshake(ctx, cctx, s.cfg.dial(), nil, false)
	case s.cfg.Transport == TransportStdio:
		return s.connectStdio(ctx, cctx)
	case s.cfg.Transport == TransportSSE:
		sess, specs, _, err := s.connectRemote(ctx, cctx, TransportSSE)
		return sess, specs, err
	}
	sess, specs, status, err := s.connectRemote(ctx, cctx, TransportHTTP)
	if err == nil {
		s.setTransport(TransportHTTP)
		return sess, specs, nil
	}
	switch status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed:
	case 0:
		return nil, nil, err
	default:
		return nil, nil, fmt.Errorf("%w (HTTP %d)", err, status)
	}
	s.logger.Info("MCP server refused streamable HTTP; trying SSE", "status", status)
	sess, specs, _, err2 := s.connectRemote(ctx, cctx, TransportSSE)
	if err2 != nil {
		return nil, nil, fmt.Errorf("streamable HTTP answered %d, then SSE failed: %w", status, err2)
	}
	s.setTransport("http→sse")
	return sess, specs, nil
}

func (s *serverConn) connectStdio(ctx, cctx context.Context) (*session, []tools.Spec, error) {
	p, err := startProcess(s.cfg)
	if err != nil {
		return nil, nil, err
	}
	tooLarge := newCapTrip()
	t := transport.NewIO(newCapReader(p.stdout, s.cfg.Name, s.cfg.MaxMessageBytes, lines, tooLarge), p.stdin, nil)
	sess, specs, err := s.handshake(ctx, cctx, t, p.stop, false)
	if err != nil {
		if cerr := tooLarge.Err(); cerr != nil {
			go p.stop()
			return nil, nil, fmt.Errorf("%w (%w)", err, cerr)
		}
		if perr := p.exitErr(); perr != nil {
			return nil, nil, fmt.Errorf("%w (%w)", err, perr)
		}
		return nil, nil, err
	}
	sess.tooLarge = tooLarge
	go func() {
		select {
		case <-p.exited:
			sess.markLost(p.exitErr())
		case <-tooLarge.tripped:
			// mcp-go stopped reading at the message: the server is restarted.
			sess.markLost(tooLarge.Err())
		case <-sess.lost:
		}
	}()
	return sess, specs, nil
}

// connectRemote connects over streamable HTTP or SSE. status is the HTTP status the handshake's
// first POST got (0 when none arrived).
func (s *serverConn) connectRemote(ctx, cctx context.Context, kind string) (*session, []tools.Spec, int, error) {
	// The legacy SSE transport is of the initialize handshake; streamable HTTP tries the newest
	// protocol first.
	return s.dialRemote(ctx, cctx, kind, kind == TransportSSE)
}

// dialRemote opens one remote session; legacy pins the initialize handshake.
func (s *serverConn) dialRemote(ctx, cctx context.Context, kind string, legacy bool) (*session, []tools.Spec, int, error) {
	// A server we do not control reaches no inner address (unless the admin says it runs
	// inside) and redirects only within its origin: the headers and the token stay with it.
	base := outbound.Transport(outbound.Options{Local: s.cfg.Local})
	rec := &statusRecorder{base: base}
	hc := &http.Client{Transport: rec, CheckRedirect: outbound.SameOrigin}
	var login *loginWatch
	if s.cfg.Auth != nil {
		login = &loginWatch{next: s.cfg.Auth.Transport(rec)}
		hc.Transport = login
	}
	if u, err := url.Parse(s.cfg.URL); err == nil {
		hc.Transport = outbound.PinOrigin(outbound.Origin(u), hc.Transport)
	}
	tooLarge := newCapTrip()
	hc.Transport = capBodies{next: hc.Transport, server: s.cfg.Name, max: s.cfg.MaxMessageBytes, trip: tooLarge}
	if kind == TransportHTTP {
		hc.Transport = streamOpened{next: hc.Transport, opened: s.relist}
	}
	logger := s.logger.With("component", "mcp-go")
	var (
		t   transport.Interface
		err error
	)
	if kind == TransportHTTP {
		t, err = transport.NewStreamableHTTP(s.cfg.URL,
			transport.WithHTTPHeaders(s.cfg.Headers),
			transport.WithHTTPBasicClient(hc),
			transport.WithContinuousListening(),
			transport.WithHTTPLogger(logger))
	} else {
		endpointWait := s.connectTimeout()
		if dl, ok := cctx.Deadline(); ok {
			endpointWait = max(time.Until(dl), time.Millisecond)
		}
		var sse *transport.SSE
		sse, err = transport.NewSSE(s.cfg.URL,
			transport.WithHeaders(s.cfg.Headers),
			transport.WithHTTPClient(hc),
			transport.WithEndpointTimeout(endpointWait),
			transport.WithResponseTimeout(forever),
			transport.WithSSELogger(logger))
		t = cancellingSSE{sse}
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("MCP server url: %w", err)
	}
	sess, specs, err := s.handshake(ctx, cctx, t, base.CloseIdleConnections, legacy)
	if err != nil {
		if cerr := tooLarge.Err(); cerr != nil {
			err = fmt.Errorf("%w (%w)", err, cerr)
		}
		return nil, nil, rec.first(), fmt.Errorf("%s: %w", kind, err)
	}
	sess.tooLarge = tooLarge
	if login != nil {
		login.watch(sess)
	}
	return sess, specs, 0, nil
}

// notified takes a notification of sess's server: a call's progress or log line goes to the
// call, an updated resource is read again, and a changed tool list (or, on 2026-07-28, a
// subscription that now stands) has the list read again.
func (s *serverConn) notified(sess *session, n mcpgo.JSONRPCNotification) {
	sess.calls.notified(n)
	if n.Method == mcpgo.MethodNotificationResourceUpdated {
		s.resourceUpdated(sess, n)
	}
	// On 2026-07-28 the list is read again once the subscription stands, so a change made
	// between the first listing and the subscription is not missed.
	if n.Method == string(mcpgo.MethodNotificationToolsListChanged) ||
		n.Method == string(mcpgo.MethodNotificationSubscriptionsAcknowledged) {
		s.relist()
	}
}

// handshake starts the client on t, negotiates the protocol and lists the tools. onClose runs
// after the client is closed. legacy pins the newest revision with the initialize handshake (the
// legacy SSE transport); otherwise mcp-go asks server/discover for the newest it speaks (2026-07-28) and falls back to
// initialize when the server does not know it.
func (s *serverConn) handshake(ctx, cctx context.Context, t transport.Interface, onClose func(), legacy bool) (*session, []tools.Spec, error) {
	sctx, scancel := context.WithCancel(ctx)
	ext := &extTasks{logger: s.logger, redact: s.redact, began: s.beginTask, ended: s.endTask}
	switch tt := t.(type) {
	case *transport.StreamableHTTP:
		t = cancellingHTTP{StreamableHTTP: tt, ext: ext}
	case *transport.Stdio:
		t = stdioTasks{Stdio: tt, ext: ext}
	}
	inflight := &calls{}
	var opts []client.ClientOption
	if legacy {
		opts = append(opts, client.WithProtocolVersion(mcpgo.LATEST_LEGACY_PROTOCOL_VERSION))
	}
	if _, ok := t.(transport.BidirectionalInterface); ok {
		// The elicitation handler makes the client declare the capability in initialize;
		// servers that never ask see nothing else of it. A transport that cannot carry the
		// server's requests (mcp-go's SSE) does not declare it, so a server does not wait for
		// an answer that cannot come.
		ext.ask = &elicitor{calls: inflight, server: s.cfg.Name}
		opts = append(opts, client.WithElicitationHandler(ext.ask))
	}
	c := client.NewClient(t, opts...)
	sess := &session{client: c, lost: make(chan struct{}), calls: inflight, ext: ext}
	ext.sess = sess
	var once sync.Once
	sess.closeFn = func() {
		once.Do(func() {
			scancel()
			_ = c.Close()
			if onClose != nil {
				onClose()
			}
			sess.markLost(errors.New("session closed"))
		})
	}
	c.OnNotification(func(n mcpgo.JSONRPCNotification) { s.notified(sess, n) })
	c.OnConnectionLost(func(err error) { sess.markLost(fmt.Errorf("connection lost: %w", err)) })
	fail := func(what string, err error) (*session, []tools.Spec, error) {
		sess.close()
		if cctx.Err() != nil && ctx.Err() == nil {
			return nil, nil, fmt.Errorf("%s: no answer within the connect timeout of %s: %w", what, s.connectTimeout(), err)
		}
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := c.Start(sctx); err != nil {
		return fail("connect", err)
	}
	init := mcpgo.InitializeRequest{}
	if legacy {
		init.Params.ProtocolVersion = mcpgo.LATEST_LEGACY_PROTOCOL_VERSION
	}
	init.Params.ClientInfo = mcpgo.Implementation{Name: "relaybot", Version: clientVersion}
	ires, err := c.Initialize(cctx, init)
	if err != nil {
		return fail("initialize", err)
	}
	sess.version = ires.ProtocolVersion
	sess.caps = ires.Capabilities
	if ires.Capabilities.Logging != nil {
		// Log messages about a call show in its status line; servers start at "error".
		if err := c.SetLevel(cctx, mcpgo.SetLevelRequest{Params: mcpgo.SetLevelParams{Level: mcpgo.LoggingLevelInfo}}); err != nil {
			s.logger.Info("MCP server refused logging/setLevel; its log messages stay at its level", "err", s.redact.err(err))
		}
	}
	specs, err := s.catalog(cctx, sess)
	if err != nil {
		return fail("list tools", err)
	}
	s.subscribeAttached(cctx, sess)
	if sess.modern() && ires.Capabilities.Tools != nil && ires.Capabilities.Tools.ListChanged {
		go s.listen(sctx, sess)
	}
	return sess, specs, nil
}

// listen opts in to the server's tool list changes on a session of the newest protocol, which
// sends no notification it was not asked for (subscriptions/listen); the stream lives as long
// as the session.
func (s *serverConn) listen(ctx context.Context, sess *session) {
	err := sess.client.Listen(ctx, mcpgo.SubscriptionFilter{ToolsListChanged: true})
	if err != nil && ctx.Err() == nil {
		s.logger.Warn("MCP server's subscriptions/listen ended; tool list changes are not seen until it reconnects",
			"err", s.redact.err(err))
	}
}

// catalog lists the server's tools, resources and enabled prompts, and adds its read_resource tool where the
// admin offers it (unless the server has a tool of that name itself). A server whose resources
// cannot be listed keeps its tools.
func (s *serverConn) catalog(ctx context.Context, sess *session) ([]tools.Spec, error) {
	specs, err := s.list(ctx, sess)
	if err != nil {
		return nil, err
	}
	listed, err := s.listResources(ctx, sess)
	if err != nil {
		s.logger.Warn("MCP server's resources could not be listed", "err", s.redact.err(err))
	}
	prompts, err := s.listPrompts(ctx, sess)
	if err != nil {
		s.logger.Warn("MCP server's prompts could not be listed", "err", s.redact.err(err))
	}
	sess.setPrompts(prompts)
	spec, ok := s.resourceSpec(sess, listed)
	if ok && slices.ContainsFunc(specs, func(sp tools.Spec) bool { return sp.Name == spec.Name }) {
		s.logger.Warn("MCP server has a tool called read_resource itself; the bot's is not offered")
		ok = false
	}
	// Set once: a call in flight during a refresh sees the old or the new state, never neither.
	sess.setResources(listed, ok)
	if !ok {
		return specs, nil
	}
	return append(specs, spec), nil
}

// list asks the server for its tools and turns them into specs. Tools whose names a model API
// would reject are left out with a warning.
func (s *serverConn) list(ctx context.Context, sess *session) ([]tools.Spec, error) {
	res, err := sess.client.ListTools(ctx, mcpgo.ListToolsRequest{})
	if err != nil {
		return nil, err
	}
	sess.noteTasks(res.Tools)
	specs := make([]tools.Spec, 0, len(res.Tools))
	seen := map[string]bool{}
	prefix := s.cfg.prefix()
	for _, t := range res.Tools {
		if !toolNamePattern.MatchString(prefix+t.Name) || seen[t.Name] {
			s.logger.Warn("MCP tool left out: its name is invalid or repeated", "tool", t.Name)
			continue
		}
		seen[t.Name] = true
		params, err := schema(t)
		if err != nil {
			s.logger.Warn("MCP tool left out: its input schema cannot be encoded", "tool", t.Name, "err", err)
			continue
		}
		spec := tools.Spec{Name: prefix + t.Name, Description: t.Description, Parameters: params, Server: s.cfg.Name,
			ReadOnly: t.Annotations.ReadOnlyHint != nil && *t.Annotations.ReadOnlyHint, Parallel: s.cfg.Parallel}
		if prefix != "" {
			spec.ServerTool = t.Name
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

func schema(t mcpgo.Tool) (json.RawMessage, error) {
	if len(t.RawInputSchema) > 0 {
		return t.RawInputSchema, nil
	}
	in := t.InputSchema
	if in.Type == "" {
		in.Type = "object"
	}
	if in.Properties == nil {
		in.Properties = map[string]any{}
	}
	return json.Marshal(in)
}

// streamOpened calls opened each time a GET is answered with an event stream: the standalone
// stream on which a streamable HTTP server sends what is not an answer. A notification the
// server sent before the stream was open (the reference server's tools/list_changed right after
// the handshake) went nowhere, so the tool list is read again once the stream stands.
type streamOpened struct {
	next   http.RoundTripper
	opened func()
}

func (t streamOpened) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && req.Method == http.MethodGet && resp.StatusCode == http.StatusOK {
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
			t.opened()
		}
	}
	return resp, err
}

// relist asks the session's watch to read the tool list again, as tools/list_changed does.
func (s *serverConn) relist() {
	select {
	case s.refresh <- struct{}{}:
	default:
	}
}

// statusRecorder remembers the status of the first POST, the handshake's initialize.
type statusRecorder struct {
	base   http.RoundTripper
	mu     sync.Mutex
	status int
}

func (r *statusRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err == nil && req.Method == http.MethodPost {
		r.mu.Lock()
		if r.status == 0 {
			r.status = resp.StatusCode
		}
		r.mu.Unlock()
	}
	return resp, err
}

func (r *statusRecorder) first() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// redactor hides the secret parts of a server URL (credentials, query values) in error texts.
type redactor struct{ pairs []string }

func newRedactor(raw string) *redactor {
	u, err := url.Parse(raw)
	if err != nil || (u.User == nil && u.RawQuery == "") {
		return &redactor{}
	}
	safe := *u
	safe.User = nil
	q := safe.Query()
	for k := range q {
		q.Set(k, "REDACTED")
	}
	safe.RawQuery = q.Encode()
	pairs := []string{raw, safe.String()}
	if u.RawQuery != "" {
		pairs = append(pairs, u.RawQuery, safe.RawQuery)
	}
	if u.User != nil {
		pairs = append(pairs, u.User.String()+"@", "")
	}
	return &redactor{pairs: pairs}
}

// err returns err with the secrets of the URL replaced; errors.Is and errors.As still see the
// original chain.
func (r *redactor) err(err error) error {
	if err == nil || len(r.pairs) == 0 {
		return err
	}
	msg := err.Error()
	clean := r.text(msg)
	if clean == msg {
		return err
	}
	return &redactedError{msg: clean, err: err}
}

// text returns s with the secrets of the URL replaced.
func (r *redactor) text(s string) string {
	if len(r.pairs) == 0 {
		return s
	}
	return strings.NewReplacer(r.pairs...).Replace(s)
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// cancellingSSE sends notifications/cancelled for the tool calls the bot abandons over SSE,
// where the answer comes on the stream and abandoning the POST does not reach the server
// (sendCancelled).
type cancellingSSE struct{ *transport.SSE }

func (t cancellingSSE) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := t.SSE.SendRequest(ctx, req)
	sendCancelled(ctx, t.SSE, req, err)
	return resp, err
}
