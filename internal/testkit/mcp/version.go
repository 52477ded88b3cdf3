package mcp

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// Legacy makes the Kit's server one of protocol 2025-11-25, as most servers in use are: it
// answers server/discover (the 2026-07-28 handshake) with "Method not found", so a client
// falls back to the initialize handshake and the session it starts. Call it before serving.
func (k *Kit) Legacy() { k.legacy.Store(true) }

// Discovers reports how many server/discover requests the server got (answered or refused).
func (k *Kit) Discovers() int { return int(k.discovers.Load()) }

// refuseDiscover answers body when it is a server/discover request the server refuses; false
// when the server is to handle it.
func (k *Kit) refuseDiscover(body []byte) ([]byte, bool) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != string(mcp.MethodServerDiscover) {
		return nil, false
	}
	k.discovers.Add(1)
	if !k.legacy.Load() {
		return nil, false
	}
	out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID,
		"error": map[string]any{"code": mcp.METHOD_NOT_FOUND, "message": "Method not found"}})
	return out, true
}

// answerDiscover writes the refusal of a server/discover POST; false when the server is to
// handle the request.
func (k *Kit) answerDiscover(w http.ResponseWriter, body []byte) bool {
	out, refused := k.refuseDiscover(body)
	if !refused {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
	return true
}

// stdioOut serialises the refusals written beside a stdio server's own output.
type stdioOut struct {
	mu sync.Mutex
	w  io.Writer
}

func (o *stdioOut) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.w.Write(p)
}

// Serve wraps h, a streamable HTTP handler of the Kit's server, so that a Legacy Kit refuses
// server/discover there too, and a Kit of 2026-07-28 speaks the tasks extension (for tests that serve the Kit behind handlers of their own).
func (k *Kit) Serve(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, ok := k.readMessage(w, r)
			if !ok || k.answerDiscover(w, body) || k.serveExt(w, r, body) {
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}
