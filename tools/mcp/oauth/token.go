package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"relaybot/internal/outbound"
)

// load reads and opens the server's record; ver is 0 when there is none.
func (s *Source) load(ctx context.Context) (rec record, ver int64, err error) {
	sealed, ver, err := s.m.opts.Store.OAuthToken(ctx, s.srv.Name)
	if err != nil || ver == 0 {
		return rec, ver, err
	}
	if err := s.m.seal.open("token:"+s.srv.Name, sealed, &rec); err != nil {
		return rec, ver, err
	}
	return rec, ver, nil
}

// swap writes rec over version ver; false when another replica wrote first.
func (s *Source) swap(ctx context.Context, ver int64, rec record) (bool, error) {
	sealed, err := s.m.seal.seal("token:"+s.srv.Name, rec)
	if err != nil {
		return false, err
	}
	return s.m.opts.Store.SwapOAuthToken(ctx, s.srv.Name, ver, sealed, s.m.opts.Now())
}

// store writes rec whatever the record holds now (a new login replaces the old one).
func (s *Source) store(ctx context.Context, rec record) error {
	for {
		_, ver, err := s.m.opts.Store.OAuthToken(ctx, s.srv.Name)
		if err != nil {
			return err
		}
		ok, err := s.swap(ctx, ver, rec)
		if err != nil || ok {
			return err
		}
	}
}

// needsLogin is the error of a server whose login is missing or spent.
func (s *Source) needsLogin(why string) error {
	return fmt.Errorf("%w (%s): %s", ErrNeedsLogin, s.srv.Name, why)
}

// Authorization returns the Authorization header for a request to the server, refreshing the
// token first when it expires within the refresh margin (or the server refused it). Callers in
// one process take turns; across replicas, the one whose compare-and-set claims the refresh
// does it and the others wait for its result by reading the record. It fails with an error
// wrapping ErrNeedsLogin when there is no usable login, and blocks at most until ctx ends.
func (s *Source) Authorization(ctx context.Context) (string, error) {
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-s.turn }()
	for {
		rec, ver, err := s.load(ctx)
		switch {
		case err != nil:
			return "", err
		case ver == 0:
			return "", fmt.Errorf("%w (%s): %w", ErrNeedsLogin, s.srv.Name, ErrNeverLoggedIn)
		case rec.NeedsLogin != "":
			return "", s.needsLogin(rec.NeedsLogin)
		}
		now := s.m.opts.Now()
		expired := !rec.Expires.IsZero() && !now.Before(rec.Expires)
		if !s.due(rec, now) {
			return "Bearer " + rec.Access, nil
		}
		if rec.Refresh == "" {
			if !expired && !s.isRejected(rec.Access) {
				return "Bearer " + rec.Access, nil // good until it expires; nothing to refresh it with
			}
			rec.NeedsLogin = spentWithoutRefresh(expired)
			if _, err := s.swap(ctx, ver, rec); err != nil {
				return "", err
			}
			continue
		}
		if rec.ClaimedUntil.After(now) {
			// Another replica is refreshing: use the token while it lasts, else wait for it.
			if !expired && !s.isRejected(rec.Access) {
				return "Bearer " + rec.Access, nil
			}
			if err := pause(ctx); err != nil {
				return "", err
			}
			continue
		}
		claim := rec
		claim.ClaimedUntil = now.Add(claimTTL)
		ok, err := s.swap(ctx, ver, claim)
		if err != nil {
			return "", err
		}
		if !ok {
			continue // another replica wrote first: read what it wrote
		}
		if err := s.refresh(ctx, rec, ver+1); err != nil {
			return "", err
		}
	}
}

// due reports whether rec's token must be refreshed before use: it expires within the margin
// (half its life for short-lived tokens), or the server refused it.
func (s *Source) due(rec record, now time.Time) bool {
	if s.isRejected(rec.Access) {
		return true
	}
	if rec.Expires.IsZero() {
		return false
	}
	margin := s.m.opts.RefreshBefore
	return !now.Before(rec.Expires.Add(-margin))
}

// refresh spends rec's refresh token, holding the claim written as version ver, and writes the
// outcome: the new tokens, or "needs login" when the authorization server refused the grant.
// A failure to reach it leaves the old token (and lifts the claim) for the next attempt.
func (s *Source) refresh(ctx context.Context, rec record, ver int64) error {
	// The refresh is not abandoned with the caller: the server may rotate the refresh token,
	// and giving up mid-way would lose the new one.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTTL)
	defer cancel()
	tok, err := s.token(rctx, rec.Client, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rec.Refresh}})
	now := s.m.opts.Now()
	var te *tokenError
	switch {
	case err == nil:
		rec.apply(tok, now)
		s.clearRejected()
		s.log.Info("MCP OAuth token refreshed", "expires", rec.Expires)
	case errors.As(err, &te) && te.refused():
		rec.NeedsLogin = refusedRefresh(te)
		rec.ClaimedUntil = time.Time{}
		s.log.Warn("MCP OAuth token cannot be refreshed; an admin must connect the server again at /admin/servers", "err", te.text)
	default:
		rec.ClaimedUntil = time.Time{}
		s.log.Warn("MCP OAuth token refresh failed; will try again", "err", err)
		if _, serr := s.swap(rctx, ver, rec); serr != nil {
			return serr
		}
		return fmt.Errorf("refresh the OAuth token of %s: %w", s.srv.Name, err)
	}
	if _, err := s.swap(rctx, ver, rec); err != nil {
		return err
	}
	return nil
}

// spentWithoutRefresh says why a login without a refresh token is spent: its token expired, or
// the server refused it before then (revoked, or the server forgot its logins in a restart).
func spentWithoutRefresh(expired bool) string {
	if expired {
		return "the token expired and the authorization server gave no refresh token"
	}
	return "the server refused the token before it expired (revoked, or the server restarted and forgot it), " +
		"and the authorization server gave no refresh token"
}

// refusedRefresh says why a refresh the authorization server refused spent the login: an
// invalid_grant is a refresh token revoked, expired or already used (RFC 6749 §5.2); anything
// else is a refusal of the client.
func refusedRefresh(te *tokenError) string {
	if te.code == "invalid_grant" {
		return "the login was revoked or expired at the authorization server (it refused to refresh the token: " + te.text + ")"
	}
	return "the authorization server refused to refresh the token: " + te.text
}

func pause(ctx context.Context) error {
	t := time.NewTimer(pollEvery)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Source) isRejected(access string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejected != "" && s.rejected == access
}

func (s *Source) reject(header string) {
	s.mu.Lock()
	s.rejected = header[len("Bearer "):]
	s.mu.Unlock()
}

func (s *Source) clearRejected() {
	s.mu.Lock()
	s.rejected = ""
	s.mu.Unlock()
}

// Transport returns base with every request authorized by the server's login. A 401 answer
// makes the token due for a refresh and, when the request can be sent again, sends it once
// more with the refreshed token; a login that is missing or spent fails the request with an
// error wrapping ErrNeedsLogin before anything is sent. The token goes to the server's origin
// only: a request elsewhere (a redirect, an endpoint the server names) fails with an error
// wrapping outbound.ErrCrossOrigin, and nothing is sent.
func (s *Source) Transport(base http.RoundTripper) http.RoundTripper {
	return &transport{src: s, base: base}
}

type transport struct {
	src  *Source
	base http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if o := outbound.Origin(req.URL); o != t.src.origin {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("%w: the OAuth token of %s is not sent to %s", outbound.ErrCrossOrigin, t.src.srv.Name, o)
	}
	for attempt := 0; ; attempt++ {
		header, err := t.src.Authorization(req.Context())
		if err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, err
		}
		r := req.Clone(req.Context())
		if attempt > 0 {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r.Body = body
		}
		r.Header.Set("Authorization", header)
		resp, err := t.base.RoundTrip(r)
		if err != nil || resp.StatusCode != http.StatusUnauthorized {
			return resp, err
		}
		t.src.reject(header)
		if attempt > 0 || (req.Body != nil && req.GetBody == nil) {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDocument))
		resp.Body.Close()
	}
}

// DefaultCheckEvery is how often Run looks for tokens to refresh.
const DefaultCheckEvery = 30 * time.Second

// Run refreshes the servers' tokens as they come within the refresh margin of their expiry,
// also while no request needs them, so an idle bot's login stays fresh and one whose refresh is
// refused shows "needs login" on the Servers page before anyone calls its tools. It returns nil
// when ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	every := m.opts.CheckEvery
	if every <= 0 {
		every = DefaultCheckEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for _, s := range m.sources {
			s.keepFresh(ctx)
		}
	}
}

// keepFresh refreshes the token when it is due; a login that is missing or spent is left to
// an admin.
func (s *Source) keepFresh(ctx context.Context) {
	rec, ver, err := s.load(ctx)
	if err != nil || ver == 0 || rec.NeedsLogin != "" || rec.Refresh == "" || !s.due(rec, s.m.opts.Now()) {
		if err != nil && ctx.Err() == nil {
			s.log.Warn("MCP OAuth login could not be read", "err", err)
		}
		return
	}
	cctx, cancel := context.WithTimeout(ctx, claimTTL+5*time.Second)
	defer cancel()
	_, _ = s.Authorization(cctx) // refreshes; its outcome is logged and kept in the record
}
