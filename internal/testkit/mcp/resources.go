package mcp

import (
	"context"
	"encoding/base64"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The Kit's resources (resources/list, resources/read, resources/subscribe), served by mcp-go as
// the spec has it: a URI the server does not have is refused ("resource not found"). A session
// subscribed to a resource is sent notifications/resources/updated when it changes
// (SetHandbook).
//
//   - kit://handbook (text/markdown): Handbook, its text.
//   - kit://logo (image/png): the PNG as a blob.
//
// and one resource template:
//
//   - kit://notes/{topic} (text/plain): "Notes on TOPIC." for any topic.

// Handbook is the text of the kit://handbook resource.
const Handbook = "# Handbook\n\nThe office opens at nine; the coffee machine is on the third floor."

func (k *Kit) addResources() {
	k.Server.AddResource(mcp.NewResource("kit://handbook", "Handbook",
		mcp.WithResourceDescription("The team's handbook."), mcp.WithMIMEType("text/markdown")),
		func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			k.reads.Add(1)
			k.mu.Lock()
			text := k.handbook
			k.mu.Unlock()
			if text == "" {
				text = Handbook
			}
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: "kit://handbook", MIMEType: "text/markdown", Text: text}}, nil
		})
	k.Server.AddResource(mcp.NewResource("kit://logo", "Logo", mcp.WithMIMEType("image/png")),
		func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			k.reads.Add(1)
			return []mcp.ResourceContents{mcp.BlobResourceContents{URI: "kit://logo", MIMEType: "image/png",
				Blob: base64.StdEncoding.EncodeToString(PNG)}}, nil
		})
	k.Server.AddResourceTemplate(mcp.NewResourceTemplate("kit://notes/{topic}", "Notes",
		mcp.WithTemplateDescription("Notes on a topic."), mcp.WithTemplateMIMEType("text/plain")),
		func(_ context.Context, r mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			k.reads.Add(1)
			topic := strings.TrimPrefix(r.Params.URI, "kit://notes/")
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: r.Params.URI, MIMEType: "text/plain", Text: "Notes on " + topic + "."}}, nil
		})
}

// Reads reports how many resources/read requests the server answered.
func (k *Kit) Reads() int64 { return k.reads.Load() }

// subscribed records a session's resources/subscribe (a server hook).
func (k *Kit) subscribed(ctx context.Context, _ any, req *mcp.SubscribeRequest, _ *mcp.EmptyResult) {
	sess := server.ClientSessionFromContext(ctx)
	if sess == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.subs == nil {
		k.subs = map[string][]string{}
	}
	k.subs[req.Params.URI] = append(k.subs[req.Params.URI], sess.SessionID())
}

// Subscribers reports how many sessions subscribed to uri.
func (k *Kit) Subscribers(uri string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.subs[uri])
}

// SetHandbook changes kit://handbook's text and sends notifications/resources/updated to the
// sessions subscribed to it.
func (k *Kit) SetHandbook(text string) {
	k.mu.Lock()
	k.handbook = text
	sessions := append([]string(nil), k.subs["kit://handbook"]...)
	k.mu.Unlock()
	for _, id := range sessions {
		// A session that ended is gone from the server: nothing to tell.
		_ = k.Server.SendNotificationToSpecificClient(id, mcp.MethodNotificationResourceUpdated, map[string]any{"uri": "kit://handbook"})
	}
}
