package admin

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

const (
	sessionCookie = "relaybot_session"
	// sessionTTL is how long a login lasts.
	sessionTTL = 12 * time.Hour
	// maxSessions caps the session map so repeated logins cannot grow it without bound.
	maxSessions = 1024
)

// session is one logged-in browser.
type session struct {
	csrf    string
	expires time.Time
}

// sessions is the server-side map of logged-in browsers, keyed by the random id in the cookie.
type sessions struct {
	mu  sync.Mutex
	m   map[string]session
	now func() time.Time
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{m: map[string]session{}, now: now}
}

// randomToken returns 32 random bytes, base64url-encoded.
func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session and returns its id.
func (s *sessions) create() (string, session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for id, ss := range s.m {
		if now.After(ss.expires) {
			delete(s.m, id)
		}
	}
	if len(s.m) >= maxSessions {
		// Drop the session closest to expiry to make room.
		var oldest string
		for id, ss := range s.m {
			if oldest == "" || ss.expires.Before(s.m[oldest].expires) {
				oldest = id
			}
		}
		delete(s.m, oldest)
	}
	id := randomToken()
	ss := session{csrf: randomToken(), expires: now.Add(sessionTTL)}
	s.m[id] = ss
	return id, ss
}

// get returns the live session with id.
func (s *sessions) get(id string) (session, bool) {
	if id == "" {
		return session{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.m[id]
	if !ok {
		return session{}, false
	}
	if s.now().After(ss.expires) {
		delete(s.m, id)
		return session{}, false
	}
	return ss, true
}

func (s *sessions) remove(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// equalSecret compares two secrets in constant time (for equal lengths; the length itself is
// not secret enough to matter for random tokens, and the admin token's length leaks nothing useful).
func equalSecret(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// bearerToken returns the token of an "Authorization: Bearer TOKEN" header.
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	return strings.TrimSpace(h[len(prefix):]), true
}

// isLoopbackListen reports whether a listen address ("host:port") only accepts connections from
// this machine: a loopback IP or "localhost". An empty host listens on every interface.
func isLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	return isLoopbackHost(host)
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
