package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"relaybot/coord"
	"relaybot/store/storetest"
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// moveCookies gives c's cookies for from to to as well (another replica behind the same name).
func moveCookies(t *testing.T, c *http.Client, from, to string) {
	t.Helper()
	f, _ := url.Parse(from)
	tu, _ := url.Parse(to)
	c.Jar.SetCookies(tu, c.Jar.Cookies(f))
}

// TestALoginHoldsOnEveryReplicaAndALogoutEndsItOnAll runs two admin servers on one store, as two
// replicas do: the cookie of a login on the first opens the pages and the API of the second,
// the page there carries the same CSRF token, a logout on the second ends the login on the
// first, and the login ends by itself after 12 hours.
func TestALoginHoldsOnEveryReplicaAndALogoutEndsItOnAll(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seedStore(t, st)
	clk := newClock()
	var servers [2]*httptest.Server
	for i := range servers {
		_, servers[i] = newTestServer(t, st, testToken, func(o *Options) {
			o.Sessions = st.AdminSessions
			o.Now = clk.Now
		})
	}
	a, b := servers[0].URL, servers[1].URL
	c, csrf := loggedIn(t, servers[0])
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	moveCookies(t, c, a, b)
	code, body := get(t, c, b+"/admin/")
	if code != http.StatusOK || !strings.Contains(body, `name="csrf" value="`+csrf+`"`) {
		t.Fatalf("the second replica's page with the first's login: %d, want 200 with the same logout token\n%s", code, body)
	}
	if code, _ := get(t, c, b+"/api/v1/tool-calls"); code != http.StatusOK {
		t.Errorf("the second replica's API with the first's login: %d, want 200", code)
	}

	var login *http.Cookie
	for _, ck := range c.Jar.Cookies(mustParse(t, a)) {
		if ck.Name == sessionCookie {
			login = ck
		}
	}
	resp, err := c.PostForm(b+"/admin/logout", url.Values{"csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/admin/login" {
		t.Fatalf("logout on the second replica: %d to %q, want 303 to the login page", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The browser drops the cookie; one that kept it (or stole it) is refused by every replica.
	for _, srv := range []string{a, b} {
		req, _ := http.NewRequest(http.MethodGet, srv+"/api/v1/tool-calls", nil)
		req.AddCookie(login)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s with the cookie of a login ended on another replica: %d, want 401", srv, resp.StatusCode)
		}
	}

	// Log in again, keep the cookie: it ends after 12 hours on both.
	c2, _ := loggedIn(t, servers[0])
	c2.CheckRedirect = c.CheckRedirect
	moveCookies(t, c2, a, b)
	clk.Add(sessionTTL - time.Minute)
	for _, srv := range []string{a, b} {
		if code, _ := get(t, c2, srv+"/admin/"); code != http.StatusOK {
			t.Errorf("%s a minute before the login ends: %d, want 200", srv, code)
		}
	}
	clk.Add(time.Minute)
	for _, srv := range []string{a, b} {
		if code, _ := get(t, c2, srv+"/admin/"); code != http.StatusSeeOther {
			t.Errorf("%s once the 12 hours are over: %d, want 303 to the login page", srv, code)
		}
	}
}

// TestTheReplicasPageListsEachReplicaOrSaysTheBotRunsAlone: with replicas the page has a row
// per replica (this one marked, its leases named); a single process says it runs alone.
func TestTheReplicasPageListsEachReplicaOrSaysTheBotRunsAlone(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	started := time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)
	list := []coord.Instance{
		{ID: "host-a-1-aaaa", Host: "host-a", PID: 101, StartedAt: started, HeartbeatAt: started.Add(time.Hour),
			ExpiresAt: started.Add(time.Hour + 6*time.Second), TurnsRunning: 3, Leases: []string{"telegram poller 0123"}, Self: true},
		{ID: "host-b-2-bbbb", Host: "host-b", PID: 202, StartedAt: started, HeartbeatAt: started.Add(time.Hour),
			ExpiresAt: started.Add(time.Hour + 6*time.Second)},
	}
	_, ts := newTestServer(t, st, "", func(o *Options) {
		o.Instances = func(context.Context) ([]coord.Instance, error) { return list, nil }
	})
	code, body := get(t, ts.Client(), ts.URL+"/admin/replicas")
	if code != http.StatusOK {
		t.Fatalf("GET /admin/replicas: %d\n%s", code, body)
	}
	for _, want := range []string{"host-a-1-aaaa", "host-b-2-bbbb", "this one", ">101<", ">202<", "telegram poller 0123",
		">3<", "2026-03-01 12:00:06", "2 live on this database"} {
		if !strings.Contains(body, want) {
			t.Errorf("the replicas page does not show %q:\n%s", want, body)
		}
	}
	if strings.Count(body, "this one") != 1 {
		t.Errorf("the page marks %d replicas as the one answering, want 1", strings.Count(body, "this one"))
	}

	_, alone := newTestServer(t, st, "")
	code, body = get(t, alone.Client(), alone.URL+"/admin/replicas")
	if code != http.StatusOK || !strings.Contains(body, "This bot runs alone") {
		t.Errorf("a single process's replicas page: %d, want 200 saying it runs alone\n%s", code, body)
	}
}
