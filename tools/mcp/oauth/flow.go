package oauth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Begin starts a login of server for the admin page: it discovers the authorization server,
// registers the bot as a client unless a client_id is configured, keeps the PKCE verifier and
// state in the database (the callback may reach another replica) and returns the URL to send
// the admin's browser to. redirectURI is the admin page's callback for this server alone (one
// per server, so that one server's authorization server cannot take a login meant for
// another's).
func (m *Manager) Begin(ctx context.Context, server, redirectURI string) (string, error) {
	src := m.sources[server]
	if src == nil {
		return "", fmt.Errorf("MCP server %q does not log in with OAuth", server)
	}
	d, err := src.discover(ctx)
	if err != nil {
		return "", fmt.Errorf("connect %s: %w", server, err)
	}
	cl, err := src.client(ctx, d, redirectURI)
	if err != nil {
		return "", fmt.Errorf("connect %s: %w", server, err)
	}
	p := pending{Client: cl, Verifier: randomString(32), RedirectURI: redirectURI,
		Issuer: d.as.Issuer, IssuerAnswers: d.as.IssuerInAnswer}
	state := randomString(32)
	sealed, err := m.seal.seal("state:"+server, p)
	if err != nil {
		return "", err
	}
	now := m.opts.Now()
	if err := m.opts.Store.PutOAuthState(ctx, hashState(state), server, sealed, now.Add(DefaultLoginTTL), now); err != nil {
		return "", fmt.Errorf("connect %s: %w", server, err)
	}
	sum := sha256.Sum256([]byte(p.Verifier))
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {cl.ID},
		"redirect_uri":          {redirectURI},
		"state":                 {state},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
		"resource":              {cl.Resource},
	}
	if len(d.scopes) > 0 {
		q.Set("scope", strings.Join(d.scopes, " "))
	}
	authURL := d.as.AuthorizationEndpoint
	if strings.Contains(authURL, "?") {
		authURL += "&" + q.Encode()
	} else {
		authURL += "?" + q.Encode()
	}
	src.log.Info("MCP OAuth login started", "authorization_server", d.as.Issuer, "registered", src.srv.ClientID == "")
	return authURL, nil
}

// Finish completes a login with what the authorization server sent the admin's browser back
// with to the redirect URI of server (at): the query's state, its code or error (with
// error_description), and iss. The state must be one this bot issued for that server, and the
// answer must come from the authorization server the admin was sent to: its iss when it sends
// one (and it must when its metadata says it does, RFC 9207). It returns the server the login
// was for, also when it failed, once the state is known.
func (m *Manager) Finish(ctx context.Context, at string, answer url.Values) (server string, err error) {
	cb := struct{ State, Code, Error, ErrorDescription, Issuer string }{answer.Get("state"), answer.Get("code"),
		answer.Get("error"), answer.Get("error_description"), answer.Get("iss")}
	if cb.State == "" {
		return "", errors.New("the authorization server's answer carries no state")
	}
	now := m.opts.Now()
	server, sealed, ok, err := m.opts.Store.TakeOAuthState(ctx, hashState(cb.State), now)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", errors.New("this login is unknown, already used or expired: start it again from the Servers page")
	}
	src := m.sources[server]
	if src == nil {
		return server, fmt.Errorf("MCP server %q no longer logs in with OAuth", server)
	}
	if at != server {
		return server, fmt.Errorf("the answer for the login of %s came back to the address of %q: refused, start it again from the Servers page", server, at)
	}
	var p pending
	if err := m.seal.open("state:"+server, sealed, &p); err != nil {
		return server, err
	}
	switch {
	case cb.Issuer == "" && p.IssuerAnswers:
		return server, fmt.Errorf("the answer carries no iss, which the authorization server %s promises (RFC 9207): refused", p.Issuer)
	case cb.Issuer != "" && cb.Issuer != p.Issuer:
		return server, fmt.Errorf("the answer comes from the authorization server %q, not from %s where the login began (RFC 9207): refused", cb.Issuer, p.Issuer)
	case cb.Error != "":
		return server, fmt.Errorf("the authorization server refused: %s", oauthErrorText(cb.Error, cb.ErrorDescription))
	case cb.Code == "":
		return server, errors.New("the authorization server's answer carries no code")
	}
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {cb.Code},
		"redirect_uri":  {p.RedirectURI},
		"code_verifier": {p.Verifier},
	}
	tok, err := src.token(ctx, p.Client, form)
	if err != nil {
		return server, fmt.Errorf("exchange the code: %w", err)
	}
	rec := record{Client: p.Client}
	rec.apply(tok, now)
	if err := src.store(ctx, rec); err != nil {
		return server, err
	}
	src.notifyLogin()
	src.log.Info("MCP OAuth login completed", "expires", rec.Expires, "refreshable", rec.Refresh != "")
	return server, nil
}

func hashState(state string) string {
	sum := sha256.Sum256([]byte(state))
	return hex.EncodeToString(sum[:])
}

// client returns the client the bot logs in as: the configured client_id, else one registered
// now (RFC 7591) for redirectURI.
func (s *Source) client(ctx context.Context, d discovery, redirectURI string) (client, error) {
	srv := s.srv
	cl := client{TokenEndpoint: d.as.TokenEndpoint, Resource: d.resource}
	if srv.ClientID != "" {
		cl.ID, cl.Secret = srv.ClientID, srv.ClientSecret
		cl.AuthMethod = authMethod(cl.Secret, d.as.TokenEndpointAuthMethods)
		return cl, nil
	}
	if d.as.RegistrationEndpoint == "" {
		return cl, errors.New("the authorization server offers no dynamic client registration: register the bot there and set client_id (and client_secret) in its [[mcp.servers]] entry")
	}
	body, _ := json.Marshal(map[string]any{
		"client_name":                "relaybot",
		"redirect_uris":              []string{redirectURI},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.as.RegistrationEndpoint, bytes.NewReader(body))
	if err != nil {
		return cl, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := s.hc.Do(req)
	if err != nil {
		return cl, fmt.Errorf("register the client: %w", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxDocument))
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		text, _ := errorOf(raw)
		return cl, fmt.Errorf("register the client: HTTP %d%s", resp.StatusCode, text)
	}
	var reg struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		AuthMethod   string `json:"token_endpoint_auth_method"`
	}
	if err := json.Unmarshal(raw, &reg); err != nil || reg.ClientID == "" {
		return cl, errors.New("register the client: the answer carries no client_id")
	}
	cl.ID, cl.Secret = reg.ClientID, reg.ClientSecret
	cl.AuthMethod = reg.AuthMethod
	if cl.AuthMethod == "" {
		cl.AuthMethod = authMethod(cl.Secret, d.as.TokenEndpointAuthMethods)
	}
	return cl, nil
}

// authMethod picks how a client with secret authenticates at the token endpoint: none without
// a secret; else HTTP Basic, unless the server lists only client_secret_post.
func authMethod(secret string, supported []string) string {
	switch {
	case secret == "":
		return "none"
	case len(supported) > 0 && !slices.Contains(supported, "client_secret_basic") && slices.Contains(supported, "client_secret_post"):
		return "client_secret_post"
	}
	return "client_secret_basic"
}

// maxExpiresIn caps a token's lifetime as the bot counts it (seconds): a year.
const maxExpiresIn = 365 * 24 * 60 * 60

// tokenResponse is a token endpoint's answer (RFC 6749 §5.1).
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	RefreshToken string `json:"refresh_token"`
	ExpiresIn    int64  `json:"expires_in"`
	Scope        string `json:"scope"`
}

// apply puts a token response into r, keeping the old refresh token when none came (no rotation).
func (r *record) apply(t tokenResponse, now time.Time) {
	r.Access, r.Type, r.Scope = t.AccessToken, t.TokenType, t.Scope
	if t.RefreshToken != "" {
		r.Refresh = t.RefreshToken
	}
	r.Expires = time.Time{}
	if t.ExpiresIn > 0 {
		// Clamped: a huge expires_in would overflow into a time in the past, and every use of
		// the token would refresh it.
		r.Expires = now.Add(time.Duration(min(t.ExpiresIn, maxExpiresIn)) * time.Second)
	}
	r.NeedsLogin, r.ClaimedUntil = "", time.Time{}
}

// tokenError is a token endpoint's refusal. Refused says the grant itself was refused (the
// login must be renewed), not that the endpoint could not be reached.
type tokenError struct {
	status int
	text   string
	// code is the OAuth error code the endpoint gave ("invalid_grant"), "" when none.
	code string
}

func (e *tokenError) Error() string { return e.text }

// refused reports whether the authorization server refused the grant (400 or 401, RFC 6749
// §5.2), so retrying with the same refresh token is pointless.
func (e *tokenError) refused() bool {
	return e.status == http.StatusBadRequest || e.status == http.StatusUnauthorized
}

// token posts a grant to the token endpoint, with the client's authentication and the resource.
func (s *Source) token(ctx context.Context, cl client, form url.Values) (tokenResponse, error) {
	var t tokenResponse
	form.Set("resource", cl.Resource)
	if cl.AuthMethod != "client_secret_basic" {
		form.Set("client_id", cl.ID)
	}
	if cl.AuthMethod == "client_secret_post" {
		form.Set("client_secret", cl.Secret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cl.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return t, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if cl.AuthMethod == "client_secret_basic" {
		req.SetBasicAuth(url.QueryEscape(cl.ID), url.QueryEscape(cl.Secret))
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return t, fmt.Errorf("reach the token endpoint: %w", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxDocument))
	if resp.StatusCode != http.StatusOK {
		text, code := errorOf(raw)
		return t, &tokenError{status: resp.StatusCode, text: "the token endpoint answered HTTP " + strconv.Itoa(resp.StatusCode) + text, code: code}
	}
	if err := json.Unmarshal(raw, &t); err != nil || t.AccessToken == "" {
		return t, &tokenError{status: resp.StatusCode, text: "the token endpoint's answer carries no access_token"}
	}
	if t.TokenType != "" && !strings.EqualFold(t.TokenType, "bearer") {
		return t, &tokenError{status: resp.StatusCode, text: fmt.Sprintf("the token endpoint issued a %q token; MCP takes bearer tokens", t.TokenType)}
	}
	return t, nil
}

// errorOf returns ": error (description)" of an OAuth error body, or "" for any other body: a
// body is never quoted whole, since it might echo a secret.
// errorOf is the text of an OAuth error answer (": code: description") and its code.
func errorOf(raw []byte) (text, code string) {
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal(raw, &e) != nil || e.Error == "" {
		return "", ""
	}
	return ": " + oauthErrorText(e.Error, e.Description), e.Error
}

func oauthErrorText(code, desc string) string {
	clean := func(s string, n int) string {
		s = strings.Map(func(r rune) rune {
			if r < ' ' || r == 0x7f {
				return ' '
			}
			return r
		}, s)
		if len(s) > n {
			s = s[:n]
		}
		return s
	}
	if desc == "" {
		return clean(code, 64)
	}
	return clean(code, 64) + " (" + clean(desc, 200) + ")"
}
