package mcp_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	testmcp "relaybot/internal/testkit/mcp"
	"relaybot/internal/testkit/wait"
	"relaybot/tools"
	"relaybot/tools/mcp"
)

// TestNextKeepsAnUnchangedServersSessionAndItsCallInFlight reloads two servers, one unchanged
// and one with a new tool prefix, while a call runs on the unchanged one: the call ends with its
// result, the unchanged server keeps its one session through the old loader's Close, the
// changed one is connected anew with its new tools, and the new loader's Close disconnects both.
func TestNextKeepsAnUnchangedServersSessionAndItsCallInFlight(t *testing.T) {
	k1, k2 := testmcp.New("one"), testmcp.New("two")
	k1.Legacy() // sessions of the initialize handshake, which the server counts
	k2.Legacy()
	s1, s2 := testmcp.StartHTTP(t, k1), testmcp.StartHTTP(t, k2)
	one := mcp.ServerConfig{Name: "one", Transport: "http", Local: true, URL: s1.URL}
	two := mcp.ServerConfig{Name: "two", Transport: "http", Local: true, URL: s2.URL, ToolPrefix: "a_"}
	old := mcp.NewLoader([]mcp.ServerConfig{one, two}, quietLogger())
	old.Start(context.Background())
	waitUp(t, old, "one")
	waitUp(t, old, "two")

	result := make(chan error, 1)
	go func() {
		res, err := call(old, "sleep", map[string]any{"seconds": 2})
		if err == nil && res.Text != "slept" {
			err = fmt.Errorf("result %q, want slept", res.Text)
		}
		result <- err
	}()
	wait.For(t, "the call running on the server", func() bool { return k1.Calls("sleep") == 1 })

	two.ToolPrefix = "b_"
	next := old.Next([]mcp.ServerConfig{one, two}, []string{"one"})
	next.Start(context.Background())
	t.Cleanup(next.Close)
	waitUp(t, next, "two")
	old.Close()
	if err := <-result; err != nil {
		t.Fatalf("the call in flight on the unchanged server: %v", err)
	}
	if h := health(next, "one"); h.State != tools.ServerUp {
		t.Fatalf("the unchanged server after the old loader closed: %+v", h)
	}
	if res, err := call(next, "echo", map[string]string{"text": "still"}); err != nil || res.Text != "still" {
		t.Fatalf("a call on the unchanged server after the reload: %q, %v", res.Text, err)
	}
	if n := s1.SessionsStarted(); n != 1 {
		t.Errorf("the unchanged server saw %d sessions, want its first only", n)
	}
	if n := s2.SessionsStarted(); n != 2 {
		t.Errorf("the changed server saw %d sessions, want 2 (connected anew)", n)
	}
	names := toolNames(next)
	if !slices.Contains(names, "b_echo") || slices.Contains(names, "a_echo") {
		t.Errorf("the new loader offers %q: want the changed server's tools under its new prefix", names)
	}

	next.Close()
	if h := health(next, "one"); h.State != tools.ServerDown {
		t.Errorf("the kept server after the new loader closed: %+v", h)
	}
}
