package native_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"relaybot/tools"
	"relaybot/tools/native"
)

// server is a loopback HTTP server that counts the requests it got.
type server struct {
	*httptest.Server
	hits atomic.Int64
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) addrPort(t *testing.T) netip.AddrPort {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	ap, err := netip.ParseAddrPort(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

// permitOnly lets fetch_url reach exactly the given addresses among the non-public ones.
func permitOnly(aps ...netip.AddrPort) func(netip.AddrPort) bool {
	return func(ap netip.AddrPort) bool {
		for _, a := range aps {
			if a == ap {
				return true
			}
		}
		return false
	}
}

func fetch(t *testing.T, l *native.Loader, u string) (tools.Result, error) {
	t.Helper()
	args, _ := json.Marshal(map[string]string{"url": u})
	return l.Call(context.Background(), tools.Invocation{Name: native.FetchURL, Arguments: args})
}

func TestFetchRefusesNonPublicAddresses(t *testing.T) {
	// inner stands for a service inside the network: it must never be reached.
	inner := newServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("internal secrets")) })
	innerAP := inner.addrPort(t)
	// outer is the test's stand-in for a public site; it is the one address permitted.
	outer := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	l, err := native.NewLoader(native.Options{Permit: permitOnly(outer.addrPort(t))})
	if err != nil {
		t.Fatal(err)
	}
	redirect := func(to string) string { return outer.URL + "/?to=" + url.QueryEscape(to) }
	tests := []struct {
		name string
		url  string
		want string
	}{
		{"loopback", inner.URL + "/", "refusing to connect to 127.0.0.1: loopback address"},
		{"loopback by name", "http://localhost:" + itoa(innerAP.Port()) + "/", "loopback address"},
		{"private", "http://10.0.0.1/", "refusing to connect to 10.0.0.1: private address"},
		{"cloud metadata", "http://169.254.169.254/latest/meta-data/", "refusing to connect to 169.254.169.254: link-local address"},
		{"unspecified", "http://0.0.0.0:" + itoa(innerAP.Port()) + "/", "unspecified address"},
		{"IPv4-mapped IPv6 loopback", "http://[::ffff:127.0.0.1]:" + itoa(innerAP.Port()) + "/", "loopback address"},
		{"redirect to loopback", redirect(inner.URL + "/"), "refusing to connect to 127.0.0.1: loopback address"},
		{"redirect to private", redirect("http://10.0.0.1/admin"), "refusing to connect to 10.0.0.1: private address"},
		{"redirect to cloud metadata", redirect("http://169.254.169.254/latest/meta-data/"), "refusing to connect to 169.254.169.254: link-local address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := outer.hits.Load()
			res, err := fetch(t, l, tc.url)
			if err == nil {
				t.Fatalf("fetched %q", res.Text)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %q, want %q", err, tc.want)
			}
			if strings.HasPrefix(tc.name, "redirect") && outer.hits.Load() != before+1 {
				t.Fatalf("the redirecting server was not reached (hits %d → %d)", before, outer.hits.Load())
			}
		})
	}
	if n := inner.hits.Load(); n != 0 {
		t.Fatalf("the internal server got %d requests", n)
	}

	// The same internal server is reachable when private addresses are allowed.
	open, err := native.NewLoader(native.Options{AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := fetch(t, open, inner.URL+"/")
	if err != nil || !strings.Contains(res.Text, "internal secrets") {
		t.Fatalf("AllowPrivate: %q, %v", res.Text, err)
	}
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }

const page = `<!doctype html>
<html><head><title> Relay &amp; Bot </title><style>body{color:red}</style>
<script>var token = "abc";</script></head>
<body>
<nav><a href="/">Home</a></nav>
<h1>Release   notes</h1>
<p>Version <b>2.0</b> is out.
It streams replies.</p>
<ul><li>Faster</li><li><p>Safer</p></li><li></li></ul>
<table><tr><th>Tool</th><th>Calls</th></tr><tr><td>fetch_url</td><td>12</td></tr></table>
<pre>go test
  -race</pre>
<img src="x.png" alt="a chart">
<noscript>Enable JavaScript</noscript>
<form><input value="hidden"><button>Send</button></form>
<p>Caf&eacute; &lt;3</p>
</body></html>`

func TestFetchReadableText(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", native.DefaultMaxBytes/16+1024)
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/page":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte(page))
		case "/latin1":
			w.Header().Set("Content-Type", "text/plain; charset=iso-8859-1")
			w.Write([]byte("caf\xe9"))
		case "/json":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"ok":true}`))
		case "/big":
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte(big))
		case "/moved":
			http.Redirect(w, r, "/page", http.StatusMovedPermanently)
		case "/binary":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write([]byte{0, 1, 2})
		default:
			http.NotFound(w, r)
		}
	})
	l, err := native.NewLoader(native.Options{Permit: permitOnly(s.addrPort(t))})
	if err != nil {
		t.Fatal(err)
	}
	wantPage := "URL: " + s.URL + "/page\nTitle: Relay & Bot\n\nHome\n\n# Release notes\n\nVersion 2.0 is out. It streams replies.\n\n" +
		"- Faster\n- Safer\n\nTool | Calls\nfetch_url | 12\n\ngo test\n  -race\n\n[image: a chart]\n\nCafé <3"
	tests := []struct {
		path    string
		want    string
		wantErr string
	}{
		{"/page", wantPage, ""},
		{"/moved", wantPage, ""},
		{"/latin1", "URL: " + s.URL + "/latin1\nContent-Type: text/plain\n\ncafé", ""},
		{"/json", "URL: " + s.URL + "/json\nContent-Type: application/json\n\n{\"ok\":true}", ""},
		{"/missing", "", "HTTP 404 Not Found"},
		{"/binary", "", "is application/octet-stream, not text"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			res, err := fetch(t, l, s.URL+tc.path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", res.Text, tc.want)
			}
		})
	}
	t.Run("1 MiB cap", func(t *testing.T) {
		res, err := fetch(t, l, s.URL+"/big")
		if err != nil {
			t.Fatal(err)
		}
		head := "URL: " + s.URL + "/big\nContent-Type: text/plain\n\n"
		tail := "\n[truncated: only the first 1048576 bytes were read]"
		if !strings.HasPrefix(res.Text, head) || !strings.HasSuffix(res.Text, tail) {
			t.Fatalf("unexpected frame: %q … %q", res.Text[:80], res.Text[len(res.Text)-80:])
		}
		if body := strings.TrimSuffix(strings.TrimPrefix(res.Text, head), tail); body != big[:native.DefaultMaxBytes] {
			t.Fatalf("body is %d bytes, want the first %d", len(body), native.DefaultMaxBytes)
		}
	})
}

func TestFetchBadArguments(t *testing.T) {
	l, err := native.NewLoader(native.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"", "ftp://example.com/", "/relative", "file:///etc/passwd", "http://user:pw@example.com/"} {
		if _, err := fetch(t, l, u); err == nil {
			t.Errorf("%q: no error", u)
		} else if strings.Contains(err.Error(), "pw@") {
			t.Errorf("%q: error shows the password: %v", u, err)
		}
	}
}

func TestFetchTimeout(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	l, err := native.NewLoader(native.Options{Permit: permitOnly(s.addrPort(t)), Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = fetch(t, l, s.URL)
	if !errors.Is(err, tools.ErrTimeout) {
		t.Fatalf("err %v, want ErrTimeout", err)
	}

	// A cancelled turn is a cancellation, not a timeout.
	slow, err := native.NewLoader(native.Options{Permit: permitOnly(s.addrPort(t))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	for len(started) > 0 { // the timed-out request above
		<-started
	}
	go func() {
		<-started
		cancel()
	}()
	_, err = slow.Call(ctx, tools.Invocation{Name: native.FetchURL, Arguments: []byte(`{"url":"` + s.URL + `"}`)})
	if !errors.Is(err, context.Canceled) || errors.Is(err, tools.ErrTimeout) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

func TestCurrentTime(t *testing.T) {
	now := time.Date(2026, 11, 29, 23, 30, 0, 0, time.UTC)
	l, err := native.NewLoader(native.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args    string
		want    string
		wantErr string
	}{
		{`{}`, `{"time":"2026-11-29T23:30:00Z","timezone":"UTC","unix":1795995000,"utc_offset":"+00:00","weekday":"Sunday"}`, ""},
		{`{"timezone":"Asia/Tokyo"}`, `{"time":"2026-11-30T08:30:00+09:00","timezone":"Asia/Tokyo","unix":1795995000,"utc_offset":"+09:00","weekday":"Monday"}`, ""},
		{`{"timezone":"America/New_York"}`, `{"time":"2026-11-29T18:30:00-05:00","timezone":"America/New_York","unix":1795995000,"utc_offset":"-05:00","weekday":"Sunday"}`, ""},
		{`{"timezone":"Mars/Olympus"}`, "", `unknown time zone "Mars/Olympus"`},
		{`{"timezone":"Local"}`, "", `unknown time zone "Local"`},
		{`{"timezone":7}`, "", "bad arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.args, func(t *testing.T) {
			res, err := l.Call(context.Background(), tools.Invocation{Name: native.CurrentTime, Arguments: []byte(tc.args)})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || res.Text != tc.want {
				t.Fatalf("got %s, %v\nwant %s", res.Text, err, tc.want)
			}
		})
	}
}

func TestEnabled(t *testing.T) {
	l, err := native.NewLoader(native.Options{Enabled: []string{native.CurrentTime}})
	if err != nil {
		t.Fatal(err)
	}
	specs := l.Tools(context.Background())
	if len(specs) != 1 || specs[0].Name != native.CurrentTime {
		t.Fatalf("tools %v", specs)
	}
	if _, err := l.Call(context.Background(), tools.Invocation{Name: native.FetchURL, Arguments: []byte(`{}`)}); !errors.Is(err, tools.ErrNotFound) {
		t.Fatalf("disabled tool: err %v", err)
	}
	if _, err := native.NewLoader(native.Options{Enabled: []string{"rm_rf"}}); err == nil || !strings.Contains(err.Error(), `unknown tool "rm_rf"`) {
		t.Fatalf("unknown tool: err %v", err)
	}
}
