package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// HTTPServer serves a Kit over streamable HTTP on loopback, with sessions it can expire.
type HTTPServer struct {
	// URL is the MCP endpoint.
	URL         string
	sessions    *sessions
	expireCalls atomic.Int64
	redirect    atomic.Pointer[string]
	close       func()
	closeOnce   sync.Once
}

// Close stops the server: connections are cut and new ones refused.
func (h *HTTPServer) Close() { h.close() }

// StartHTTP serves k over streamable HTTP until the test ends.
func StartHTTP(t testing.TB, k *Kit) *HTTPServer {
	t.Helper()
	s := &sessions{state: map[string]bool{}}
	h := server.NewStreamableHTTPServer(k.Server, server.WithSessionIdManager(s))
	hs := &HTTPServer{sessions: s}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, ok := k.readMessage(w, r)
			if !ok || k.answerDiscover(w, body) || k.serveExt(w, r, body) {
				return
			}
			var msg struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" && hs.expireCalls.Load() > 0 && hs.expireCalls.Add(-1) >= 0 {
				_, _ = s.Terminate(r.Header.Get(server.HeaderKeySessionID))
			}
			if to := hs.redirect.Load(); to != nil && msg.Method == "tools/call" {
				http.Redirect(w, r, *to, http.StatusTemporaryRedirect) // 307: the client is to POST the call there
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	hs.close = func() {
		hs.closeOnce.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			h.CloseSessions(ctx)
			ts.CloseClientConnections()
			ts.Close()
		})
	}
	t.Cleanup(hs.close)
	hs.URL = ts.URL + "/mcp"
	return hs
}

// RedirectCallsTo makes the server answer every tools/call with a 307 to url, as a hostile or
// compromised server could, to send the bot (and whatever it carries) somewhere else.
func (h *HTTPServer) RedirectCallsTo(url string) { h.redirect.Store(&url) }

// ExpireOnNextCalls ends the session of each of the next n tool calls just before the call
// arrives, so the server answers it 404 "Session terminated".
func (h *HTTPServer) ExpireOnNextCalls(n int) { h.expireCalls.Store(int64(n)) }

// ExpireSessions ends every session the server has handed out: requests carrying their ids are
// answered 404 "Session terminated", the way a server that restarted or timed a session out does.
func (h *HTTPServer) ExpireSessions() { h.sessions.expireAll() }

// SessionsStarted reports how many sessions clients have initialized.
func (h *HTTPServer) SessionsStarted() int { return int(h.sessions.started.Load()) }

// sessions is a stateful session id manager whose sessions can be expired.
type sessions struct {
	mu      sync.Mutex
	state   map[string]bool // id → terminated
	started atomic.Int64
}

func (s *sessions) Generate() string {
	n := s.started.Add(1)
	id := fmt.Sprintf("session-%d", n)
	s.mu.Lock()
	s.state[id] = false
	s.mu.Unlock()
	return id
}

func (s *sessions) Validate(id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	terminated, ok := s.state[id]
	if !ok {
		return false, fmt.Errorf("unknown session %q", id)
	}
	return terminated, nil
}

func (s *sessions) Terminate(id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.state[id]; !ok {
		return false, fmt.Errorf("unknown session %q", id)
	}
	s.state[id] = true
	return false, nil
}

func (s *sessions) expireAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.state {
		s.state[id] = true
	}
}

// SSEServer serves a Kit over the legacy HTTP+SSE transport on loopback.
type SSEServer struct {
	// URL is the SSE endpoint (GET opens the stream).
	URL     string
	streams atomic.Int64
	posts   atomic.Int64
}

// StartSSE serves k over legacy SSE at /sse until the test ends.
func StartSSE(t testing.TB, k *Kit) *SSEServer {
	t.Helper()
	return startSSE(t, k, "/sse", 0)
}

// StartSSEOnly serves k over legacy SSE at /mcp and answers every POST to /mcp (a streamable
// HTTP handshake) with postStatus: a server that predates streamable HTTP, or one that is
// broken (401, 500).
func StartSSEOnly(t testing.TB, k *Kit, postStatus int) *SSEServer {
	t.Helper()
	return startSSE(t, k, "/mcp", postStatus)
}

func startSSE(t testing.TB, k *Kit, path string, postStatus int) *SSEServer {
	mux := http.NewServeMux()
	ts := httptest.NewServer(mux)
	s := &SSEServer{URL: ts.URL + path}
	sse := server.NewSSEServer(k.Server, server.WithBaseURL(ts.URL),
		server.WithSSEEndpoint(path), server.WithMessageEndpoint("/message"),
		server.WithKeepAlive(false))
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			s.posts.Add(1)
			if postStatus != 0 {
				http.Error(w, http.StatusText(postStatus), postStatus)
				return
			}
		}
		if r.Method == http.MethodGet {
			s.streams.Add(1)
		}
		sse.SSEHandler().ServeHTTP(w, r)
	})
	mux.HandleFunc("/message", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := k.readMessage(w, r); ok {
			sse.MessageHandler().ServeHTTP(w, r)
		}
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sse.Shutdown(ctx)
		ts.CloseClientConnections()
		ts.Close()
	})
	return s
}

// Streams reports how many SSE streams clients opened.
func (s *SSEServer) Streams() int { return int(s.streams.Load()) }

// Posts reports how many POSTs reached the SSE endpoint path.
func (s *SSEServer) Posts() int { return int(s.posts.Load()) }

// BuildStdioServer builds cmd/mcptestserver into dir and returns the binary's path.
func BuildStdioServer(dir string) (string, error) {
	bin := filepath.Join(dir, "mcptestserver")
	cmd := exec.Command("go", "build", "-o", bin, "relaybot/internal/testkit/mcp/cmd/mcptestserver")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build mcptestserver: %w: %s", err, out)
	}
	return bin, nil
}

// readMessage reads a POSTed JSON-RPC message for the server (and counts the
// notifications/cancelled in it), leaving the body for the server to read again; false when the
// body could not be read (the request is answered 400).
func (k *Kit) readMessage(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	k.noteMessage(body)
	return body, true
}
