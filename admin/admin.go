// Package admin serves the bot's audit log to its admins: a JSON API (/api/v1/...), a web page
// (/admin/) rendered on the server from embedded templates, the local web chat (/chat) behind
// the same login, the Prometheus metrics handler it is given (/metrics), the runtime profiles of net/http/pprof (/debug/pprof/) and a health check (/healthz).
//
// Authentication: with a token configured, the API, /metrics and /debug/pprof/ take
// "Authorization: Bearer TOKEN" (compared in constant time), and browsers log in once with the
// token to get an HttpOnly, SameSite=Strict session cookie. Without a token the server only
// listens on a loopback address, needs no login, and answers only requests whose Host is a
// loopback name (so a web page cannot reach it by rebinding a domain to 127.0.0.1). New refuses a
// non-loopback address without a token.
package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/coord"
	"relaybot/pipeline/knowledge"
	"relaybot/pipeline/memory"
	"relaybot/store"
	"relaybot/tools"
)

// Store is what the admin server reads from the database: one query type a field, as
// *store.Database has them. Every field is required.
type Store struct {
	ToolCalls CallLog        // *store.ToolCallQuery
	Turns     Turns          // *store.TurnQuery
	Messages  TurnMessages   // *store.MessageQuery
	Timelines Timelines      // *store.TimelineQuery
	Usage     UsageStore     // *store.UsageQuery
	Consents  audit.Consents // *store.ConsentQuery
	Health    Pinger         // *store.Database
	// Transcripts are the conversations across chats and their search (*store.TranscriptQuery).
	Transcripts Transcripts
	// Tasks are the scheduled tasks (*store.TaskQuery); nil when [tasks] is off.
	Tasks Tasks
}

// check reports the first field of s that is missing.
func (s Store) check() error {
	for _, f := range []struct {
		name    string
		missing bool
	}{{"ToolCalls", s.ToolCalls == nil}, {"Turns", s.Turns == nil}, {"Messages", s.Messages == nil},
		{"Timelines", s.Timelines == nil}, {"Usage", s.Usage == nil}, {"Consents", s.Consents == nil},
		{"Health", s.Health == nil}, {"Transcripts", s.Transcripts == nil}} {
		if f.missing {
			return fmt.Errorf("admin: Options.Store.%s is required", f.name)
		}
	}
	return nil
}

// CallLog is the audit log as the pages read it: paged both ways and counted.
type CallLog interface {
	audit.Log
	// ToolCallPage is ToolCalls with the cursor of the newer page too.
	ToolCallPage(ctx context.Context, f audit.Filter) (audit.Page, error)
	// CountToolCalls counts the records matching f.
	CountToolCalls(ctx context.Context, f audit.Filter) (int, error)
}

// Turns reads turns: one by id, and the newest across chats with their chats; and the chats of
// conversations, so a page prints a thread's calls with their thread.
type Turns interface {
	Turn(ctx context.Context, id int64) (store.Turn, error)
	LatestTurns(ctx context.Context, f store.TurnFilter, before int64, limit int) ([]store.ListedTurn, error)
	// ConversationChats names the chat and thread of conversations, by id.
	ConversationChats(ctx context.Context, ids []int64) (map[int64]chat.Ref, error)
}

// TurnMessages lists the messages of one turn; the detail page shows them around the call.
type TurnMessages interface {
	TurnMessages(ctx context.Context, turnID int64) ([]chat.Message, error)
}

// Timelines reads what a turn's timeline is drawn from.
type Timelines interface {
	TurnTimeline(ctx context.Context, id int64) (store.Timeline, error)
}

// Pinger checks the database's connection; /healthz uses it.
type Pinger interface {
	Ping(ctx context.Context) error
}

// ServerHealth is one MCP server as the servers page and API show it: its health as the MCP
// loader reports it, and its OAuth login.
type ServerHealth struct {
	tools.ServerHealth
	// Login is the OAuth login of a server with auth = "oauth" ("connected", "needs login",
	// "not connected"), "" for others; LoginDetail says why or until when.
	Login       string `json:"login,omitempty"`
	LoginDetail string `json:"login_detail,omitempty"`
}

// Connect is the link that starts an OAuth login of the server.
func (h ServerHealth) Connect() string { return connectURL(h.Name) }

// Up reports whether the server is connected and answering.
func (h ServerHealth) Up() bool { return h.State == tools.ServerUp }

// Options configure New.
type Options struct {
	// Listen is the address Run listens on ("127.0.0.1:8080").
	Listen string
	// Token is the admin token. Empty is allowed only on a loopback Listen address, and then no
	// login is asked for.
	Token string
	// Store is the part of the database the pages and the API read, every field required.
	Store Store
	// MCPHealth reports the MCP servers' health; nil shows no servers.
	MCPHealth func() []tools.ServerHealth
	// WebChat is the local web chat (adapters/web), mounted at /chat behind the login; nil
	// leaves /chat out.
	WebChat http.Handler
	// Prices are the models' prices per million tokens, by configured model name, for the
	// usage page and API; when Settings is set, its Prices (the running config's) are used
	// instead.
	Prices map[string]chat.Price
	// TraceURL links turns and tool calls to a tracing UI: {trace_id} is replaced by the trace
	// id ("https://tempo.example/trace/{trace_id}"); empty shows no links.
	TraceURL string
	// Metrics is served at /metrics (metrics.Metrics.Handler); nil answers 404 there.
	Metrics http.Handler
	// Logger receives request failures; nil discards them.
	Logger *slog.Logger
	// ReadHeaderTimeout, ReadTimeout (the whole request, body included), WriteTimeout (the
	// whole response; for an event stream or an export, each write) and IdleTimeout (between
	// keep-alive requests) bound how long a client may hold a connection; zero means 10 s, 30 s,
	// 2 min and 1 min. MaxHeaderBytes (64 KiB) and MaxBodyBytes (1 MiB) cap what it may send.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxHeaderBytes                                            int
	MaxBodyBytes                                              int64
	// ChatUploadBytes caps the body of POST /chat/send, where the web chat's files and
	// recordings come (its own handler caps each file); zero means MaxBodyBytes.
	ChatUploadBytes int64
	// Proxies says which peers are trusted reverse proxies (their X-Forwarded-For names the
	// client that login throttling counts; their X-Forwarded-Proto can make cookies Secure) and
	// whether the public URL is https; nil trusts no proxy.
	Proxies *Proxies
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Memory is what the bot remembers of people (the memories page and API); nil: memory is
	// off, and they say so.
	Memory *memory.Memory
	// Knowledge is the knowledge bases (the knowledge page and API); nil: none is configured,
	// and they say so. KnowledgeUploadBytes caps an upload's body (zero: MaxBodyBytes).
	Knowledge            *knowledge.Knowledge
	KnowledgeUploadBytes int64
	// Recall, when set, stands for Memory, Knowledge and KnowledgeUploadBytes: it is asked once
	// per request for those the bot runs with, which a reload may turn on, off or change.
	Recall func() Recall
	// Instances lists the live replicas when several share the database; nil lists none.
	Instances func(ctx context.Context) ([]coord.Instance, error)
	// OAuth connects the MCP servers that log in with OAuth; nil when none does.
	OAuth OAuthLogins
	// PublicURL is admin.public_url: the OAuth callback is on it when set, else on the host
	// the browser asked for.
	PublicURL string
	// Settings is the configuration the bot runs with and its reload (the Settings page); nil
	// shows none.
	Settings Settings
	// Sessions keeps the login sessions (*store.AdminSessionQuery, so that every replica knows them); nil
	// keeps them in this process's memory.
	Sessions Sessions
}

// Server is the admin HTTP server.
type Server struct {
	opts     Options
	log      *slog.Logger
	now      func() time.Time
	sessions Sessions
	throttle *throttle
	proxies  *Proxies
	pages    pageSet
	handler  http.Handler
	// Set by Serve: the listener's address, once listening.
	mu   sync.Mutex
	addr net.Addr
	// reloaded is the outcome of this process's last reload from the page or the API.
	reloaded *Reloaded
}

// New checks the options and builds the server; it does not listen yet.
func New(opts Options) (*Server, error) {
	if err := opts.Store.check(); err != nil {
		return nil, err
	}
	if opts.Listen == "" {
		return nil, errors.New("admin: Options.Listen is empty (want host:port, e.g. 127.0.0.1:8080)")
	}
	if _, _, err := net.SplitHostPort(opts.Listen); err != nil {
		return nil, fmt.Errorf("admin: listen address %q: %w", opts.Listen, err)
	}
	if opts.Token == "" && !isLoopbackListen(opts.Listen) {
		return nil, fmt.Errorf("admin: refusing to listen on non-loopback address %q without a token: set [admin] token (e.g. token = \"${BOT_ADMIN_TOKEN}\") or listen on 127.0.0.1", opts.Listen)
	}
	if opts.Token != "" && len(opts.Token) < 16 {
		return nil, errors.New("admin: the token is shorter than 16 characters; use a long random one (openssl rand -hex 32)")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Proxies == nil {
		opts.Proxies = &Proxies{}
	}
	if opts.Sessions == nil {
		opts.Sessions = newMemorySessions()
	}
	opts.withDefaults()
	s := &Server{
		opts:     opts,
		log:      opts.Logger,
		now:      opts.Now,
		sessions: opts.Sessions,
		throttle: newThrottle(opts.Now),
		proxies:  opts.Proxies,
		pages:    newPages(),
	}
	s.handler = s.routes()
	return s, nil
}

// Handler returns the server's HTTP handler (for tests and for mounting elsewhere).
func (s *Server) Handler() http.Handler { return s.handler }

// Addr returns the address the server listens on, once Run or Serve has started listening.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Run listens on Options.Listen and serves until ctx ends, then shuts down gracefully: open
// event streams end, requests in flight get a few seconds to finish.
func (s *Server) Run(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.opts.Listen)
	if err != nil {
		return fmt.Errorf("admin: listen on %s: %w", s.opts.Listen, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends, like Run. It closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	s.addr = ln.Addr()
	s.mu.Unlock()
	// Requests derive from base, which ends first on shutdown so long-lived event streams return
	// and Shutdown does not wait for them.
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ReadTimeout:       s.opts.ReadTimeout,
		WriteTimeout:      s.opts.WriteTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		MaxHeaderBytes:    s.opts.MaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	s.log.Info("admin listening", "addr", ln.Addr().String(), "login", s.opts.Token != "")
	select {
	case err := <-served:
		return fmt.Errorf("admin: serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	cancelBase()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close()
		<-served
		return fmt.Errorf("admin: shutdown: %w", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("admin: serve on %s: %w", ln.Addr(), err)
	}
	return nil
}

// routes builds the handler tree.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	metrics := s.opts.Metrics
	if metrics == nil {
		metrics = http.NotFoundHandler()
	}
	mux.Handle("GET /metrics", s.requireBearer(metrics))
	s.pprofRoutes(mux)

	mux.Handle("GET /api/v1/tool-calls", s.requireBearer(http.HandlerFunc(s.apiToolCalls)))
	mux.Handle("GET /api/v1/tool-calls/{id}", s.requireBearer(http.HandlerFunc(s.apiToolCall)))
	mux.Handle("GET /api/v1/overview", s.requireBearer(http.HandlerFunc(s.apiOverview)))
	mux.Handle("GET /api/v1/tool-stats", s.requireBearer(http.HandlerFunc(s.apiToolStats)))
	mux.Handle("GET /api/v1/mcp-servers", s.requireBearer(http.HandlerFunc(s.apiMCPServers)))
	mux.Handle("GET /api/v1/usage", s.requireBearer(http.HandlerFunc(s.apiUsage)))
	mux.Handle("GET /api/v1/instances", s.requireBearer(http.HandlerFunc(s.apiInstances)))
	mux.Handle("GET /api/v1/turns", s.requireBearer(http.HandlerFunc(s.apiTurns)))
	mux.Handle("GET /api/v1/conversations", s.requireBearer(http.HandlerFunc(s.apiConversations)))
	mux.Handle("GET /api/v1/conversations/search", s.requireBearer(http.HandlerFunc(s.apiSearchConversations)))
	mux.Handle("GET /api/v1/conversations/{id}", s.requireBearer(http.HandlerFunc(s.apiConversation)))
	mux.Handle("GET /api/v1/consents", s.requireBearer(http.HandlerFunc(s.apiConsents)))
	mux.Handle("DELETE /api/v1/consents/{id}", s.requireBearer(http.HandlerFunc(s.apiRevokeConsent)))
	mux.Handle("GET /api/v1/memories", s.requireBearer(http.HandlerFunc(s.apiMemories)))
	mux.Handle("DELETE /api/v1/memories/{id}", s.requireBearer(http.HandlerFunc(s.apiForgetMemory)))
	mux.Handle("GET /api/v1/knowledge/{base}/documents", s.requireBearer(http.HandlerFunc(s.apiKnowledgeDocuments)))
	mux.Handle("POST /api/v1/knowledge/{base}/documents", s.requireBearer(http.HandlerFunc(s.apiKnowledgeUpload)))
	mux.Handle("DELETE /api/v1/knowledge/{base}/documents/{id}", s.requireBearer(http.HandlerFunc(s.apiKnowledgeRemove)))
	mux.Handle("GET /api/v1/knowledge/{base}/search", s.requireBearer(http.HandlerFunc(s.apiKnowledgeSearch)))
	mux.Handle("GET /api/v1/tasks", s.requireBearer(http.HandlerFunc(s.apiTasks)))
	mux.Handle("GET /api/v1/settings", s.requireBearer(http.HandlerFunc(s.apiSettings)))
	mux.Handle("POST /api/v1/settings/reload", s.requireBearer(http.HandlerFunc(s.apiReload)))
	mux.Handle("DELETE /api/v1/tasks/{id}", s.requireBearer(http.HandlerFunc(s.apiCancelTask)))
	mux.Handle("/api/", s.requireBearer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSONError(w, http.StatusNotFound, "no such API endpoint: "+r.Method+" "+r.URL.Path)
	})))

	mux.Handle("GET /admin/static/", http.StripPrefix("/admin/static/", staticHandler()))
	mux.HandleFunc("GET /favicon.ico", favicon)
	mux.HandleFunc("GET /admin/login", s.loginPage)
	mux.HandleFunc("POST /admin/login", s.login)
	mux.Handle("POST /admin/logout", s.requireLogin(http.HandlerFunc(s.logout)))
	mux.Handle("GET /admin/{$}", s.requireLogin(http.HandlerFunc(s.landingPage)))
	mux.Handle("GET /admin/calls", s.requireLogin(http.HandlerFunc(s.callsPage)))
	mux.Handle("GET /admin/calls/{id}", s.requireLogin(http.HandlerFunc(s.callPage)))
	mux.Handle("GET /admin/turns/{id}", s.requireLogin(http.HandlerFunc(s.turnPage)))
	mux.Handle("GET /admin/turns/{id}/files/{seq}", s.requireLogin(http.HandlerFunc(s.turnFilePage)))
	mux.Handle("GET /admin/turns", s.requireLogin(http.HandlerFunc(s.turnsPage)))
	mux.Handle("GET /admin/conversations", s.requireLogin(http.HandlerFunc(s.conversationsPage)))
	mux.Handle("GET /admin/conversations/{id}", s.requireLogin(http.HandlerFunc(s.conversationPage)))
	mux.Handle("GET /admin/stats", s.requireLogin(http.HandlerFunc(s.statsPage)))
	mux.Handle("GET /admin/servers", s.requireLogin(http.HandlerFunc(s.serversPage)))
	mux.Handle("GET /admin/servers/{name}/connect", s.requireLogin(http.HandlerFunc(s.oauthConnect)))
	mux.HandleFunc("GET "+oauthCallbackPath+"{name}", s.oauthCallback)
	mux.Handle("GET /admin/replicas", s.requireLogin(http.HandlerFunc(s.replicasPage)))
	mux.Handle("GET /admin/usage", s.requireLogin(http.HandlerFunc(s.usagePage)))
	mux.Handle("GET /admin/consents", s.requireLogin(http.HandlerFunc(s.consentsPage)))
	mux.Handle("POST /admin/consents/{id}/revoke", s.requireLogin(http.HandlerFunc(s.consentRevokePage)))
	mux.Handle("GET /admin/memories", s.requireLogin(http.HandlerFunc(s.memoriesPage)))
	mux.Handle("POST /admin/memories/{id}/forget", s.requireLogin(http.HandlerFunc(s.memoryForgetPage)))
	mux.Handle("GET /admin/knowledge", s.requireLogin(http.HandlerFunc(s.knowledgePage)))
	mux.Handle("POST /admin/knowledge/{base}/documents", s.requireLogin(http.HandlerFunc(s.knowledgeUploadPage)))
	mux.Handle("POST /admin/knowledge/{base}/documents/{id}/delete", s.requireLogin(http.HandlerFunc(s.knowledgeRemovePage)))
	mux.Handle("GET /admin/tasks", s.requireLogin(http.HandlerFunc(s.tasksPage)))
	mux.Handle("GET /admin/settings", s.requireLogin(http.HandlerFunc(s.settingsPage)))
	mux.Handle("POST /admin/settings/reload", s.requireLogin(http.HandlerFunc(s.settingsReloadPage)))
	mux.Handle("POST /admin/tasks/{id}/cancel", s.requireLogin(http.HandlerFunc(s.taskCancelPage)))
	mux.Handle("GET /admin/usage.csv", s.requireLogin(http.HandlerFunc(s.apiUsage)))
	mux.Handle("GET /admin/export.csv", s.requireLogin(http.HandlerFunc(s.exportCSV)))
	mux.Handle("GET /admin/export.jsonl", s.requireLogin(http.HandlerFunc(s.exportJSONL)))
	mux.Handle("GET /admin", http.RedirectHandler("/admin/", http.StatusMovedPermanently))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/admin/", http.StatusFound)
	})
	if s.opts.WebChat != nil {
		chat := s.requireLogin(s.opts.WebChat)
		mux.Handle("/chat", chat)
		mux.Handle("/chat/", chat)
	}
	return s.limits(s.guard(http.NewCrossOriginProtection().Handler(mux)))
}

// pprofRoutes mounts the runtime profiles of net/http/pprof on mux under /debug/pprof/, behind
// the same authorization as the API. Only this mux serves them: the admin server never serves
// http.DefaultServeMux, where importing net/http/pprof also registers them. /debug/pprof/cmdline is left out: the command line may carry secrets.
func (s *Server) pprofRoutes(mux *http.ServeMux) {
	mux.Handle("GET /debug/pprof/", s.requireBearer(http.HandlerFunc(pprof.Index)))
	mux.Handle("GET /debug/pprof/cmdline", s.requireBearer(http.NotFoundHandler()))
	mux.Handle("GET /debug/pprof/profile", s.requireBearer(http.HandlerFunc(pprof.Profile)))
	mux.Handle("GET /debug/pprof/trace", s.requireBearer(http.HandlerFunc(pprof.Trace)))
	symbol := s.requireBearer(http.HandlerFunc(pprof.Symbol))
	mux.Handle("GET /debug/pprof/symbol", symbol)
	mux.Handle("POST /debug/pprof/symbol", symbol)
}

// guard sets the headers every response carries and, in the no-token mode, answers only
// requests addressed to a loopback host name.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if s.opts.Token == "" {
			host := r.Host
			if hh, _, err := net.SplitHostPort(host); err == nil {
				host = hh
			}
			if !isLoopbackHost(host) {
				http.Error(w, "this admin server has no token and only answers requests for localhost or 127.0.0.1", http.StatusMisdirectedRequest)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// authorized reports whether r carries the admin token or a live session, and returns the
// session when it has one. Without a token every request is authorized. A Bearer token is
// checked only when its client address is not waiting out earlier wrong tokens: then wait is how
// long it still has to wait, and the token is not looked at. err is set when the sessions could
// not be read.
func (s *Server) authorized(r *http.Request) (ss session, ok bool, wait time.Duration, err error) {
	if s.opts.Token == "" {
		return session{}, true, 0, nil
	}
	if tok, found := bearerToken(r); found {
		ok, wait = s.checkToken(r, tok)
		return session{}, ok, wait, nil
	}
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return session{}, false, 0, nil
	}
	ss, ok, err = s.session(r.Context(), ck.Value)
	return ss, ok, 0, err
}

// sessionsDown answers a request whose session could not be read.
func (s *Server) sessionsDown(w http.ResponseWriter, err error) {
	s.log.Error("admin: read a login session", "err", err)
	http.Error(w, "login sessions cannot be read right now (see the bot's log): try again in a moment", http.StatusServiceUnavailable)
}

// checkToken compares a token sent by r's client with the admin token, under the per-address
// throttle: ok when it is right; wait > 0 when the client must wait (now or after this failure).
func (s *Server) checkToken(r *http.Request, tok string) (ok bool, wait time.Duration) {
	ip := s.proxies.ClientIP(r)
	if wait := s.throttle.wait(ip); wait > 0 {
		return false, wait
	}
	if equalSecret(tok, s.opts.Token) {
		s.throttle.succeeded(ip)
		return true, 0
	}
	wait = s.throttle.failed(ip)
	s.log.Warn("admin: wrong token", "client", ip.String(), "path", r.URL.Path, "wait", wait)
	return false, 0
}

// tooMany answers a client that is waiting out its wrong tokens.
func tooMany(w http.ResponseWriter, wait time.Duration) {
	w.Header().Set("Retry-After", retryAfter(wait))
	writeJSONError(w, http.StatusTooManyRequests, "too many wrong admin tokens from your address: try again in "+retryAfter(wait)+" s")
}

// retryAfter is wait in whole seconds, rounded up.
func retryAfter(wait time.Duration) string {
	return strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10)
}

// requireBearer guards the API and /metrics: 401 with WWW-Authenticate unless the request
// carries the token (a logged-in browser's session also works), 429 while the client's address
// waits out earlier wrong tokens.
func (s *Server) requireBearer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, ok, wait, err := s.authorized(r)
		if err != nil {
			s.sessionsDown(w, err)
			return
		}
		if wait > 0 {
			tooMany(w, wait)
			return
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="relaybot admin"`)
			writeJSONError(w, http.StatusUnauthorized, "missing or wrong admin token: send Authorization: Bearer TOKEN")
			return
		}
		next.ServeHTTP(w, r)
	})
}

type sessionKey struct{}

// requireLogin guards the web pages and the web chat: a browser without a session is sent to
// the login page (GET) or refused (anything else).
func (s *Server) requireLogin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ss, ok, wait, err := s.authorized(r)
		if err != nil {
			s.sessionsDown(w, err)
			return
		}
		if wait > 0 {
			tooMany(w, wait)
			return
		}
		if !ok {
			if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" {
				http.Redirect(w, r, "/admin/login?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="relaybot admin"`)
			http.Error(w, "log in at /admin/login first", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, ss)))
	})
}

func sessionOf(r *http.Request) session {
	ss, _ := r.Context().Value(sessionKey{}).(session)
	return ss
}

// healthz answers 200 "ok" while the server (and the store, when it can tell) works.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	if err := s.opts.Store.Health.Ping(ctx); err != nil {
		http.Error(w, "store unavailable", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// safeNext returns next when it is a path on this server, else "/admin/". It judges next the
// way a browser will read the Location header: browsers drop ASCII tabs and newlines anywhere in
// a URL, strip leading and trailing spaces and control characters, and read a backslash as a
// slash, so "/\t/evil.example" and "/\\evil.example" are "//evil.example", another host.
func safeNext(next string) string {
	const fallback = "/admin/"
	norm := strings.Map(func(r rune) rune {
		switch r {
		case '\t', '\n', '\r':
			return -1
		case '\\':
			return '/'
		}
		return r
	}, next)
	norm = strings.TrimFunc(norm, func(r rune) bool { return r <= ' ' })
	if !strings.HasPrefix(norm, "/") || strings.HasPrefix(norm, "//") {
		return fallback
	}
	if strings.ContainsFunc(norm, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return fallback
	}
	u, err := url.Parse(norm)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return fallback
	}
	return norm
}
