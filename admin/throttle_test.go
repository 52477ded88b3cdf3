package admin

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"relaybot/store/storetest"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a test clock that moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// authPath is one way to present the admin token: the login form or a Bearer header.
type authPath struct {
	name string
	// try presents token as the client at addr (sent through the trusted proxy on loopback) and
	// returns the status: 200 or 303 means in, 401 wrong, 429 throttled.
	try func(t *testing.T, ts *httptest.Server, addr, token string) (status int, retryAfter string)
}

var authPaths = []authPath{
	{"login form", func(t *testing.T, ts *httptest.Server, addr, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/admin/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", addr)
		return do(t, req)
	}},
	{"bearer", func(t *testing.T, ts *httptest.Server, addr, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/api/v1/tool-calls", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Forwarded-For", addr)
		return do(t, req)
	}},
}

func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

func in(status int) bool { return status == http.StatusOK || status == http.StatusSeeOther }

// behindProxy is a server that trusts the loopback peer as its reverse proxy, on a test clock.
func behindProxy(t *testing.T) (*httptest.Server, *clock) {
	t.Helper()
	clk := newClock()
	proxies, err := NewProxies([]string{"127.0.0.1", "::1"}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, storetest.Open(t, storetest.SQLite), testToken, func(o *Options) {
		o.Proxies = proxies
		o.Now = clk.Now
	})
	return ts, clk
}

func TestGuessingFromOneAddressNeverLocksOutTheAdminAtAnother(t *testing.T) {
	for _, p := range authPaths {
		t.Run(p.name, func(t *testing.T) {
			ts, _ := behindProxy(t)
			const attacker, admin = "203.0.113.7", "198.51.100.2"
			throttled := 0
			for i := range 300 {
				status, _ := p.try(t, ts, attacker, "wrong-token-wrong-token-"+string(rune('a'+i%26)))
				switch status {
				case http.StatusTooManyRequests:
					throttled++
				case http.StatusUnauthorized:
				default:
					t.Fatalf("guess %d: status %d, want 401 or 429", i, status)
				}
			}
			if throttled < 290 {
				t.Errorf("300 guesses from one address in a burst: only %d were throttled (429), want all but the first few", throttled)
			}
			if status, _ := p.try(t, ts, admin, testToken); !in(status) {
				t.Errorf("the admin's right token from another address: status %d, want in; someone else's guesses locked the admin out", status)
			}
			if status, retry := p.try(t, ts, attacker, testToken); status != http.StatusTooManyRequests || retry == "" {
				t.Errorf("the right token from the guessing address while it waits: %d (Retry-After %q), want 429 with Retry-After", status, retry)
			}
		})
	}
}

func TestWrongTokensBackOffExponentiallyPerAddress(t *testing.T) {
	for _, p := range authPaths {
		t.Run(p.name, func(t *testing.T) {
			ts, clk := behindProxy(t)
			const client = "2001:db8::5"
			for i := range freeFailures {
				if status, _ := p.try(t, ts, client, "wrong-token-wrong-token"); status != http.StatusUnauthorized {
					t.Fatalf("wrong token %d: %d, want 401 (the first %d are not throttled)", i+1, status, freeFailures)
				}
			}
			for _, wait := range []string{"1", "2", "4", "8", "16"} {
				if status, _ := p.try(t, ts, client, "wrong-token-wrong-token"); status != http.StatusUnauthorized {
					t.Fatalf("wrong token after waiting: %d, want it checked (401)", status)
				}
				status, retry := p.try(t, ts, client, testToken)
				if status != http.StatusTooManyRequests || retry != wait {
					t.Fatalf("next try: %d with Retry-After %q, want 429 with Retry-After %s", status, retry, wait)
				}
				// Another host of the same IPv6 /64 waits too.
				if status, _ := p.try(t, ts, "2001:db8::6", testToken); status != http.StatusTooManyRequests {
					t.Fatalf("a neighbour in the same /64: %d, want 429", status)
				}
				d, _ := time.ParseDuration(wait + "s")
				clk.Add(d)
			}
			if status, _ := p.try(t, ts, client, testToken); !in(status) {
				t.Fatalf("the right token after waiting: %d, want in", status)
			}
			// A right token starts the address afresh.
			for i := range freeFailures {
				if status, _ := p.try(t, ts, client, "wrong-token-wrong-token"); status != http.StatusUnauthorized {
					t.Fatalf("after a success, wrong token %d: %d, want 401", i+1, status)
				}
			}
		})
	}
}

func TestForwardedForIsBelievedOnlyFromTrustedProxies(t *testing.T) {
	// No trusted proxy: a guesser cannot escape its throttle by making up X-Forwarded-For.
	clk := newClock()
	_, ts := newTestServer(t, storetest.Open(t, storetest.SQLite), testToken, func(o *Options) { o.Now = clk.Now })
	statuses := map[int]int{}
	for i := range 50 {
		status, _ := authPaths[1].try(t, ts, "198.51.100."+string(rune('0'+i%10)), "wrong-token-wrong-token")
		statuses[status]++
	}
	if statuses[http.StatusTooManyRequests] < 40 {
		t.Errorf("50 guesses with made-up X-Forwarded-For from an untrusted peer: %v, want nearly all 429", statuses)
	}

	proxies, err := NewProxies([]string{"10.0.0.0/8", "127.0.0.1"}, "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, remote string
		xff          []string
		want         string
	}{
		{"direct client", "203.0.113.9:5000", []string{"1.2.3.4"}, "203.0.113.9"},
		{"through the proxy", "10.1.2.3:5000", []string{"203.0.113.9"}, "203.0.113.9"},
		{"client's own claim further left is ignored", "10.1.2.3:5000", []string{"1.2.3.4, 203.0.113.9"}, "203.0.113.9"},
		{"two trusted hops", "127.0.0.1:5000", []string{"1.2.3.4, 203.0.113.9, 10.9.9.9"}, "203.0.113.9"},
		{"several header lines", "10.1.2.3:5000", []string{"1.2.3.4", "203.0.113.9"}, "203.0.113.9"},
		{"garbage stops at the last real hop", "10.1.2.3:5000", []string{"203.0.113.9, not-an-ip"}, "10.1.2.3"},
		{"only proxies", "10.1.2.3:5000", []string{"10.0.0.1"}, "10.0.0.1"},
		{"no header", "10.1.2.3:5000", nil, "10.1.2.3"},
		{"IPv4-mapped IPv6 peer", "[::ffff:10.1.2.3]:5000", []string{"203.0.113.9"}, "203.0.113.9"},
	}
	for _, tc := range tests {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tc.remote
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := proxies.ClientIP(r).String(); got != tc.want {
			t.Errorf("%s: client %s, want %s", tc.name, got, tc.want)
		}
	}
}
