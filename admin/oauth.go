package admin

import (
	"context"
	"net/http"
	"net/url"
	"strings"
)

// OAuthLogins connects the MCP servers that log in with OAuth (auth = "oauth");
// tools/mcp/oauth.Manager implements it. Its errors and states never carry a secret.
type OAuthLogins interface {
	// LoginState reports a server's login ("connected", "needs login", "not connected"; "" for
	// a server without OAuth) and a detail for people.
	LoginState(ctx context.Context, server string) (state, detail string, err error)
	// Begin starts a login and returns the authorization server's URL to send the browser to;
	// the browser comes back to redirectURI.
	Begin(ctx context.Context, server, redirectURI string) (string, error)
	// Finish completes a login with what the browser came back with: the server whose
	// redirect URI it reached and the query (state, code or error and error_description,
	// iss); it returns the server the login was for.
	Finish(ctx context.Context, server string, answer url.Values) (string, error)
}

// oauthCallbackPath is where authorization servers send the admin's browser back, followed by
// the server's name: each server has its own redirect URI, so an authorization server cannot
// answer for a login meant for another server's.
const oauthCallbackPath = "/admin/oauth/callback/"

// callbackURL is the redirect URI of server's login begun by r: on admin.public_url when set,
// else on the host the browser asked for.
func (s *Server) callbackURL(r *http.Request, server string) string {
	path := oauthCallbackPath + url.PathEscape(server)
	if s.opts.PublicURL != "" {
		return strings.TrimSuffix(s.opts.PublicURL, "/") + path
	}
	scheme := "http"
	if r.TLS != nil || s.proxies.Secure(r) {
		scheme = "https"
	}
	return scheme + "://" + r.Host + path
}

// oauthConnect sends a logged-in admin to the authorization server of a server.
func (s *Server) oauthConnect(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if s.opts.OAuth == nil {
		s.errorPage(w, r, http.StatusNotFound, "No MCP server logs in with OAuth.")
		return
	}
	state, _, err := s.opts.OAuth.LoginState(r.Context(), name)
	if err == nil && state == "" {
		s.errorPage(w, r, http.StatusNotFound, "MCP server "+name+" does not log in with OAuth (set auth = \"oauth\" in its [[mcp.servers]] entry).")
		return
	}
	authURL, err := s.opts.OAuth.Begin(r.Context(), name, s.callbackURL(r, name))
	if err != nil {
		s.log.Warn("admin: MCP OAuth login could not start", "mcp_server", name, "err", err)
		s.errorPage(w, r, http.StatusBadGateway, "The login of "+name+" could not start: "+err.Error())
		return
	}
	http.Redirect(w, r, authURL, http.StatusSeeOther)
}

type oauthDoneData struct {
	pageData
	Server string
	Error  string
}

// oauthCallback completes a login. It needs no session: the browser arrives from the
// authorization server's site, so the SameSite=Strict cookie is not sent; the single-use state,
// issued to a logged-in admin a few minutes before, is what it checks. It shows a page with a
// link back rather than redirecting, for the same reason.
func (s *Server) oauthCallback(w http.ResponseWriter, r *http.Request) {
	if s.opts.OAuth == nil {
		s.errorPage(w, r, http.StatusNotFound, "No MCP server logs in with OAuth.")
		return
	}
	server, err := s.opts.OAuth.Finish(r.Context(), r.PathValue("name"), r.URL.Query())
	data := oauthDoneData{pageData: s.page(r, "MCP server login"), Server: server}
	data.Nav = "servers"
	status := http.StatusOK
	if err != nil {
		s.log.Warn("admin: MCP OAuth login failed", "mcp_server", server, "err", err)
		data.Error = err.Error()
		status = http.StatusBadRequest
	} else {
		s.log.Info("admin: MCP OAuth login completed", "mcp_server", server)
	}
	s.render(w, r, status, "oauth", data)
}

// connectURL is the Servers page's link that starts a login of server.
func connectURL(server string) string {
	return "/admin/servers/" + url.PathEscape(server) + "/connect"
}

// withLogins fills in the login state of the OAuth servers.
func (s *Server) withLogins(ctx context.Context, hs []ServerHealth) {
	if s.opts.OAuth == nil {
		return
	}
	for i := range hs {
		state, detail, err := s.opts.OAuth.LoginState(ctx, hs[i].Name)
		if err != nil {
			s.log.Warn("admin: read an MCP server's OAuth login", "mcp_server", hs[i].Name, "err", err)
			state, detail = "unknown", "the login could not be read (see the bot's log)"
		}
		hs[i].Login, hs[i].LoginDetail = state, detail
	}
}
