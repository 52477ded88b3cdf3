package oauth_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"relaybot/admin"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/internal/testkit/logbuf"
	mcpkit "relaybot/internal/testkit/mcp"
	astest "relaybot/internal/testkit/oauth"
	"relaybot/internal/testkit/wait"
	"relaybot/metrics"
	"relaybot/store"
	"relaybot/store/storetest"
	"relaybot/tools"
	"relaybot/tools/mcp"
	"relaybot/tools/mcp/oauth"
)

// clock is the time tokens expire by, moved by the tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// recorder keeps the audit records the tool manager writes.
type recorder struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (r *recorder) Start(context.Context, *audit.Record) error { return nil }

func (r *recorder) Finish(_ context.Context, rec *audit.Record) error {
	r.mu.Lock()
	r.recs = append(r.recs, *rec)
	r.mu.Unlock()
	return nil
}

func (r *recorder) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, rec := range r.recs {
		fmt.Fprintf(&b, "%s %s %s %s\n", rec.ToolName, rec.Arguments, rec.Result, rec.Error)
	}
	return b.String()
}

// rig is one bot replica's view of an OAuth MCP server: the authorization server and the
// protected MCP server (shared by the replicas of a test), and the replica's logins, MCP loader,
// tool manager, metrics and admin page.
type rig struct {
	t       *testing.T
	clock   *clock
	as      *astest.Server
	url     string
	dbDir   string // the SQLite database's folder ("" on PostgreSQL)
	logs    *logbuf.Buffer
	logins  *oauth.Manager
	loader  *mcp.Loader
	tools   *tools.Manager
	audit   *recorder
	metrics *metrics.Metrics
	admin   *httptest.Server
	browser *http.Client
}

// protected starts an authorization server and an MCP server (the testkit kit, streamable HTTP)
// behind it, and returns them with the MCP endpoint.
func protected(t *testing.T, c *clock, o astest.Options) (*astest.Server, string) {
	o.Now = c.Now
	as := astest.Start(t, o)
	kit := mcpkit.New("tracker")
	// A 2025-11-25 server, as these tests were written for: its session's standalone stream is
	// what notices a login lost while no call runs (2026-07-28 has no such stream).
	kit.Legacy()
	h := kit.Serve(server.NewStreamableHTTPServer(kit.Server))
	return as, as.Protect(t, "/mcp", h)
}

func openSQLite(t *testing.T) (*store.Database, string) {
	dir := t.TempDir()
	return storetest.OpenWith(t, store.Options{Driver: store.DriverSQLite, DSN: filepath.Join(dir, "bot.db")}), dir
}

var testKey = func() []byte {
	k := make([]byte, oauth.KeySize)
	_, _ = rand.Read(k)
	return k
}()

// newRig builds a replica on st for the server at url (streamable HTTP unless tune says otherwise).
func newRig(t *testing.T, c *clock, as *astest.Server, url string, st *store.Database, srv oauth.Server, tune ...func(*mcp.ServerConfig)) *rig {
	t.Helper()
	r := &rig{t: t, clock: c, as: as, url: url, logs: &logbuf.Buffer{}, audit: &recorder{}}
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// The fakes run on loopback: the server is one the admin runs inside.
	srv.Name, srv.URL, srv.Local = "tracker", url, true
	var err error
	r.logins, err = oauth.New(oauth.Options{Servers: []oauth.Server{srv}, Store: st.OAuth, Key: testKey, Now: c.Now, Logger: log,
		CheckEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sc := mcp.ServerConfig{Name: "tracker", Transport: mcp.TransportHTTP, URL: url, Local: true,
		Auth: r.logins.Source("tracker"), ConnectTimeout: 20 * time.Second}
	for _, f := range tune {
		f(&sc)
	}
	r.loader = mcp.NewLoader([]mcp.ServerConfig{sc}, log, mcp.WithBackoff(50*time.Millisecond, 500*time.Millisecond))
	r.loader.Start(context.Background())
	t.Cleanup(r.loader.Close)
	r.metrics = metrics.New(metrics.Options{MCPUp: func() map[string]bool {
		return map[string]bool{"tracker": r.loader.Health()[0].State == tools.ServerUp}
	}})
	r.tools, err = tools.NewManager([]tools.Loader{r.loader}, r.metrics.Recorder(r.audit), tools.ManagerOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srvAdmin, err := admin.New(admin.Options{Listen: "127.0.0.1:0", Store: admin.Store{ToolCalls: st.ToolCalls, Turns: st.Turns, Messages: st.Messages, Timelines: st.Timelines, Usage: st.Usage, Consents: st.Consents, Health: st, Transcripts: st.Transcripts}, OAuth: r.logins, Logger: log,
		Metrics:   r.metrics.Handler(),
		MCPHealth: func() []tools.ServerHealth { return r.loader.Health()[:1] }})
	if err != nil {
		t.Fatal(err)
	}
	r.admin = httptest.NewServer(srvAdmin.Handler())
	t.Cleanup(r.admin.Close)
	jar, _ := cookiejar.New(nil)
	r.browser = &http.Client{Jar: jar, Timeout: 30 * time.Second}
	return r
}

// runRefresher runs the logins' background refresher until the test ends.
func (r *rig) runRefresher() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.logins.Run(ctx)
	}()
	r.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// get fetches a page of the admin server (or any URL) as the admin's browser, following
// redirects, and returns the final status and body.
func (r *rig) get(path string) (int, string) {
	r.t.Helper()
	u := path
	if strings.HasPrefix(path, "/") {
		u = r.admin.URL + path
	}
	resp, err := r.browser.Get(u)
	if err != nil {
		r.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// connect logs the server in from the Servers page, as an admin clicking Connect does.
func (r *rig) connect() {
	r.t.Helper()
	_, page := r.get("/admin/servers")
	if !strings.Contains(page, `href="/admin/servers/tracker/connect"`) {
		r.t.Fatalf("the Servers page offers no Connect link for tracker:\n%s", page)
	}
	status, body := r.get("/admin/servers/tracker/connect")
	if status != http.StatusOK || !strings.Contains(body, "tracker is connected") {
		r.t.Fatalf("after the login the admin saw %d:\n%s", status, body)
	}
}

func (r *rig) waitUp() {
	r.t.Helper()
	wait.For(r.t, "the MCP server is up after the login", func() bool { return r.loader.Health()[0].State == tools.ServerUp })
}

// turn starts a turn: it is offered the tools of the servers up now.
func (r *rig) turn() *tools.Turn {
	return r.tools.ForTurn(tools.TurnInfo{Platform: "web", ChatID: "1", UserID: "u"}, nil)
}

// call runs the echo tool in a new turn and returns what goes back to the model.
func (r *rig) call(text string) tools.Outcome { return r.callIn(r.turn(), text) }

// callIn runs the echo tool in turn; a call that hangs fails the test after 30 s.
func (r *rig) callIn(turn *tools.Turn, text string) tools.Outcome {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := turn.Execute(ctx, tools.Call{ToolCall: chat.ToolCall{ID: "call_1", Name: "echo", Arguments: `{"text":"` + text + `"}`}, Round: 1})
	if ctx.Err() != nil {
		r.t.Errorf("the tool call hung until the test's deadline: %q", out.Content)
	}
	return out
}

// loginState returns what the Servers page says of tracker's login.
func (r *rig) loginState() string {
	r.t.Helper()
	_, page := r.get("/admin/servers")
	for _, s := range []string{"needs login", "not connected", "connected"} {
		if strings.Contains(page, ">"+s+"</span>") {
			return s
		}
	}
	return "(no login state on the page)"
}

// assertNoSecrets checks that no secret the authorization server handed out or received is in
// the logs, the audit records, the metrics or (SQLite) the database files.
func (r *rig) assertNoSecrets() {
	r.t.Helper()
	secrets := r.as.Secrets()
	if len(secrets) < 3 {
		r.t.Fatalf("the authorization server saw only %d secrets; the flow did not run", len(secrets))
	}
	_, metricsText := r.get("/metrics")
	places := map[string]string{"logs": r.logs.String(), "audit": r.audit.text(), "metrics": metricsText}
	if r.dbDir != "" {
		files, _ := filepath.Glob(filepath.Join(r.dbDir, "bot.db*"))
		var all bytes.Buffer
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				r.t.Fatal(err)
			}
			all.Write(b)
		}
		places["database"] = all.String()
	}
	for where, text := range places {
		for _, sec := range secrets {
			if strings.Contains(text, sec) {
				r.t.Errorf("a secret (%.6s…) is in the %s", sec, where)
			}
		}
	}
}

func TestAnAdminConnectsAnOAuthServerFromTheServersPageAndItsToolsWork(t *testing.T) {
	for _, tc := range []struct {
		name string
		as   astest.Options
		srv  oauth.Server
	}{
		{name: "dynamic client registration"},
		{name: "configured confidential client",
			as:  astest.Options{NoRegistration: true, Clients: map[string]string{"relaybot": "s3cret-client-secret-value"}},
			srv: oauth.Server{ClientID: "relaybot", ClientSecret: "s3cret-client-secret-value"}},
		{name: "configured public client", as: astest.Options{NoRegistration: true, Clients: map[string]string{"relaybot": ""}},
			srv: oauth.Server{ClientID: "relaybot"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t: time.Now()}
			tc.as.Scope = "mcp:tools"
			as, url := protected(t, c, tc.as)
			st, dir := openSQLite(t)
			r := newRig(t, c, as, url, st, tc.srv)
			r.dbDir = dir

			if got := r.loginState(); got != "not connected" {
				t.Fatalf("before any login the Servers page says %q, want \"not connected\"", got)
			}
			wait.For(t, "the server is down for want of a login", func() bool {
				h := r.loader.Health()[0]
				return h.State == tools.ServerDown && strings.Contains(h.LastError, "needs an admin to log in")
			})
			r.connect()
			r.waitUp()
			if out := r.call("hello"); out.Err != nil || out.Content != "hello" {
				t.Fatalf("after the login the tool answered %q (%v), want hello", out.Content, out.Err)
			}
			if got := r.loginState(); got != "connected" {
				t.Fatalf("after the login the Servers page says %q", got)
			}
			if n := as.Count("register"); (n == 1) != (tc.srv.ClientID == "") {
				t.Errorf("the bot registered %d clients; want one exactly when no client_id is configured", n)
			}
			reqs := as.TokenRequests()
			if len(reqs) != 1 || reqs[0].Get("resource") != url || reqs[0].Get("code_verifier") == "" {
				t.Errorf("the code exchange did not name the resource %s with a verifier: %v", url, reqs)
			}
			sealed, _, err := st.OAuth.OAuthToken(context.Background(), "tracker")
			if err != nil || sealed == "" {
				t.Fatalf("no token record in the database: %v", err)
			}
			r.assertNoSecrets()
		})
	}
}

// connected returns a replica on SQLite whose admin has connected the server, whose tokens
// live an hour.
func connected(t *testing.T) (*rig, *clock, *astest.Server) {
	c := &clock{t: time.Now()}
	as, url := protected(t, c, astest.Options{AccessTTL: time.Hour})
	st, _ := openSQLite(t)
	r := newRig(t, c, as, url, st, oauth.Server{})
	r.connect()
	r.waitUp()
	return r, c, as
}

func TestTheTokenIsRefreshedBeforeItExpires(t *testing.T) {
	r, c, as := connected(t)

	c.Advance(time.Hour - oauth.DefaultRefreshBefore/2) // inside the margin, the old token still good
	if out := r.call("one"); out.Content != "one" {
		t.Fatalf("near expiry the tool answered %q", out.Content)
	}
	if n := as.Count("refresh"); n != 1 {
		t.Fatalf("the token was refreshed %d times near its expiry, want 1", n)
	}
	last := as.TokenRequests()[len(as.TokenRequests())-1]
	if last.Get("grant_type") != "refresh_token" || last.Get("resource") != r.url {
		t.Errorf("the refresh did not name the resource: %v", last)
	}
	c.Advance(time.Hour / 2) // past the old token's expiry, well within the new one's life
	if out := r.call("two"); out.Content != "two" {
		t.Fatalf("after the old token expired the tool answered %q", out.Content)
	}
	if n := as.Count("refresh"); n != 1 {
		t.Errorf("the token was refreshed %d times, want 1 (the new token is still good)", n)
	}
	if got := r.loginState(); got != "connected" {
		t.Errorf("the Servers page says %q after a refresh", got)
	}
}

func TestARevokedLoginShowsNeedsLoginAndTheToolFailsWithAClearError(t *testing.T) {
	c := &clock{t: time.Now()}
	as, url := protected(t, c, astest.Options{})
	st, dir := openSQLite(t)
	r := newRig(t, c, as, url, st, oauth.Server{})
	r.dbDir = dir
	r.connect()
	r.waitUp()

	turn := r.turn() // a turn that was offered the tool before the revocation
	as.RevokeAll()
	const want = "err: MCP server tracker needs an admin to log in again at /admin/servers"
	if out := r.callIn(turn, "x"); out.Content != want || out.Status != audit.StatusUnavailable {
		t.Fatalf("with a revoked token the tool answered %q (%s), want %q", out.Content, out.Status, want)
	}
	if n := as.Count("refresh_refused"); n != 1 {
		t.Errorf("the bot tried %d refreshes the authorization server refused, want 1", n)
	}
	if got := r.loginState(); got != "needs login" {
		t.Fatalf("with a revoked token the Servers page says %q, want \"needs login\"", got)
	}
	wait.For(t, "the server is marked down for want of a login", func() bool {
		h := r.loader.Health()[0]
		return h.State == tools.ServerDown && strings.Contains(h.LastError, "log in")
	})
	if out := r.callIn(turn, "y"); out.Content != want {
		t.Fatalf("while the server is down for want of a login the tool answered %q", out.Content)
	}
	if n := as.Count("refresh_refused"); n != 1 {
		t.Errorf("a spent login was sent to the authorization server again (%d refusals)", n)
	}

	r.connect() // an admin logs in again: the server comes back without a restart
	r.waitUp()
	if out := r.call("back"); out.Content != "back" {
		t.Fatalf("after logging in again the tool answered %q", out.Content)
	}
	r.assertNoSecrets()
}

func TestACallbackIsRefusedWithAWrongOrReusedState(t *testing.T) {
	c := &clock{t: time.Now()}
	as, url := protected(t, c, astest.Options{})
	st, _ := openSQLite(t)
	r := newRig(t, c, as, url, st, oauth.Server{})

	// The admin's browser goes to the authorization server but does not follow it back; the
	// test replays the callback itself.
	r.browser.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), r.admin.URL) {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := r.browser.Get(r.admin.URL + "/admin/servers/tracker/connect")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	callback := resp.Header.Get("Location")
	if !strings.HasPrefix(callback, r.admin.URL+"/admin/oauth/callback/tracker?") {
		t.Fatalf("the authorization server sent the browser to %q", callback)
	}
	r.browser.CheckRedirect = nil
	if status, body := r.get("/admin/oauth/callback/tracker?state=forged&code=x"); status != http.StatusBadRequest || !strings.Contains(body, "unknown, already used or expired") {
		t.Fatalf("a forged state got %d:\n%s", status, body)
	}
	if status, _ := r.get(callback); status != http.StatusOK {
		t.Fatalf("the real callback got %d", status)
	}
	if status, body := r.get(callback); status != http.StatusBadRequest || !strings.Contains(body, "already used") {
		t.Fatalf("a replayed callback got %d:\n%s", status, body)
	}
	if n := as.Count("code"); n != 1 {
		t.Errorf("%d codes were exchanged, want 1", n)
	}
}

func TestTheBotRefusesAnAuthorizationServerWithoutS256(t *testing.T) {
	c := &clock{t: time.Now()}
	// A resource whose metadata names an authorization server offering no PKCE.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"issuer":"http://%s","authorization_endpoint":"http://%s/a","token_endpoint":"http://%s/t"}`, r.Host, r.Host, r.Host)
	}))
	t.Cleanup(plain.Close)
	mux := http.NewServeMux()
	var resURL string
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"resource":%q,"authorization_servers":[%q]}`, resURL, plain.URL)
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
	res := httptest.NewServer(mux)
	t.Cleanup(res.Close)
	resURL = res.URL + "/mcp"
	st, _ := openSQLite(t)
	m, err := oauth.New(oauth.Options{Servers: []oauth.Server{{Name: "x", URL: resURL, Local: true}}, Store: st.OAuth, Key: testKey, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Begin(context.Background(), "x", "http://127.0.0.1/cb")
	if err == nil || !strings.Contains(err.Error(), "S256") {
		t.Fatalf("Begin with an authorization server without PKCE: %v, want a refusal naming S256", err)
	}
}

// pgSchema returns store options for a fresh schema of the PostgreSQL database named by
// BOT_TEST_POSTGRES_DSN (dropped at the end), skipping the test when it is not set.
func pgSchema(t *testing.T) store.Options {
	t.Helper()
	base := os.Getenv("BOT_TEST_POSTGRES_DSN")
	if base == "" {
		t.Skip("PostgreSQL not tested: set BOT_TEST_POSTGRES_DSN to a database URL")
	}
	schema := fmt.Sprintf("oauth_%d", time.Now().UnixNano())
	db, err := sql.Open("pgx", base) // registered by the store's driver
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP SCHEMA " + schema + " CASCADE") })
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return store.Options{Driver: store.DriverPostgres, DSN: base + sep + "search_path=" + schema}
}

func TestTwoReplicasOnPostgreSQLShareOneTokenAndRefreshItOnce(t *testing.T) {
	opts := pgSchema(t)
	c := &clock{t: time.Now()}
	as, url := protected(t, c, astest.Options{AccessTTL: time.Hour})
	a := newRig(t, c, as, url, storetest.OpenWith(t, opts), oauth.Server{})
	b := newRig(t, c, as, url, storetest.OpenWith(t, opts), oauth.Server{})
	a.connect() // on replica a; b learns of it from the database
	a.waitUp()
	b.waitUp()
	if got := b.loginState(); got != "connected" {
		t.Fatalf("replica b's Servers page says %q after a login on a", got)
	}
	for _, step := range []struct {
		name    string
		advance time.Duration
		want    int // refreshes so far
	}{
		{"inside the refresh margin", time.Hour - oauth.DefaultRefreshBefore/2, 1},
		{"past expiry", 2 * time.Hour, 2},
	} {
		c.Advance(step.advance)
		// The authorization server holds the refresh, so the replicas' calls overlap it.
		release := as.HoldRefreshes(t)
		held := as.Count("held")
		outs := make(chan tools.Outcome, 8)
		for i := range 8 {
			r := a
			if i%2 == 1 {
				r = b
			}
			go func() { outs <- r.call("both") }()
		}
		wait.For(t, step.name+": one replica asks for a refresh", func() bool { return as.Count("held") > held })
		if step.name == "inside the refresh margin" {
			// The other replica's calls go on with the old token, still good, meanwhile.
			wait.For(t, "the calls of the replica that is not refreshing finish", func() bool { return len(outs) >= 4 })
		}
		if n := as.Count("held") - held; n != 1 {
			t.Errorf("%s: %d refresh requests at once, want 1", step.name, n)
		}
		release()
		for range 8 {
			if out := <-outs; out.Content != "both" {
				t.Errorf("%s: a call answered %q", step.name, out.Content)
			}
		}
		if n := as.Count("refresh"); n != step.want {
			t.Errorf("%s: %d refreshes in all, want %d (one per expiry, whichever replica)", step.name, n, step.want)
		}
		if n := as.Count("reuse"); n != 0 {
			t.Fatalf("%s: a rotated refresh token was sent again %d times (two replicas refreshed at once)", step.name, n)
		}
	}
}

func TestAnIdleBotRefreshesItsTokenAndFindsARefusedRefreshWithoutACall(t *testing.T) {
	r, c, as := connected(t)
	r.runRefresher()

	c.Advance(time.Hour - oauth.DefaultRefreshBefore/2)
	wait.For(t, "the idle bot refreshes the token inside the margin", func() bool { return as.Count("refresh") == 1 })
	if got := r.loginState(); got != "connected" {
		t.Fatalf("after a background refresh the Servers page says %q", got)
	}

	as.RevokeAll()
	c.Advance(time.Hour - oauth.DefaultRefreshBefore/2)
	wait.For(t, "the refused refresh shows on the Servers page", func() bool { return r.loginState() == "needs login" })
	if n := as.Count("refresh"); n != 1 {
		t.Errorf("%d refreshes granted, want 1", n)
	}
	if out := r.call("x"); out.Content != "err: MCP server tracker needs an admin to log in again at /admin/servers" {
		t.Errorf("a call after the refused refresh answered %q", out.Content)
	}
}

func TestAnSSEServerBehindOAuthIsConnectedAndItsTokenRefreshed(t *testing.T) {
	c := &clock{t: time.Now()}
	as := astest.Start(t, astest.Options{Now: c.Now, AccessTTL: time.Hour})
	kit := mcpkit.New("tracker")
	resource := as.Protect(t, "/mcp", server.NewSSEServer(kit.Server, server.WithStaticBasePath("/mcp")))
	st, dir := openSQLite(t)
	r := newRig(t, c, as, resource+"/sse", st, oauth.Server{}, func(sc *mcp.ServerConfig) { sc.Transport = mcp.TransportSSE })
	r.dbDir = dir
	r.connect()
	r.waitUp()
	if out := r.call("over sse"); out.Content != "over sse" {
		t.Fatalf("after the login the SSE server's tool answered %q", out.Content)
	}
	if got := as.TokenRequests()[0].Get("resource"); got != resource {
		t.Errorf("the token was asked for resource %q, want the one the metadata names, %q", got, resource)
	}
	c.Advance(time.Hour - oauth.DefaultRefreshBefore/2)
	if out := r.call("still"); out.Content != "still" || as.Count("refresh") != 1 {
		t.Fatalf("near expiry the SSE server's tool answered %q after %d refreshes", out.Content, as.Count("refresh"))
	}
	r.assertNoSecrets()
}

// A server whose login was revoked goes down and leaves the tool list; a call the model then
// makes to its tool in a new turn (which was never offered it) is answered that an admin must
// log in again, with an audit row naming the server, not "Tool not found"; the Servers page
// says the login was revoked rather than that the token expired.
func TestACallToAToolOfAServerThatLostItsLoginSaysWhyAndNamesTheServer(t *testing.T) {
	r, _, as := connected(t)
	turn := r.turn()
	as.RevokeAll()
	r.callIn(turn, "x") // the server refuses the token; the refresh is refused: the login is spent
	wait.For(t, "the server is marked down for want of a login", func() bool {
		h := r.loader.Health()[0]
		return h.State == tools.ServerDown && strings.Contains(h.LastError, "log in")
	})
	out := r.call("y") // a new turn: the tool is not in its list
	const want = "err: MCP server tracker needs an admin to log in again at /admin/servers"
	if out.Content != want || out.Status != audit.StatusUnavailable {
		t.Fatalf("a call to the tool of a server without a login answered %q (%s), want %q", out.Content, out.Status, want)
	}
	r.audit.mu.Lock()
	last := r.audit.recs[len(r.audit.recs)-1]
	r.audit.mu.Unlock()
	if last.ToolName != "echo" || last.Server != "tracker" || last.Source != audit.SourceMCP || last.Status != audit.StatusUnavailable ||
		!strings.Contains(last.Error, "log in again") {
		t.Fatalf("audit row %+v; want echo of server tracker, unavailable, saying to log in again", last)
	}
	_, page := r.get("/admin/servers")
	if !strings.Contains(page, "the login was revoked or expired at the authorization server") || strings.Contains(page, "the token expired") {
		t.Fatalf("the Servers page does not say the login was revoked:\n%s", page)
	}
}

// Before the first login a server's tools were never listed; a call to a name with its
// tool_prefix is answered that an admin must log in, naming the server.
func TestACallBeforeTheFirstLoginSaysAnAdminMustLogIn(t *testing.T) {
	c := &clock{t: time.Now()}
	as, url := protected(t, c, astest.Options{})
	st, _ := openSQLite(t)
	r := newRig(t, c, as, url, st, oauth.Server{}, func(sc *mcp.ServerConfig) { sc.ToolPrefix = "trk_" })
	wait.For(t, "the server is down for want of a login", func() bool {
		h := r.loader.Health()[0]
		return h.State == tools.ServerDown && strings.Contains(h.LastError, "log in")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := r.turn().Execute(ctx, tools.Call{ToolCall: chat.ToolCall{ID: "c1", Name: "trk_echo", Arguments: `{"text":"x"}`}, Round: 1})
	if !strings.Contains(out.Content, "MCP server tracker needs an admin to log in") || out.Status != audit.StatusUnavailable {
		t.Fatalf("a call before the first login answered %q (%s); want that an admin must log in", out.Content, out.Status)
	}
	out = r.turn().Execute(ctx, tools.Call{ToolCall: chat.ToolCall{ID: "c2", Name: "other_echo", Arguments: `{}`}, Round: 1})
	if out.Status != audit.StatusNotFound {
		t.Fatalf("a name no server carries answered %q (%s); want not found", out.Content, out.Status)
	}
}

// Without a refresh token, a token the server refuses before it expires (revoked, or the
// server restarted and forgot it) spends the login, and the Servers page says the server
// refused it, not that it expired.
func TestATokenRefusedBeforeItExpiresIsNotCalledExpired(t *testing.T) {
	c := &clock{t: time.Now()}
	as, url := protected(t, c, astest.Options{NoRefresh: true, AccessTTL: time.Hour})
	st, _ := openSQLite(t)
	r := newRig(t, c, as, url, st, oauth.Server{})
	r.connect()
	r.waitUp()
	turn := r.turn()
	as.RevokeAll()
	const want = "err: MCP server tracker needs an admin to log in again at /admin/servers"
	if out := r.callIn(turn, "x"); out.Content != want {
		t.Fatalf("with its token refused the tool answered %q, want %q", out.Content, want)
	}
	_, page := r.get("/admin/servers")
	if !strings.Contains(page, "the server refused the token before it expired") || strings.Contains(page, "the token expired") {
		t.Fatalf("the Servers page does not say the server refused the token:\n%s", page)
	}
}
