package outbound

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestNonPublicNamesEveryInnerRange(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1": "loopback", "::1": "loopback", "10.1.2.3": "private", "192.168.0.1": "private",
		"172.16.0.1": "private", "fd00::1": "private", "169.254.169.254": "link-local", "fe80::1": "link-local",
		"0.0.0.0": "unspecified", "100.100.100.200": "non-public", "::ffff:127.0.0.1": "loopback",
		"64:ff9b::a00:1": "private", "8.8.8.8": "", "2606:4700::1111": "",
	} {
		if got := NonPublic(netip.MustParseAddr(addr)); got != want {
			t.Errorf("NonPublic(%s) = %q, want %q", addr, got, want)
		}
	}
}

func TestOriginsCompareSchemeHostAndPort(t *testing.T) {
	same := [][2]string{{"https://Example.com/a", "https://example.com:443/b"}, {"http://h/x", "http://h:80/"}}
	differ := [][2]string{{"https://h/", "http://h/"}, {"https://h/", "https://h:8443/"}, {"https://h/", "https://h.evil/"}}
	for _, p := range same {
		if Origin(mustURL(t, p[0])) != Origin(mustURL(t, p[1])) {
			t.Errorf("%s and %s have different origins", p[0], p[1])
		}
	}
	for _, p := range differ {
		if Origin(mustURL(t, p[0])) == Origin(mustURL(t, p[1])) {
			t.Errorf("%s and %s have the same origin", p[0], p[1])
		}
	}
}

// A guarded client follows a redirect within its origin, refuses one to another origin without
// reaching it (the configured Authorization header with it), and refuses inner addresses unless
// the server is local.
func TestAGuardedClientKeepsToItsOriginAndPublicAddresses(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(other.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/here":
			http.Redirect(w, r, "/there", http.StatusTemporaryRedirect)
		case "/away":
			http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
		default:
			_, _ = w.Write([]byte(r.Header.Get("Authorization")))
		}
	}))
	t.Cleanup(srv.Close)
	local := Client(Options{Local: true}, 10*time.Second)
	get := func(c *http.Client, path string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		return c.Do(req)
	}
	resp, err := get(local, "/here")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a same-origin redirect: %v", err)
	}
	resp.Body.Close()
	if _, err := get(local, "/away"); !errors.Is(err, ErrCrossOrigin) {
		t.Errorf("a redirect to another origin: %v, want ErrCrossOrigin", err)
	}
	if elsewhere.Load() != 0 {
		t.Errorf("the other origin got %d requests", elsewhere.Load())
	}
	var refused *RefusedError
	if _, err := get(Client(Options{}, 10*time.Second), "/"); !errors.As(err, &refused) || refused.Reason != "loopback" {
		t.Errorf("a loopback server not configured local: %v, want a refusal", err)
	}
	pinned := &http.Client{Transport: PinOrigin(Origin(mustURL(t, srv.URL)), Transport(Options{Local: true}))}
	if _, err := pinned.Get(other.URL + "/x"); err == nil || !strings.Contains(err.Error(), ErrCrossOrigin.Error()) {
		t.Errorf("a pinned client sent a request to another origin: %v", err)
	}
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
