package mcp

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"relaybot/chat"
	"relaybot/tools"
)

// unknownToolError is the error of an isError result without any text.
const unknownToolError = "Unknown error from MCP tool"

// convertResult turns a tool result into the bot's: text parts joined by newlines, images and
// audio as files for the final reply, embedded text resources inline, other parts as a short
// JSON description. The result is not capped here: tools.Manager caps what goes to the model, in
// one place with one marker. An isError result is an error carrying the result's text.
func convertResult(tool string, res *mcpgo.CallToolResult) (tools.Result, error) {
	if res == nil {
		return tools.Result{}, nil
	}
	if res.IsError {
		var texts []string
		for _, c := range res.Content {
			if t, ok := mcpgo.AsTextContent(c); ok && t.Text != "" {
				texts = append(texts, t.Text)
			}
		}
		if len(texts) == 0 {
			return tools.Result{}, errors.New(unknownToolError)
		}
		return tools.Result{}, errors.New(strings.Join(texts, "\n"))
	}
	var out tools.Result
	var parts []string
	for i, c := range res.Content {
		if t, ok := mcpgo.AsTextContent(c); ok {
			parts = append(parts, t.Text)
			continue
		}
		if im, ok := mcpgo.AsImageContent(c); ok {
			parts = appendFile(&out, parts, tool, i, "image", im.Data, im.MIMEType)
			continue
		}
		if au, ok := mcpgo.AsAudioContent(c); ok {
			parts = appendFile(&out, parts, tool, i, "audio", au.Data, au.MIMEType)
			continue
		}
		if er, ok := mcpgo.AsEmbeddedResource(c); ok {
			parts = append(parts, embedded(er))
			continue
		}
		parts = append(parts, describe(c))
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	out.Text = strings.Join(parts, "\n")
	return out, nil
}

func appendFile(out *tools.Result, parts []string, tool string, i int, kind, data, mimeType string) []string {
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return append(parts, fmt.Sprintf("[%s from the tool could not be decoded: %v]", kind, err))
	}
	out.Files = append(out.Files, chat.File{
		Name: fmt.Sprintf("%s-%d%s", tool, i+1, extension(mimeType)),
		MIME: mimeType,
		Data: b,
	})
	return parts
}

var extensions = map[string]string{
	"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp",
	"image/svg+xml": ".svg", "audio/mpeg": ".mp3", "audio/mp3": ".mp3", "audio/wav": ".wav",
	"audio/x-wav": ".wav", "audio/ogg": ".ogg", "audio/webm": ".webm",
}

func extension(mimeType string) string {
	base, _, _ := mime.ParseMediaType(mimeType)
	if ext, ok := extensions[base]; ok {
		return ext
	}
	if exts, err := mime.ExtensionsByType(base); err == nil && len(exts) > 0 {
		return exts[0]
	}
	return ".bin"
}

// embedded renders an embedded resource: a JSON header line, then its text. Binary resources are
// described, not inlined.
func embedded(er *mcpgo.EmbeddedResource) string {
	if t, ok := mcpgo.AsTextResourceContents(er.Resource); ok {
		head, _ := json.Marshal(map[string]any{"type": "resource", "uri": t.URI, "mimeType": t.MIMEType})
		return string(head) + "\n" + t.Text
	}
	if b, ok := mcpgo.AsBlobResourceContents(er.Resource); ok {
		head, _ := json.Marshal(map[string]any{
			"type": "resource", "uri": b.URI, "mimeType": b.MIMEType,
			"note": "binary content not shown", "base64_chars": len(b.Blob),
		})
		return string(head)
	}
	return describe(er)
}

// describe renders a content part the bot does not inline (resource links and unknown kinds)
// as its JSON.
func describe(c any) string {
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Sprintf("[content of type %T]", c)
	}
	return string(b)
}
