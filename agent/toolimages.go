package agent

import (
	"fmt"
	"relaybot/chat"
	"strings"
)

// Limits of the images a round's tools hand to a vision model: the common ground of the
// OpenAI-compatible APIs (OpenAI, Gemini and Anthropic-style gateways accept these formats and
// sizes; several cap the images of one request).
const (
	maxToolImages     = 4
	maxToolImageBytes = 5 << 20
)

// toolImageTypes are the image formats every vision API of the chat completions family accepts.
var toolImageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// toolImages collects the images a round's tools returned, for a vision model to see. Tool
// messages can only hold text, so the images follow them in a user message that says where they
// came from.
type toolImages struct {
	images  []chat.Image
	sources []string // tool name per image
	left    int      // images over the limits
}

func (ti *toolImages) add(tool string, files []chat.File) {
	for _, f := range files {
		mime := strings.ToLower(strings.TrimSpace(strings.Split(f.MIME, ";")[0]))
		if !toolImageTypes[mime] {
			continue
		}
		if len(ti.images) >= maxToolImages || len(f.Data) > maxToolImageBytes || len(f.Data) == 0 {
			ti.left++
			continue
		}
		ti.images = append(ti.images, chat.Image{MIME: mime, Data: f.Data})
		ti.sources = append(ti.sources, tool)
	}
}

// message is the user message that shows the images to the model; ok is false when there are none.
func (ti *toolImages) message() (chat.Message, bool) {
	if len(ti.images) == 0 {
		return chat.Message{}, false
	}
	var b strings.Builder
	b.WriteString("[Images returned by the tool calls above, in order: ")
	for i, src := range ti.sources {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "image %d from %s", i+1, src)
	}
	b.WriteString(".")
	if ti.left > 0 {
		fmt.Fprintf(&b, " %d more left out (at most %d images of %d MB each).", ti.left, maxToolImages, maxToolImageBytes>>20)
	}
	b.WriteString(" This message is from the system, not the user.]")
	return chat.Message{Role: chat.RoleUser, Content: b.String(), Images: ti.images}, true
}
