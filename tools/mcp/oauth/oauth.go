// Package oauth logs the bot into remote MCP servers that need OAuth (auth = "oauth"), as the
// MCP authorization spec (2025-11-25) asks of a client: an admin connects a server once from the
// admin page with the authorization code flow and PKCE (S256); the authorization server is found
// from the server's protected resource metadata (RFC 9728) and its own metadata (RFC 8414, with
// the OpenID Connect fallback); the client registers itself (RFC 7591) unless a client_id is
// configured; every request names the server as the resource (RFC 8707).
//
// Tokens live in the database, sealed with AES-GCM under the key from BOT_SECRET_KEY, so every
// replica uses the same login. A token is refreshed shortly before it expires by one replica at
// a time (a compare-and-set on the record's version claims the refresh), so two replicas never
// both spend a refresh token the authorization server rotates. A login that cannot be refreshed
// is marked "needs login": requests fail at once with ErrNeedsLogin instead of hanging.
//
// Nothing secret (tokens, client secrets, codes, verifiers) is logged or put in an error.
package oauth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"relaybot/internal/outbound"
)

// ErrNeedsLogin is wrapped by the errors of requests to a server whose login is missing or can
// no longer be refreshed: an admin has to connect it again on the admin page.
var ErrNeedsLogin = errors.New("the MCP server needs an admin to log in")

// ErrNeverLoggedIn is wrapped, beside ErrNeedsLogin, by the errors of requests to a server no
// admin has logged in to yet: its first login is missing, not lost.
var ErrNeverLoggedIn = errors.New("no admin has logged in to it yet")

// Store keeps the sealed login records and the logins under way; *store.OAuthQuery implements it.
// Records are opaque text to the store.
type Store interface {
	// OAuthToken returns the sealed record of server and its version (0 and "" when none).
	OAuthToken(ctx context.Context, server string) (sealed string, version int64, err error)
	// SwapOAuthToken writes sealed as server's record if its version is still version (0: no
	// record yet), and reports whether it did.
	SwapOAuthToken(ctx context.Context, server string, version int64, sealed string, now time.Time) (bool, error)
	// PutOAuthState keeps a login under way, keyed by the SHA-256 of its state, until expires.
	PutOAuthState(ctx context.Context, stateHash, server, sealed string, expires, now time.Time) error
	// TakeOAuthState deletes and returns the login under way of stateHash; ok is false when
	// there is none or it had expired at now.
	TakeOAuthState(ctx context.Context, stateHash string, now time.Time) (server, sealed string, ok bool, err error)
}

// Server is one MCP server with auth = "oauth".
type Server struct {
	// Name is the server's name ([[mcp.servers]] name).
	Name string
	// URL is the MCP endpoint; it is the resource the tokens are asked for.
	URL string
	// ClientID, with ClientSecret for a confidential client, is used instead of dynamic client
	// registration when set.
	ClientID     string
	ClientSecret string
	// Scopes are asked for; empty: those of the server's challenge or metadata.
	Scopes []string
	// Local says the admin runs the server inside: its login may reach loopback, private and
	// link-local addresses and use plain http. Without it every URL of the login (the
	// server's, its metadata's, the authorization server's endpoints) must be https on a
	// public address.
	Local bool
}

// Defaults of Options left at zero.
const (
	// DefaultRefreshBefore is how long before its expiry a token is refreshed.
	DefaultRefreshBefore = 2 * time.Minute
	// DefaultLoginTTL is how long a login started on the admin page may take.
	DefaultLoginTTL = 10 * time.Minute
	// claimTTL is how long a replica's claim on a refresh holds; a replica that died while
	// refreshing is taken over after it.
	claimTTL = 30 * time.Second
	// pollEvery is how often a replica waiting for another's refresh reads the record.
	pollEvery = 100 * time.Millisecond
)

// Options configure New.
type Options struct {
	// Servers are the MCP servers with auth = "oauth".
	Servers []Server
	// Store keeps the records. Required.
	Store Store
	// Key is the 32-byte AES-256 key (BOT_SECRET_KEY). Required.
	Key []byte
	// Now is the clock tokens expire by; nil means time.Now.
	Now func() time.Time
	// RefreshBefore is how long before expiry a token is refreshed; 0 means
	// DefaultRefreshBefore (a token living shorter is refreshed after half its life).
	RefreshBefore time.Duration
	// CheckEvery is how often Run looks for tokens to refresh; 0 means DefaultCheckEvery.
	CheckEvery time.Duration
	// Logger receives what happens to the logins, never a secret; nil discards it.
	Logger *slog.Logger
}

// Manager runs the logins of the OAuth MCP servers. It is safe for concurrent use.
type Manager struct {
	opts    Options
	seal    *sealer
	log     *slog.Logger
	sources map[string]*Source
}

// New checks the options and builds the manager.
func New(o Options) (*Manager, error) {
	if o.Store == nil {
		return nil, errors.New("oauth: Options.Store is required")
	}
	seal, err := newSealer(o.Key)
	if err != nil {
		return nil, err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RefreshBefore <= 0 {
		o.RefreshBefore = DefaultRefreshBefore
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{opts: o, seal: seal, log: o.Logger, sources: map[string]*Source{}}
	for _, s := range o.Servers {
		u, err := url.Parse(s.URL)
		if s.Name == "" || err != nil || u.Host == "" {
			return nil, errors.New("oauth: a server needs a name and an absolute url")
		}
		if _, dup := m.sources[s.Name]; dup {
			return nil, fmt.Errorf("oauth: two servers are named %q", s.Name)
		}
		m.sources[s.Name] = &Source{m: m, srv: s, origin: outbound.Origin(u),
			hc:   outbound.Client(outbound.Options{Local: s.Local}, requestTimeout),
			turn: make(chan struct{}, 1), loggedIn: make(chan struct{}), log: o.Logger.With("mcp_server", s.Name)}
	}
	return m, nil
}

// requestTimeout bounds each request of a login: metadata, registration, token.
const requestTimeout = 30 * time.Second

// Source returns the authorizer of a server, or nil when the server is not an OAuth one.
func (m *Manager) Source(server string) *Source { return m.sources[server] }

// Login states a server's login can be in, as LoginState reports them.
const (
	StateConnected    = "connected"
	StateNeedsLogin   = "needs login"
	StateNotConnected = "not connected"
)

// LoginState reports a server's login: StateConnected, StateNeedsLogin (it was connected but
// its token can no longer be refreshed), StateNotConnected, or "" for a server that is not an
// OAuth one. detail says why a login is needed, or until when a token is good.
func (m *Manager) LoginState(ctx context.Context, server string) (state, detail string, err error) {
	src := m.sources[server]
	if src == nil {
		return "", "", nil
	}
	rec, ver, err := src.load(ctx)
	if err != nil {
		return "", "", err
	}
	switch {
	case ver == 0:
		return StateNotConnected, "", nil
	case rec.NeedsLogin != "":
		return StateNeedsLogin, rec.NeedsLogin, nil
	case rec.Refresh == "" && !rec.Expires.IsZero() && !m.opts.Now().Before(rec.Expires):
		return StateNeedsLogin, "the token expired and the authorization server gave no refresh token", nil
	case rec.Expires.IsZero():
		return StateConnected, "", nil
	}
	return StateConnected, "token good until " + rec.Expires.UTC().Format(time.RFC3339), nil
}

// randomString returns n random bytes, base64url without padding.
func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

// Source authorizes one server's requests; tools/mcp uses it as the server's Authorizer.
type Source struct {
	m   *Manager
	srv Server
	// origin is the server's (outbound.Origin): its token goes nowhere else. hc reaches the
	// server, its metadata and its authorization server through the guard (internal/outbound).
	origin string
	hc     *http.Client
	log    *slog.Logger
	turn   chan struct{} // held while reading or refreshing the token: one at a time per process

	mu       sync.Mutex
	rejected string        // an access token the server refused: refresh it even if not expired
	loggedIn chan struct{} // closed (and replaced) when an admin logs in through this process
}

// LoggedIn returns a channel closed when an admin next completes a login of this server on
// this replica, so a connection that failed for want of one may try again at once.
func (s *Source) LoggedIn() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loggedIn
}

func (s *Source) notifyLogin() {
	s.mu.Lock()
	close(s.loggedIn)
	s.loggedIn = make(chan struct{})
	s.rejected = ""
	s.mu.Unlock()
}
