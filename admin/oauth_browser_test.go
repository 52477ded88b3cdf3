package admin

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	astest "relaybot/internal/testkit/oauth"
	"relaybot/store"
	"relaybot/store/storetest"
	"relaybot/tools"
	"relaybot/tools/mcp/oauth"
)

// newLogins runs an authorization server protecting an MCP endpoint, and the bot's logins of
// it as the server "tracker".
func newLogins(t *testing.T, st *store.Database) (*oauth.Manager, *astest.Server) {
	t.Helper()
	as := astest.Start(t, astest.Options{})
	url := as.Protect(t, "/mcp", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) }))
	key := []byte(strings.Repeat("k", oauth.KeySize))
	logins, err := oauth.New(oauth.Options{Servers: []oauth.Server{{Name: "tracker", URL: url, Local: true}}, Store: st.OAuth, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return logins, as
}

func TestBrowserAdminConnectsAnOAuthMCPServer(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	logins, as := newLogins(t, st)
	_, ts := newTestServer(t, st, testToken, func(o *Options) {
		o.OAuth = logins
		o.MCPHealth = func() []tools.ServerHealth {
			return []tools.ServerHealth{{Name: "tracker", Transport: "http", State: "down", LastError: "needs an admin to log in"}}
		}
	})
	bctx := newBrowser(t)
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	step := stepper(t, ctx)
	badge := func() string {
		t.Helper()
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`table.servers td[data-label="Login"] .badge`)))
		if err != nil {
			t.Fatalf("read the login badge: %v", err)
		}
		return strings.TrimSpace(text)
	}

	step("open the Servers page", chromedp.Navigate(ts.URL+"/admin/servers"), chromedp.WaitVisible(chromedp.ID("token")))
	step("log in",
		chromedp.SendKeys(chromedp.ID("token"), testToken),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.CSS("table.servers")))
	if got := badge(); got != "not connected" {
		t.Fatalf("before the login the Servers page says %q", got)
	}
	shoot(t, ctx, "servers-oauth")
	step("connect: to the authorization server and back",
		chromedp.Click(chromedp.CSS(`a.connect`)),
		chromedp.WaitVisible(chromedp.CSS(`section.card h1`)))
	h1, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`section.card h1`)))
	if err != nil || !strings.Contains(h1, "tracker is connected") {
		t.Fatalf("after the authorization server the page says %q (%v)", h1, err)
	}
	step("back to the Servers page",
		chromedp.Click(chromedp.CSS(`section.card a[href="/admin/servers"]`)),
		chromedp.WaitVisible(chromedp.CSS("table.servers")))
	if got := badge(); got != "connected" {
		t.Fatalf("after the login the Servers page says %q", got)
	}
	if n := as.Count("code"); n != 1 {
		t.Errorf("%d codes were exchanged for tokens, want 1", n)
	}
}

func TestConnectIsRefusedForAServerWithoutOAuth(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	logins, _ := newLogins(t, st)
	_, ts := newTestServer(t, st, "", func(o *Options) { o.OAuth = logins })
	resp, err := http.Get(ts.URL + "/admin/servers/files/connect")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("connecting a server that does not log in with OAuth answered %d, want 404", resp.StatusCode)
	}
}
