package admin

import (
	"net/http"
	"net/url"
	"relaybot/store/storetest"
	"testing"
)

// TestLoginNeverRedirectsOffSite logs in with hostile "next" values and checks that the browser is
// only ever sent to a path on this server. Each hostile value is one a browser would resolve to
// another host (or a script) if it were put into the Location header as given.
func TestLoginNeverRedirectsOffSite(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	_, ts := newTestServer(t, st, testToken)
	tests := []struct {
		next, want string
	}{
		// Paths on this server are kept.
		{"/admin/", "/admin/"},
		{"/admin/?status=error&tool=fetch_url", "/admin/?status=error&tool=fetch_url"},
		{"/admin/calls/7", "/admin/calls/7"},
		{"/chat", "/chat"},
		{"/%09/evil.example", "/%09/evil.example"}, // an escaped tab stays a path segment
		{"/admin/?next=//evil.example", "/admin/?next=//evil.example"},
		// Everything else goes to the audit log.
		{"", "/admin/"},
		{"//evil.example", "/admin/"},
		{"///evil.example", "/admin/"},
		{"/\t/evil.example", "/admin/"},
		{"/\n/evil.example", "/admin/"},
		{"/\r\n/evil.example", "/admin/"},
		{"\t//evil.example", "/admin/"},
		{" //evil.example", "/admin/"},
		{"\x01//evil.example", "/admin/"},
		{"/\\evil.example", "/admin/"},
		{"\\\\evil.example", "/admin/"},
		{"\\/evil.example", "/admin/"},
		{"/\t\\evil.example", "/admin/"},
		{"https://evil.example/", "/admin/"},
		{"http:evil.example", "/admin/"},
		{"HTTPS://evil.example", "/admin/"},
		{"javascript:alert(1)", "/admin/"},
		{"java\tscript:alert(1)", "/admin/"},
		{"data:text/html,<script>alert(1)</script>", "/admin/"},
		{"evil.example", "/admin/"},
		{"admin/", "/admin/"},
		{"/admin/\x00", "/admin/"},
		{"/admin/\x1b[31m", "/admin/"},
		{"／／evil.example", "/admin/"},
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range tests {
		resp, err := noRedirect.PostForm(ts.URL+"/admin/login", url.Values{"token": {testToken}, "next": {tc.next}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != tc.want {
			t.Errorf("login with next=%q: %d to %q, want 303 to %q", tc.next, resp.StatusCode, resp.Header.Get("Location"), tc.want)
		}
		// The login form carries next on, so the GET that shows it must judge it the same way.
		if got := safeNext(tc.next); got != tc.want {
			t.Errorf("login form for next=%q carries %q, want %q", tc.next, got, tc.want)
		}
	}
}
