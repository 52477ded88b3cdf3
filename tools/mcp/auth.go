package mcp

import (
	"errors"
	"fmt"
	"net/http"
	"sync"

	"relaybot/tools"
	"relaybot/tools/mcp/oauth"
)

// Authorizer authorizes the HTTP requests to a remote server (auth = "oauth":
// *oauth.Source). Requests it cannot authorize fail with an error wrapping oauth.ErrNeedsLogin.
type Authorizer interface {
	// Transport wraps base so that every request carries the server's credentials.
	Transport(base http.RoundTripper) http.RoundTripper
	// LoggedIn is closed when an admin completes a login, so a server that was down for want
	// of one connects again at once instead of after its backoff.
	LoggedIn() <-chan struct{}
}

// needsLoginError is what a call to a server without a usable login fails with: it says what
// to do, and nothing secret. first: no admin has logged in to it yet (not "again").
type needsLoginError struct {
	server string
	first  bool
}

func (e *needsLoginError) Error() string {
	if e.first {
		return "MCP server " + e.server + " needs an admin to log in at /admin/servers (no one has yet)"
	}
	return "MCP server " + e.server + " needs an admin to log in again at /admin/servers"
}

// Unwrap makes the error match oauth.ErrNeedsLogin and tools.ErrUnavailable.
func (e *needsLoginError) Unwrap() []error { return []error{oauth.ErrNeedsLogin, tools.ErrUnavailable} }

func needsLogin(err error) bool { return errors.Is(err, oauth.ErrNeedsLogin) }

// neverLoggedIn reports whether err is for want of a first login (no admin has logged in yet).
func neverLoggedIn(err error) bool { return errors.Is(err, oauth.ErrNeverLoggedIn) }

// authWake returns the channel that ends a backoff early when an admin logs in; nil (never
// ready) for a server without an Authorizer.
func (s *serverConn) authWake() <-chan struct{} {
	if s.cfg.Auth == nil {
		return nil
	}
	return s.cfg.Auth.LoggedIn()
}

// loginWatch passes requests to an Authorizer's transport and drops the session when one fails
// for want of a login, so a server whose login was spent while no call was running (the
// listening stream reconnecting, a refresh refused in the background) goes down and waits for
// an admin instead of retrying.
type loginWatch struct {
	next http.RoundTripper

	mu   sync.Mutex
	lost func(error) // set once the session exists
}

func (w *loginWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.next.RoundTrip(req)
	if err != nil && needsLogin(err) {
		w.mu.Lock()
		lost := w.lost
		w.mu.Unlock()
		if lost != nil {
			lost(err)
		}
	}
	return resp, err
}

func (w *loginWatch) watch(sess *session) {
	w.mu.Lock()
	w.lost = func(err error) { sess.markLost(fmt.Errorf("the OAuth login is no longer valid: %w", err)) }
	w.mu.Unlock()
}
