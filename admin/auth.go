package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"relaybot/store"
)

const (
	sessionCookie = "relaybot_session"
	// sessionTTL is how long a login lasts.
	sessionTTL = 12 * time.Hour
	// maxSessions caps the sessions so repeated logins cannot grow them without bound.
	maxSessions = 1024
)

// session is one logged-in browser.
type session struct {
	csrf    string
	expires time.Time
}

// Sessions keeps the admins' login sessions by the SHA-256 of the session cookie (the cookie
// itself is never handed over). *store.AdminSessionQuery implements it: a login is then valid on every
// replica that shares the database, and a logout ends it on all of them. Without it
// (Options.Sessions nil) the server keeps its sessions in its own memory. Methods are called
// from request handlers with the request's context.
type Sessions interface {
	// StartAdminSession stores a new session, first dropping those expired at now and, when
	// keep or more would remain, those closest to expiry.
	StartAdminSession(ctx context.Context, idHash string, ss store.AdminSession, now time.Time, keep int) error
	// AdminSession returns the session, and false when it is unknown or expired at now.
	AdminSession(ctx context.Context, idHash string, now time.Time) (store.AdminSession, bool, error)
	// EndAdminSession deletes the session; an unknown one is no error.
	EndAdminSession(ctx context.Context, idHash string) error
}

// memorySessions is the Sessions of a server given none: a map in this process.
type memorySessions struct {
	mu sync.Mutex
	m  map[string]store.AdminSession
}

func newMemorySessions() *memorySessions {
	return &memorySessions{m: map[string]store.AdminSession{}}
}

// StartAdminSession implements Sessions.
func (s *memorySessions) StartAdminSession(_ context.Context, idHash string, ss store.AdminSession, now time.Time, keep int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, old := range s.m {
		if !now.Before(old.ExpiresAt) {
			delete(s.m, id)
		}
	}
	for keep > 0 && len(s.m) >= keep {
		// Drop the session closest to expiry to make room.
		var oldest string
		for id, old := range s.m {
			if oldest == "" || old.ExpiresAt.Before(s.m[oldest].ExpiresAt) {
				oldest = id
			}
		}
		delete(s.m, oldest)
	}
	s.m[idHash] = ss
	return nil
}

// AdminSession implements Sessions.
func (s *memorySessions) AdminSession(_ context.Context, idHash string, now time.Time) (store.AdminSession, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.m[idHash]
	if !ok || !now.Before(ss.ExpiresAt) {
		return store.AdminSession{}, false, nil
	}
	return ss, true, nil
}

// EndAdminSession implements Sessions.
func (s *memorySessions) EndAdminSession(_ context.Context, idHash string) error {
	s.mu.Lock()
	delete(s.m, idHash)
	s.mu.Unlock()
	return nil
}

// randomToken returns 32 random bytes, base64url-encoded.
func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// hashCookie is what Sessions keeps of a session cookie.
func hashCookie(cookie string) string {
	sum := sha256.Sum256([]byte(cookie))
	return hex.EncodeToString(sum[:])
}

// startSession starts a session and returns its cookie value.
func (s *Server) startSession(ctx context.Context) (string, error) {
	cookie := randomToken()
	now := s.now()
	ss := store.AdminSession{CSRF: randomToken(), ExpiresAt: now.Add(sessionTTL)}
	if err := s.sessions.StartAdminSession(ctx, hashCookie(cookie), ss, now, maxSessions); err != nil {
		return "", fmt.Errorf("admin: start a session: %w", err)
	}
	return cookie, nil
}

// session returns the live session whose cookie value is cookie.
func (s *Server) session(ctx context.Context, cookie string) (session, bool, error) {
	if cookie == "" {
		return session{}, false, nil
	}
	ss, ok, err := s.sessions.AdminSession(ctx, hashCookie(cookie), s.now())
	if err != nil || !ok {
		return session{}, false, err
	}
	return session{csrf: ss.CSRF, expires: ss.ExpiresAt}, true, nil
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
