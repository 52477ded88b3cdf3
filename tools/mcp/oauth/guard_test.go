package oauth_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	mcpkit "relaybot/internal/testkit/mcp"
	astest "relaybot/internal/testkit/oauth"
	"relaybot/tools/mcp/oauth"
)

// A server behind OAuth that answers a tool call with a 307 to another origin does not get the
// bot's token there: the redirect is not followed, the other host sees no request at all, and
// the call fails instead of showing that host's answer.
func TestTheTokenNeverFollowsARedirectToAnotherOrigin(t *testing.T) {
	var hits, withToken atomic.Int64
	in := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("Authorization") != "" {
			withToken.Add(1)
		}
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"db_password=hunter2"}]}}`))
	}))
	t.Cleanup(in.Close)
	c := &clock{t: time.Now()}
	as := astest.Start(t, astest.Options{Now: c.Now})
	h := server.NewStreamableHTTPServer(mcpkit.New("tracker").Server)
	url := as.Protect(t, "/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			http.Redirect(w, r, in.URL+"/internal", http.StatusTemporaryRedirect)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	st, _ := openSQLite(t)
	r := newRig(t, c, as, url, st, oauth.Server{})
	r.connect()
	r.waitUp()
	out := r.call("hello")
	if out.Err == nil || strings.Contains(out.Content, "db_password") {
		t.Fatalf("the redirected call gave %q (%v), want it refused", out.Content, out.Err)
	}
	if hits.Load() != 0 || withToken.Load() != 0 {
		t.Errorf("the other origin got %d requests, %d with the token", hits.Load(), withToken.Load())
	}
}

// beginLogin starts a login from the Servers page and returns where the authorization server
// sent the browser back, without following it.
func beginLogin(t *testing.T, r *rig) *url.URL {
	t.Helper()
	r.browser.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), r.admin.URL) {
			return http.ErrUseLastResponse
		}
		return nil
	}
	defer func() { r.browser.CheckRedirect = nil }()
	resp, err := r.browser.Get(r.admin.URL + "/admin/servers/tracker/connect")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	u, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || u.Query().Get("iss") != r.as.URL {
		t.Fatalf("the authorization server sent the browser to %q, want the callback with its iss (RFC 9207)", resp.Header.Get("Location"))
	}
	return u
}

// An answer to a login is taken only from the authorization server the admin was sent to, at
// the redirect URI of the server being logged in: an answer naming another issuer, one without
// the iss its server promises (RFC 9207), or one arriving at another server's redirect URI is
// refused, and no code is exchanged.
func TestALoginAnswerFromElsewhereIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		forge  func(u *url.URL)
		saying string
	}{
		{"another issuer", func(u *url.URL) {
			q := u.Query()
			q.Set("iss", "https://as.attacker.example")
			u.RawQuery = q.Encode()
		}, "not from"},
		{"no issuer", func(u *url.URL) {
			q := u.Query()
			q.Del("iss")
			u.RawQuery = q.Encode()
		}, "carries no iss"},
		{"another server's redirect URI", func(u *url.URL) {
			u.Path = strings.TrimSuffix(u.Path, "tracker") + "wiki"
		}, "came back to the address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t: time.Now()}
			as, resURL := protected(t, c, astest.Options{})
			st, _ := openSQLite(t)
			r := newRig(t, c, as, resURL, st, oauth.Server{})
			u := beginLogin(t, r)
			tc.forge(u)
			status, body := r.get(u.String())
			if status != http.StatusBadRequest || !strings.Contains(body, tc.saying) {
				t.Fatalf("the forged answer got %d, want 400 saying %q:\n%s", status, tc.saying, body)
			}
			if n := as.Count("code"); n != 0 {
				t.Errorf("%d codes were exchanged", n)
			}
			if got := r.loginState(); got != "not connected" {
				t.Errorf("after the forged answer the Servers page says %q", got)
			}
		})
	}
}

// Discovery goes to public https addresses only, unless the admin configured the server as
// local: a plain-http server is refused before any request, and an https one on loopback is
// refused at dial time.
func TestDiscoveryRefusesPlainHTTPAndInnerAddressesUnlessLocal(t *testing.T) {
	var hits atomic.Int64
	count := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusUnauthorized)
	})
	plain := httptest.NewServer(count)
	t.Cleanup(plain.Close)
	tls := httptest.NewTLSServer(count)
	t.Cleanup(tls.Close)
	for _, tc := range []struct {
		name, url, saying string
	}{
		{"plain http", plain.URL + "/mcp", "is not https"},
		{"https on loopback", tls.URL + "/mcp", "refusing to connect to 127.0.0.1: loopback address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := openSQLite(t)
			m, err := oauth.New(oauth.Options{Servers: []oauth.Server{{Name: "x", URL: tc.url}}, Store: st.OAuth, Key: testKey})
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Begin(context.Background(), "x", "http://127.0.0.1/cb/x")
			if err == nil || !strings.Contains(err.Error(), tc.saying) {
				t.Fatalf("Begin = %v, want a refusal saying %q", err, tc.saying)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the servers got %d requests", n)
	}
}

// A token answer with a huge expires_in is clamped to a year: the login is good until about a
// year from now and used as it is, not refreshed on every use (the unclamped value overflowed
// into an expiry in the past).
func TestAHugeExpiresInIsClamped(t *testing.T) {
	c := &clock{t: time.Now()}
	as, resURL := protected(t, c, astest.Options{ExpiresIn: 1 << 62})
	st, _ := openSQLite(t)
	r := newRig(t, c, as, resURL, st, oauth.Server{})
	r.connect()
	r.waitUp()
	for _, text := range []string{"one", "two"} {
		if out := r.call(text); out.Err != nil || out.Content != text {
			t.Fatalf("the tool answered %q (%v)", out.Content, out.Err)
		}
	}
	if n := as.Count("refresh"); n != 0 {
		t.Errorf("the token was refreshed %d times", n)
	}
	_, detail, err := r.logins.LoginState(context.Background(), "tracker")
	want := "token good until " + c.Now().AddDate(1, 0, 0).UTC().Format("2006")
	if err != nil || !strings.HasPrefix(detail, want) {
		t.Errorf("login state %q (%v), want %q…", detail, err, want)
	}
}
