package mcp

import (
	"context"
	"sync"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// Subscriptions to attached resources (MCP resources/subscribe, 2025-11-25): on a session whose
// server offers them, each resource the admin attached to chats is subscribed once the session
// stands, and its text is kept after the first read and put into every later turn until the
// server says the resource changed (notifications/resources/updated), when the next turn reads
// it again. A resource not subscribed (the server offers no subscriptions, or refused this one;
// a 2026-07-28 session, whose subscriptions/listen stream carries no resource updates from the
// servers in use) is read at every turn, as before. Each replica holds its own session, so each
// subscribes and is told for itself.

// attachedCache is a session's subscribed attached resources and the text last read of each.
type attachedCache struct {
	mu   sync.Mutex
	subs map[string]*cachedResource // by URI; only subscribed resources
}

type cachedResource struct {
	text string
	ok   bool   // text is current
	gen  uint64 // moved by every update, so a read begun before one is not kept
}

// get returns the kept text of uri and the generation a new read would be kept under; ok is
// false when there is none (not subscribed, or changed since).
func (c *attachedCache) get(uri string) (text string, gen uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.subs[uri]
	if r == nil {
		return "", 0, false
	}
	return r.text, r.gen, r.ok
}

// keep keeps text read at generation gen, unless uri changed since.
func (c *attachedCache) keep(uri string, gen uint64, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.subs[uri]; r != nil && r.gen == gen {
		r.text, r.ok = text, true
	}
}

// changed drops the kept text of uri; it reports whether uri is subscribed.
func (c *attachedCache) changed(uri string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.subs[uri]
	if r == nil {
		return false
	}
	r.gen++
	r.text, r.ok = "", false
	return true
}

func (c *attachedCache) add(uri string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subs == nil {
		c.subs = map[string]*cachedResource{}
	}
	if c.subs[uri] == nil {
		c.subs[uri] = &cachedResource{}
	}
}

// subscribeAttached subscribes the session to the resources attached to chats, where the server
// offers subscriptions on a 2025-11-25 session. One the server refuses is read at every turn.
func (s *serverConn) subscribeAttached(ctx context.Context, sess *session) {
	r := sess.caps.Resources
	if r == nil || !r.Subscribe || sess.modern() || len(s.attachChats) == 0 {
		return
	}
	for _, uri := range s.cfg.AttachResources {
		if err := sess.client.Subscribe(ctx, mcpgo.SubscribeRequest{Params: mcpgo.SubscribeParams{URI: uri}}); err != nil {
			s.logger.Warn("MCP server refused a subscription to an attached resource; it is read at every turn",
				"uri", uri, "err", s.redact.err(err))
			continue
		}
		sess.attached.add(uri)
	}
}

// resourceUpdated handles notifications/resources/updated: the resource's kept text is dropped,
// so the next turn reads it again.
func (s *serverConn) resourceUpdated(sess *session, n mcpgo.JSONRPCNotification) {
	uri, _ := n.Params.AdditionalFields["uri"].(string)
	if uri == "" || !sess.attached.changed(uri) {
		return
	}
	s.logger.Info("MCP resource attached to chats changed; the next turn reads it again", "uri", uri)
}
