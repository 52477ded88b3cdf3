package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// maxDocument caps a metadata document or token response.
const maxDocument = 1 << 20

// resourceMeta is the protected resource metadata (RFC 9728) the bot reads.
type resourceMeta struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported"`
}

// serverMeta is the authorization server metadata (RFC 8414 / OpenID Connect Discovery) the bot reads.
type serverMeta struct {
	Issuer string `json:"issuer"`
	// IssuerInAnswer says the server adds iss to its authorization answers (RFC 9207).
	IssuerInAnswer                bool     `json:"authorization_response_iss_parameter_supported"`
	AuthorizationEndpoint         string   `json:"authorization_endpoint"`
	TokenEndpoint                 string   `json:"token_endpoint"`
	RegistrationEndpoint          string   `json:"registration_endpoint"`
	CodeChallengeMethodsSupported []string `json:"code_challenge_methods_supported"`
	TokenEndpointAuthMethods      []string `json:"token_endpoint_auth_methods_supported"`
}

// discovery is what the bot learnt about a server before sending the admin to log in.
type discovery struct {
	resource string
	scopes   []string
	as       serverMeta
}

// discover finds the server's authorization server: it asks the MCP endpoint without a token
// and reads the 401's challenge (resource_metadata, scope), then the protected resource
// metadata (from the challenge, else the well-known URLs), then the authorization server's
// metadata, which must offer PKCE with S256. Every URL on the way must be https, unless the
// admin configured the server as local.
func (s *Source) discover(ctx context.Context) (discovery, error) {
	var d discovery
	srv := s.srv
	if err := s.secureURL(srv.URL); err != nil {
		return d, fmt.Errorf("the MCP server's url: %w", err)
	}
	metaURL, scope, err := s.challenge(ctx, srv.URL)
	if err != nil {
		return d, err
	}
	var candidates []string
	if metaURL != "" {
		candidates = []string{metaURL}
	} else {
		candidates, err = wellKnown(srv.URL, "oauth-protected-resource")
		if err != nil {
			return d, err
		}
	}
	var rm resourceMeta
	var found bool
	for _, u := range candidates {
		if found, err = s.getJSON(ctx, u, &rm); err != nil {
			return d, fmt.Errorf("protected resource metadata %s: %w", u, err)
		}
		if found {
			break
		}
	}
	if !found {
		return d, fmt.Errorf("the server publishes no protected resource metadata (RFC 9728) at %s", strings.Join(candidates, " or "))
	}
	if len(rm.AuthorizationServers) == 0 {
		return d, errors.New("the server's protected resource metadata names no authorization server")
	}
	if !resourceCovers(rm.Resource, srv.URL) {
		return d, fmt.Errorf("the server's protected resource metadata is for %q, not for %s", rm.Resource, srv.URL)
	}
	d.resource = rm.Resource
	switch {
	case len(srv.Scopes) > 0:
		d.scopes = srv.Scopes
	case scope != "":
		d.scopes = strings.Fields(scope)
	default:
		d.scopes = rm.ScopesSupported
	}
	issuer := rm.AuthorizationServers[0]
	if err := s.secureURL(issuer); err != nil {
		return d, fmt.Errorf("the authorization server: %w", err)
	}
	urls, err := serverMetaURLs(issuer)
	if err != nil {
		return d, err
	}
	for _, u := range urls {
		if found, err = s.getJSON(ctx, u, &d.as); err != nil {
			return d, fmt.Errorf("authorization server metadata %s: %w", u, err)
		}
		if found {
			break
		}
	}
	switch {
	case !found:
		return d, fmt.Errorf("the authorization server %s publishes no metadata (RFC 8414 or OpenID Connect) at %s", issuer, strings.Join(urls, ", "))
	case strings.TrimSuffix(d.as.Issuer, "/") != strings.TrimSuffix(issuer, "/"):
		return d, fmt.Errorf("the authorization server's metadata names issuer %q, not %q", d.as.Issuer, issuer)
	case d.as.AuthorizationEndpoint == "" || d.as.TokenEndpoint == "":
		return d, errors.New("the authorization server's metadata lacks an authorization or token endpoint")
	case !slices.Contains(d.as.CodeChallengeMethodsSupported, "S256"):
		// MCP: without code_challenge_methods_supported listing S256 the client must refuse.
		return d, errors.New("the authorization server does not offer PKCE with S256 (code_challenge_methods_supported), which MCP requires")
	}
	for _, u := range []string{d.as.AuthorizationEndpoint, d.as.TokenEndpoint, d.as.RegistrationEndpoint} {
		if err := s.secureURL(u); u != "" && err != nil {
			return d, fmt.Errorf("the authorization server's metadata: %w", err)
		}
	}
	return d, nil
}

// secureURL checks a URL of the login: absolute, and https unless the server is local (MCP's
// authorization spec: every authorization server endpoint is served over HTTPS). Where it
// may connect is the guard's to check, at dial time.
func (s *Source) secureURL(raw string) error {
	if err := httpURL(raw); err != nil {
		return err
	}
	if u, _ := url.Parse(raw); !s.srv.Local && !strings.EqualFold(u.Scheme, "https") {
		return fmt.Errorf("%q is not https (set local = true on a server the admin runs inside)", raw)
	}
	return nil
}

// challenge asks the MCP endpoint for an initialize without a token and returns the
// resource_metadata and scope of the Bearer challenge of its 401 (both "" when it names none).
func (s *Source) challenge(ctx context.Context, endpoint string) (metaURL, scope string, err error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"relaybot","version":"1.0.0"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewBufferString(body))
	if err != nil {
		return "", "", fmt.Errorf("MCP server url: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := s.hc.Do(req)
	if err != nil {
		return "", "", fmt.Errorf("reach the MCP server: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDocument))
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return "", "", nil
	}
	for _, h := range resp.Header.Values("WWW-Authenticate") {
		params := bearerParams(h)
		if params == nil {
			continue
		}
		if u := params["resource_metadata"]; u != "" {
			if err := sameOrigin(u, endpoint); err != nil {
				return "", "", fmt.Errorf("the server's challenge points at resource metadata elsewhere: %w", err)
			}
			metaURL = u
		}
		return metaURL, params["scope"], nil
	}
	return "", "", nil
}

// bearerParams returns the auth-params of a Bearer challenge (RFC 6750 §3), nil when h is
// another scheme's.
func bearerParams(h string) map[string]string {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return nil
	}
	out := map[string]string{}
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimLeft(strings.TrimSpace(rest), ",") {
		rest = strings.TrimSpace(rest)
		name, after, ok := strings.Cut(rest, "=")
		if !ok {
			break
		}
		name = strings.ToLower(strings.TrimSpace(name))
		after = strings.TrimSpace(after)
		var val string
		if strings.HasPrefix(after, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(after) && after[i] != '"'; i++ {
				if after[i] == '\\' && i+1 < len(after) {
					i++
				}
				b.WriteByte(after[i])
			}
			val, rest = b.String(), after[min(i+1, len(after)):]
		} else {
			val, rest, _ = strings.Cut(after, ",")
			val = strings.TrimSpace(val)
		}
		out[name] = val
	}
	return out
}

// wellKnown returns the well-known URLs of a resource's metadata: with the resource's path
// after the well-known name, then at the root (RFC 9728 §3.1; MCP asks for both, in that order).
func wellKnown(resource, name string) ([]string, error) {
	u, err := url.Parse(resource)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("MCP server url %q is not absolute", resource)
	}
	root := u.Scheme + "://" + u.Host + "/.well-known/" + name
	if p := strings.TrimSuffix(u.EscapedPath(), "/"); p != "" {
		return []string{root + p, root}, nil
	}
	return []string{root}, nil
}

// serverMetaURLs lists where an issuer's metadata may be, in the order MCP asks a client to try:
// RFC 8414 then OpenID Connect Discovery, the path after the well-known name, and for an issuer
// with a path also the OpenID Connect form with the well-known name after the path.
func serverMetaURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("the authorization server %q is not an http(s) URL", issuer)
	}
	origin := u.Scheme + "://" + u.Host
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	if p == "" {
		return []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}, nil
	}
	return []string{
		origin + "/.well-known/oauth-authorization-server" + p,
		origin + "/.well-known/openid-configuration" + p,
		origin + p + "/.well-known/openid-configuration",
	}, nil
}

// getJSON reads a metadata document into v; found is false on 404 (and other 4xx), so the next
// candidate URL is tried.
func (s *Source) getJSON(ctx context.Context, u string, v any) (found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		return false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxDocument)).Decode(v); err != nil {
		return false, fmt.Errorf("not JSON metadata: %w", err)
	}
	return true, nil
}

// resourceCovers reports whether the resource of a metadata document is the MCP endpoint or a
// prefix of it on the same origin.
func resourceCovers(resource, endpoint string) bool {
	r, err1 := url.Parse(resource)
	e, err2 := url.Parse(endpoint)
	if err1 != nil || err2 != nil || r.Host == "" {
		return false
	}
	if !strings.EqualFold(r.Scheme, e.Scheme) || !strings.EqualFold(r.Host, e.Host) {
		return false
	}
	rp, ep := strings.TrimSuffix(r.Path, "/"), strings.TrimSuffix(e.Path, "/")
	return rp == "" || ep == rp || strings.HasPrefix(ep, rp+"/")
}

func sameOrigin(a, b string) error {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil || ua.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", a)
	}
	if !strings.EqualFold(ua.Scheme, ub.Scheme) || !strings.EqualFold(ua.Host, ub.Host) {
		return fmt.Errorf("%s is not on %s://%s", a, ub.Scheme, ub.Host)
	}
	return nil
}

func httpURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("%q is not an http(s) URL", s)
	}
	return nil
}
