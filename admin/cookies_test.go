package admin

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"relaybot/adapters/web"
	"relaybot/store/storetest"
)

func TestCookiesAreSecureWheneverTheBrowserUsesHTTPS(t *testing.T) {
	tests := []struct {
		name      string
		tls       bool
		trusted   []string
		publicURL string
		proto     string // X-Forwarded-Proto sent with each request
		want      bool
	}{
		{name: "plain http", want: false},
		{name: "the bot terminates TLS", tls: true, want: true},
		{name: "public_url is https (TLS proxy in front)", publicURL: "https://bot.example.com", want: true},
		{name: "public_url is http", publicURL: "http://bot.example.com", want: false},
		{name: "a trusted proxy says https", trusted: []string{"127.0.0.1", "::1"}, proto: "https", want: true},
		{name: "a trusted proxy says http", trusted: []string{"127.0.0.1", "::1"}, proto: "http", want: false},
		{name: "an untrusted peer says https", trusted: []string{"10.0.0.0/8"}, proto: "https", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proxies, err := NewProxies(tc.trusted, tc.publicURL)
			if err != nil {
				t.Fatal(err)
			}
			chat, err := web.New(web.Options{SecureCookies: proxies.Secure})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { chat.Close() })
			srv, err := New(Options{Listen: "127.0.0.1:0", Token: testToken, Store: storeOf(storetest.Open(t, storetest.SQLite)), WebChat: chat.Handler(),
				Proxies: proxies, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			var ts *httptest.Server
			if tc.tls {
				ts = httptest.NewTLSServer(srv.Handler())
			} else {
				ts = httptest.NewServer(srv.Handler())
			}
			t.Cleanup(ts.Close)
			client := ts.Client()
			client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			send := func(method, path, body string, cookie *http.Cookie) *http.Response {
				t.Helper()
				req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Sec-Fetch-Site", "same-origin")
				if tc.proto != "" {
					req.Header.Set("X-Forwarded-Proto", tc.proto)
				}
				if cookie != nil {
					req.AddCookie(cookie)
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp
			}
			cookieOf := func(resp *http.Response, name string) *http.Cookie {
				t.Helper()
				for _, c := range resp.Cookies() {
					if c.Name == name {
						return c
					}
				}
				t.Fatalf("%s %s: no %s cookie (status %d)", resp.Request.Method, resp.Request.URL.Path, name, resp.StatusCode)
				return nil
			}

			login := cookieOf(send(http.MethodPost, "/admin/login", url.Values{"token": {testToken}}.Encode(), nil), sessionCookie)
			if login.Secure != tc.want {
				t.Errorf("session cookie Secure = %v, want %v", login.Secure, tc.want)
			}
			chatCookie := cookieOf(send(http.MethodPost, "/chat/session", "", login), "relaybot_chat")
			if chatCookie.Secure != tc.want {
				t.Errorf("chat cookie Secure = %v, want %v", chatCookie.Secure, tc.want)
			}
		})
	}
}
