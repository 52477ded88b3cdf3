package mcp

import (
	"context"
	"encoding/base64"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// The Kit's resources (resources/list, resources/read), served by mcp-go as the spec has it: a
// URI the server does not have is refused ("resource not found").
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
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: "kit://handbook", MIMEType: "text/markdown", Text: Handbook}}, nil
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
