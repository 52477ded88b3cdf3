// Package oauth runs a loopback OAuth 2.1 authorization server for tests, shaped as the MCP
// authorization spec expects one: RFC 8414 metadata, dynamic client registration (RFC 7591),
// the authorization code flow with PKCE (S256 only), resource indicators (RFC 8707), refresh
// token rotation (a refresh token reused after rotation revokes its whole grant, as OAuth 2.1
// advises) and revocation (RFC 7009). It refuses what a real server refuses: an unknown client
// or redirect URI, a missing or wrong code_verifier, a code used twice, a token for another
// resource. Its answers to authorization requests name it (iss, RFC 9207), as its metadata
// says. Protect puts an MCP endpoint behind it as a resource server (RFC 9728 metadata, a
// Bearer challenge on 401). The authorize endpoint approves at once, as for a signed-in user.
package oauth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options tune Start.
type Options struct {
	// NoRegistration leaves dynamic client registration out of the metadata and refuses it;
	// Clients then holds the pre-registered clients (id → secret, "" for a public client).
	NoRegistration bool
	Clients        map[string]string
	// RedirectURIs of the pre-registered clients; any when empty.
	RedirectURIs []string
	// AccessTTL is the access tokens' lifetime (1 hour when 0).
	AccessTTL time.Duration
	// Now is the clock tokens expire by; nil means time.Now.
	Now func() time.Time
	// Scope is the scope the protected resource asks for in its challenge.
	Scope string
	// ExpiresIn, when not 0, is what the token answers say of expires_in (seconds), whatever
	// AccessTTL: a hostile or broken server's huge value, for a client's clamp.
	ExpiresIn int64
	// NoRefresh issues no refresh token, as some authorization servers do: a login then lasts
	// as long as its access token.
	NoRefresh bool
}

// Server is a running authorization server.
type Server struct {
	// URL is the issuer (the server's root).
	URL  string
	opts Options

	mu       sync.Mutex
	clients  map[string]*registered
	codes    map[string]*codeGrant
	access   map[string]*grant
	refresh  map[string]*grant
	spent    map[string]*grant // rotated refresh tokens: reuse revokes the grant
	counts   map[string]int
	requests []url.Values  // every token request's form, for tests to inspect
	secrets  []string      // every code, token and client secret handed out
	hold     chan struct{} // while set, refresh requests wait for it to close
}

// HoldRefreshes makes refresh requests wait (each counted as "held") until release is called
// or the test ends, so a test can see who else asks for a refresh meanwhile.
func (s *Server) HoldRefreshes(t testing.TB) (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := make(chan struct{})
	s.hold = h
	var once sync.Once
	release = func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.hold == h {
				s.hold = nil
			}
			close(h)
		})
	}
	t.Cleanup(release)
	return release
}

func (s *Server) waitHold() {
	s.mu.Lock()
	h := s.hold
	if h != nil {
		s.counts["held"]++
	}
	s.mu.Unlock()
	if h != nil {
		<-h
	}
}

type registered struct {
	secret    string
	redirects []string
	method    string
}

type codeGrant struct {
	client, redirect, challenge, resource, scope string
	expires                                      time.Time
}

// grant is one login: its current tokens, the resource and scope, and whether it was revoked.
type grant struct {
	client, resource, scope string
	access, refresh         string
	expires                 time.Time
	revoked                 bool
}

// Start runs a server until the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	if o.AccessTTL <= 0 {
		o.AccessTTL = time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{opts: o, clients: map[string]*registered{}, codes: map[string]*codeGrant{},
		access: map[string]*grant{}, refresh: map[string]*grant{}, spent: map[string]*grant{}, counts: map[string]int{}}
	for id, secret := range o.Clients {
		if secret != "" {
			s.secrets = append(s.secrets, secret)
		}
		method := "none"
		if secret != "" {
			method = "client_secret_basic"
		}
		s.clients[id] = &registered{secret: secret, redirects: o.RedirectURIs, method: method}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.metadata)
	mux.HandleFunc("POST /register", s.register)
	mux.HandleFunc("GET /authorize", s.authorize)
	mux.HandleFunc("POST /token", s.token)
	mux.HandleFunc("POST /revoke", s.revoke)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	s.URL = ts.URL
	return s
}

// Count reports how many times something happened: "register", "authorize", "code" (codes
// exchanged), "refresh" (refreshes granted), "refresh_refused", "reuse" (a rotated refresh
// token sent again), "held" (refresh requests held by HoldRefreshes).
func (s *Server) Count(what string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[what]
}

// TokenRequests returns the forms of the token requests received so far.
func (s *Server) TokenRequests() []url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Secrets returns every secret that passed through the server: the codes, access and refresh
// tokens and client secrets it handed out, and the code verifiers and client secrets it was
// sent, for tests that check a secret went nowhere it should not.
func (s *Server) Secrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.secrets)
	for _, f := range s.requests {
		for _, k := range []string{"code_verifier", "client_secret"} {
			if v := f.Get(k); v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

// RevokeAll revokes every grant, as an admin of the authorization server would: access tokens
// stop working and refresh tokens are refused.
func (s *Server) RevokeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.access {
		g.revoked = true
	}
	for _, g := range s.refresh {
		g.revoked = true
	}
}

// Valid reports whether tok is a live access token for resource.
func (s *Server) Valid(tok, resource string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.access[tok]
	return g != nil && !g.revoked && g.access == tok && g.resource == resource && s.opts.Now().Before(g.expires)
}

func (s *Server) metadata(w http.ResponseWriter, _ *http.Request) {
	m := map[string]any{
		"issuer":                           s.URL,
		"authorization_endpoint":           s.URL + "/authorize",
		"token_endpoint":                   s.URL + "/token",
		"revocation_endpoint":              s.URL + "/revoke",
		"response_types_supported":         []string{"code"},
		"grant_types_supported":            []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported": []string{"S256"},
		// RFC 9207: every answer to an authorization request names the server (iss).
		"authorization_response_iss_parameter_supported": true,
		"token_endpoint_auth_methods_supported":          []string{"none", "client_secret_basic", "client_secret_post"},
	}
	if !s.opts.NoRegistration {
		m["registration_endpoint"] = s.URL + "/register"
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	if s.opts.NoRegistration {
		http.NotFound(w, r)
		return
	}
	var req struct {
		RedirectURIs []string `json:"redirect_uris"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
		GrantTypes   []string `json:"grant_types"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", "the body is not JSON")
		return
	}
	if len(req.RedirectURIs) == 0 {
		oauthError(w, http.StatusBadRequest, "invalid_redirect_uri", "redirect_uris is required")
		return
	}
	for _, u := range req.RedirectURIs {
		if p, err := url.Parse(u); err != nil || p.Host == "" || p.Fragment != "" {
			oauthError(w, http.StatusBadRequest, "invalid_redirect_uri", "redirect URIs must be absolute, without a fragment")
			return
		}
	}
	method := req.AuthMethod
	if method == "" {
		method = "client_secret_basic" // RFC 7591 §2's default
	}
	if method != "none" && method != "client_secret_basic" && method != "client_secret_post" {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", "unsupported token_endpoint_auth_method")
		return
	}
	reg := &registered{redirects: req.RedirectURIs, method: method}
	id := random()
	resp := map[string]any{"client_id": id, "redirect_uris": req.RedirectURIs, "token_endpoint_auth_method": method,
		"grant_types": req.GrantTypes, "client_id_issued_at": time.Now().Unix()}
	if method != "none" {
		reg.secret = random()
		resp["client_secret"] = reg.secret
	}
	s.mu.Lock()
	if reg.secret != "" {
		s.secrets = append(s.secrets, reg.secret)
	}
	s.clients[id] = reg
	s.counts["register"]++
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, resp)
}

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	cl := s.clients[q.Get("client_id")]
	redirect := q.Get("redirect_uri")
	if cl == nil || (len(cl.redirects) > 0 && !slices.Contains(cl.redirects, redirect)) || redirect == "" {
		// RFC 6749 §4.1.2.1: never redirect to an unverified URI.
		http.Error(w, "unknown client or redirect_uri", http.StatusBadRequest)
		return
	}
	back := func(params url.Values) {
		params.Set("state", q.Get("state"))
		params.Set("iss", s.URL)
		sep := "?"
		if strings.Contains(redirect, "?") {
			sep = "&"
		}
		http.Redirect(w, r, redirect+sep+params.Encode(), http.StatusFound)
	}
	switch {
	case q.Get("response_type") != "code":
		back(url.Values{"error": {"unsupported_response_type"}})
		return
	case q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43:
		back(url.Values{"error": {"invalid_request"}, "error_description": {"PKCE with S256 is required"}})
		return
	case q.Get("resource") == "":
		back(url.Values{"error": {"invalid_target"}, "error_description": {"resource is required"}})
		return
	}
	code := random()
	s.secrets = append(s.secrets, code)
	s.codes[code] = &codeGrant{client: q.Get("client_id"), redirect: redirect, challenge: q.Get("code_challenge"),
		resource: q.Get("resource"), scope: q.Get("scope"), expires: s.opts.Now().Add(time.Minute)}
	s.counts["authorize"]++
	back(url.Values{"code": {code}})
}

// clientOf authenticates the client of a token request as it registered.
func (s *Server) clientOf(r *http.Request) (string, bool) {
	id, secret, basic := r.BasicAuth()
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	cl := s.clients[id]
	if cl == nil {
		return "", false
	}
	switch cl.method {
	case "none":
		return id, !basic && secret == ""
	case "client_secret_basic":
		return id, basic && secret == cl.secret
	default:
		return id, !basic && secret == cl.secret
	}
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "bad form")
		return
	}
	if r.PostForm.Get("grant_type") == "refresh_token" {
		s.waitHold()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r.PostForm)
	id, ok := s.clientOf(r)
	if !ok {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "client authentication failed")
		return
	}
	now := s.opts.Now()
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		c := s.codes[r.PostForm.Get("code")]
		delete(s.codes, r.PostForm.Get("code")) // single use, even when refused
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		switch {
		case c == nil || c.client != id || !now.Before(c.expires):
			oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown, used or expired code")
		case c.redirect != r.PostForm.Get("redirect_uri"):
			oauthError(w, http.StatusBadRequest, "invalid_grant", "redirect_uri differs from the authorization request's")
		case base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge:
			oauthError(w, http.StatusBadRequest, "invalid_grant", "code_verifier does not match the code_challenge")
		case r.PostForm.Get("resource") != c.resource:
			oauthError(w, http.StatusBadRequest, "invalid_target", "resource differs from the authorization request's")
		default:
			s.counts["code"]++
			s.issue(w, &grant{client: id, resource: c.resource, scope: c.scope})
		}
	case "refresh_token":
		tok := r.PostForm.Get("refresh_token")
		if g := s.spent[tok]; g != nil {
			g.revoked = true // a rotated token used again: someone else may hold it
			s.counts["reuse"]++
			s.counts["refresh_refused"]++
			oauthError(w, http.StatusBadRequest, "invalid_grant", "refresh token already used")
			return
		}
		g := s.refresh[tok]
		switch {
		case g == nil || g.revoked || g.client != id:
			s.counts["refresh_refused"]++
			oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown or revoked refresh token")
		case r.PostForm.Get("resource") != g.resource:
			s.counts["refresh_refused"]++
			oauthError(w, http.StatusBadRequest, "invalid_target", "resource differs from the grant's")
		default:
			delete(s.refresh, tok)
			s.spent[tok] = g
			delete(s.access, g.access)
			s.counts["refresh"]++
			s.issue(w, g)
		}
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "")
	}
}

// issue gives g a new access and refresh token and answers with them. Called with s.mu held.
func (s *Server) issue(w http.ResponseWriter, g *grant) {
	g.access, g.refresh = random(), random()
	s.secrets = append(s.secrets, g.access, g.refresh)
	g.expires = s.opts.Now().Add(s.opts.AccessTTL)
	s.access[g.access] = g
	s.refresh[g.refresh] = g
	w.Header().Set("Cache-Control", "no-store")
	expiresIn := int64(s.opts.AccessTTL / time.Second)
	if s.opts.ExpiresIn != 0 {
		expiresIn = s.opts.ExpiresIn
	}
	answer := map[string]any{"access_token": g.access, "token_type": "Bearer", "expires_in": expiresIn, "scope": g.scope}
	if !s.opts.NoRefresh {
		answer["refresh_token"] = g.refresh
	}
	writeJSON(w, http.StatusOK, answer)
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "bad form")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.clientOf(r); !ok {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "client authentication failed")
		return
	}
	tok := r.PostForm.Get("token")
	if g := s.access[tok]; g != nil {
		g.revoked = true
	}
	if g := s.refresh[tok]; g != nil {
		g.revoked = true
	}
	w.WriteHeader(http.StatusOK) // RFC 7009: also for an unknown token
}

// Protect serves next as a protected MCP resource at path ("/mcp") and below it (an SSE
// server's "/mcp/sse" and "/mcp/message") on its own loopback server, and returns the
// resource's URL (that of path): requests without a live access token issued for it are
// answered 401 with a Bearer challenge naming the resource metadata, which it serves at
// /.well-known/oauth-protected-resource/mcp.
func (s *Server) Protect(t testing.TB, path string, next http.Handler) string {
	t.Helper()
	var resource string
	mux := http.NewServeMux()
	meta := "/.well-known/oauth-protected-resource" + path
	mux.HandleFunc("GET "+meta, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"resource": resource, "authorization_servers": []string{s.URL},
			"scopes_supported": []string{"mcp:tools"}, "bearer_methods_supported": []string{"header"}})
	})
	protect := func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		tok, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok || !s.Valid(tok, resource) {
			challenge := `Bearer resource_metadata="` + strings.TrimSuffix(resource, path) + meta + `"`
			if s.opts.Scope != "" {
				challenge += `, scope="` + s.opts.Scope + `"`
			}
			if auth != "" {
				challenge += `, error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	}
	mux.HandleFunc(path, protect)
	mux.HandleFunc(path+"/", protect) // an SSE server's /mcp/sse and /mcp/message
	ts := httptest.NewServer(mux)
	t.Cleanup(func() {
		ts.CloseClientConnections() // a client's listening stream would hold Close
		ts.Close()
	})
	resource = ts.URL + path
	return resource
}

func random() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="token"`)
	}
	m := map[string]string{"error": code}
	if desc != "" {
		m["error_description"] = desc
	}
	writeJSON(w, status, m)
}
