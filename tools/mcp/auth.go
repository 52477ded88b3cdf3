package mcp

import (
	"errors"
	"net/http"

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
// to do, and nothing secret.
type needsLoginError struct{ server string }

func (e *needsLoginError) Error() string {
	return "MCP server " + e.server + " needs an admin to log in again at /admin/servers"
}

func (e *needsLoginError) Unwrap() error { return oauth.ErrNeedsLogin }

func needsLogin(err error) bool { return errors.Is(err, oauth.ErrNeedsLogin) }

// authWake returns the channel that ends a backoff early when an admin logs in; nil (never
// ready) for a server without an Authorizer.
func (s *serverConn) authWake() <-chan struct{} {
	if s.cfg.Auth == nil {
		return nil
	}
	return s.cfg.Auth.LoggedIn()
}
