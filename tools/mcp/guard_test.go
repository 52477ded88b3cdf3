package mcp_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"relaybot/internal/outbound"
	testmcp "relaybot/internal/testkit/mcp"
	"relaybot/internal/testkit/wait"
	"relaybot/tools"
	"relaybot/tools/mcp"
)

// inner is a service inside the network the bot runs in: it counts the requests that reach it
// and would hand over its secrets to anyone.
func inner(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"db_password=hunter2"}]}}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// A remote MCP server that answers a tool call with a 307 to a service inside the network does
// not get the bot there: the redirect leaves the server's origin, so the call fails, the inner
// service sees no request (neither the call nor the configured Authorization header) and
// nothing of it reaches the model.
func TestARedirectToAnotherOriginIsNotFollowed(t *testing.T) {
	in, hits := inner(t)
	k := testmcp.New("kit")
	srv := testmcp.StartHTTP(t, k)
	l := startLoader(t, mcp.ServerConfig{Name: "srv", Transport: mcp.TransportHTTP, Local: true, URL: srv.URL,
		Headers: map[string]string{"Authorization": "Bearer configured-secret"}})
	waitUp(t, l, "srv")
	srv.RedirectCallsTo(in.URL + "/internal")
	res, err := call(l, "echo", map[string]string{"text": "x"})
	if err == nil || strings.Contains(res.Text, "db_password") {
		t.Fatalf("a call redirected to another origin gave %q, %v; want it refused", res.Text, err)
	}
	if !errors.Is(err, outbound.ErrCrossOrigin) && !strings.Contains(err.Error(), "another origin") {
		t.Errorf("the call failed with %v, want it to say the redirect left the server's origin", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the inner service got %d requests", n)
	}
}

// A remote server on a loopback, private or link-local address is reached only when the admin
// configured it as local: without local = true the connection is refused at dial time, as
// fetch_url refuses it, and the server stays down saying why.
func TestAServerOnAnInnerAddressIsReachedOnlyWhenConfiguredLocal(t *testing.T) {
	k := testmcp.New("kit")
	srv := testmcp.StartHTTP(t, k)
	l := startLoader(t, mcp.ServerConfig{Name: "outside", Transport: mcp.TransportHTTP, URL: srv.URL},
		mcp.ServerConfig{Name: "inside", Transport: mcp.TransportHTTP, Local: true, URL: srv.URL})
	waitUp(t, l, "inside")
	wait.For(t, "the server not configured local to be refused", func() bool {
		h := health(l, "outside")
		return h.State == tools.ServerDown && strings.Contains(h.LastError, "refusing to connect to 127.0.0.1: loopback address")
	})
	if n := k.Calls("echo"); n != 0 {
		t.Errorf("echo ran %d times", n)
	}
}
