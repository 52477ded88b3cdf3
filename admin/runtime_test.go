package admin

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// fetch GETs path from ts with the bearer token (none when empty) and an optional Host, and
// returns the status and body.
func fetch(t *testing.T, c *http.Client, url, token, host string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func TestMetricsHaveRuntimeGauges(t *testing.T) {
	_, ts := newTestServer(t, openStore(t), testToken)
	code, body := fetch(t, ts.Client(), ts.URL+"/metrics", testToken, "")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	values := map[string]float64{}
	types := map[string]string{}
	helps := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		switch f := strings.Fields(line); {
		case len(f) >= 4 && f[0] == "#" && f[1] == "TYPE":
			types[f[2]] = f[3]
		case len(f) >= 3 && f[0] == "#" && f[1] == "HELP":
			helps[f[2]] = true
		case len(f) == 2 && !strings.Contains(f[0], "{"):
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Errorf("sample %q: %v", line, err)
			}
			values[f[0]] = v
		}
	}
	names := []string{"go_goroutines", "go_memstats_heap_inuse_bytes", "go_memstats_heap_alloc_bytes",
		"go_memstats_sys_bytes", "go_memstats_heap_objects", "go_gc_cycles_total"}
	if _, ok := residentBytes(); ok { // Linux
		names = append(names, "process_resident_memory_bytes")
	}
	for _, name := range names {
		v, ok := values[name]
		// No garbage collection may have run yet in a short test process.
		if !ok || (v <= 0 && name != "go_gc_cycles_total") {
			t.Errorf("%s = %v (present: %v), want a positive sample", name, v, ok)
		}
		if !helps[name] || types[name] == "" {
			t.Errorf("%s lacks its HELP or TYPE line", name)
		}
	}
	if types["go_goroutines"] != "gauge" || types["go_gc_cycles_total"] != "counter" {
		t.Errorf("types: go_goroutines %q, go_gc_cycles_total %q", types["go_goroutines"], types["go_gc_cycles_total"])
	}
	if values["go_memstats_heap_inuse_bytes"] < values["go_memstats_heap_alloc_bytes"] {
		t.Errorf("heap in use %v < heap allocated %v", values["go_memstats_heap_inuse_bytes"], values["go_memstats_heap_alloc_bytes"])
	}
	// The gauges are read at scrape time: more goroutines show on the next scrape.
	before := values["go_goroutines"]
	stop := make(chan struct{})
	started := make(chan struct{})
	const extra = 50
	for range extra {
		go func() { started <- struct{}{}; <-stop }()
		<-started
	}
	defer close(stop)
	_, body = fetch(t, ts.Client(), ts.URL+"/metrics", testToken, "")
	var after float64
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			after, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if after < before+extra {
		t.Errorf("go_goroutines %v after starting %d goroutines, was %v", after, extra, before)
	}
}

func TestPprofBehindAuth(t *testing.T) {
	_, ts := newTestServer(t, openStore(t), testToken)
	browser, _ := loggedIn(t, ts)
	tests := []struct {
		name   string
		client *http.Client
		path   string
		token  string
		want   int
		prefix string // the body starts with it
	}{
		{"index without token", ts.Client(), "/debug/pprof/", "", http.StatusUnauthorized, ""},
		{"goroutines without token", ts.Client(), "/debug/pprof/goroutine?debug=1", "", http.StatusUnauthorized, ""},
		{"cpu profile without token", ts.Client(), "/debug/pprof/profile?seconds=1", "", http.StatusUnauthorized, ""},
		{"symbol without token", ts.Client(), "/debug/pprof/symbol", "", http.StatusUnauthorized, ""},
		{"wrong token", ts.Client(), "/debug/pprof/goroutine?debug=1", "not-the-admin-token-at-all", http.StatusUnauthorized, ""},
		{"index", ts.Client(), "/debug/pprof/", testToken, http.StatusOK, "<html>"},
		{"goroutines as text", ts.Client(), "/debug/pprof/goroutine?debug=1", testToken, http.StatusOK, "goroutine profile: total "},
		{"goroutines as a profile", ts.Client(), "/debug/pprof/goroutine", testToken, http.StatusOK, "\x1f\x8b"},
		{"heap profile", ts.Client(), "/debug/pprof/heap", testToken, http.StatusOK, "\x1f\x8b"},
		{"goroutines with a session", browser, "/debug/pprof/goroutine?debug=1", "", http.StatusOK, "goroutine profile: total "},
		{"command line left out", ts.Client(), "/debug/pprof/cmdline", testToken, http.StatusNotFound, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := fetch(t, tc.client, ts.URL+tc.path, tc.token, "")
			if code != tc.want {
				t.Fatalf("GET %s: %d, want %d: %.200s", tc.path, code, tc.want, body)
			}
			if !bytes.HasPrefix(body, []byte(tc.prefix)) {
				t.Errorf("GET %s: body starts %.40q, want %q", tc.path, body, tc.prefix)
			}
		})
	}
}

func TestPprofWithoutTokenIsLoopbackOnly(t *testing.T) {
	srv, err := New(Options{Listen: "127.0.0.1:0", Store: openStore(t)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	if code, body := fetch(t, ts.Client(), ts.URL+"/debug/pprof/goroutine?debug=1", "", ""); code != http.StatusOK || !bytes.HasPrefix(body, []byte("goroutine profile: total ")) {
		t.Errorf("loopback request without a token: %d %.80q", code, body)
	}
	if code, _ := fetch(t, ts.Client(), ts.URL+"/debug/pprof/goroutine?debug=1", "", "bot.example.com"); code != http.StatusMisdirectedRequest {
		t.Errorf("request for another host name: %d, want %d", code, http.StatusMisdirectedRequest)
	}
}
