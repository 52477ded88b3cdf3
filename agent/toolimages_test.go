package agent_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"relaybot/agent"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	"relaybot/provider"
	"relaybot/tools"
)

// screenshotExecutor answers every call with a text and the given files, as an MCP tool with
// image content does.
type screenshotExecutor struct{ files []chat.File }

func (e screenshotExecutor) Execute(_ context.Context, call tools.Call) tools.Outcome {
	return tools.Outcome{Content: "took a screenshot (sent as a file)", Files: e.files, Status: audit.StatusOK}
}

func (e screenshotExecutor) Skip(_ context.Context, _ tools.Call, reason error) tools.Outcome {
	return tools.NotRun(reason)
}

func TestToolImagesReachAVisionModel(t *testing.T) {
	png := chat.File{Name: "shot.png", MIME: "image/png", Data: []byte("\x89PNG\r\n\x1a\nfake")}
	huge := chat.File{Name: "huge.png", MIME: "image/png", Data: bytes.Repeat([]byte{1}, 5<<20+1)}
	pdf := chat.File{Name: "doc.pdf", MIME: "application/pdf", Data: []byte("%PDF")}
	many := []chat.File{png, png, png, png, png}
	cases := []struct {
		name       string
		vision     bool
		files      []chat.File
		wantImages int
		wantNote   string
	}{
		{name: "vision model sees the image", vision: true, files: []chat.File{png, pdf}, wantImages: 1},
		{name: "at most four images", vision: true, files: many, wantImages: 4, wantNote: "1 more left out"},
		{name: "an image over 5 MB is left out", vision: true, files: []chat.File{huge, png}, wantImages: 1, wantNote: "1 more left out"},
		{name: "no images: no extra message", vision: true, files: []chat.File{pdf}},
		{name: "a model without vision gets none", vision: false, files: []chat.File{png}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServers(t, 1)[0]
			srv.Push(llm.ToolCalls(llm.Call{ID: "c1", Name: "screenshot", Args: []string{`{}`}}), llm.Text("I see a login page."))
			r, err := agent.NewRunner([]agent.Model{{Endpoint: provider.Endpoint{Name: "m", BaseURL: srv.URL, Model: "fake", Timeout: 10 * time.Second}, SupportsTools: true, SupportsVision: tc.vision}}, agent.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res := r.Run(t.Context(), agent.Request{Messages: userTurn("what is on screen?"), Tools: shellSpec, Executor: screenshotExecutor{files: tc.files}, Stream: true}, nil)
			mustOK(t, res)
			msgs := srv.Requests()[1].Messages
			last := msgs[len(msgs)-1]
			if tc.wantImages == 0 {
				if last.Role != "tool" {
					t.Fatalf("the model got a %s message after the tool result (%q), want none", last.Role, last.Content)
				}
				return
			}
			if last.Role != "user" || msgs[len(msgs)-2].Role != "tool" {
				t.Fatalf("messages end with %s, %s; want the tool result, then the images", msgs[len(msgs)-2].Role, last.Role)
			}
			if len(last.ImageURLs) != tc.wantImages || !strings.HasPrefix(last.ImageURLs[0], "data:image/png;base64,") {
				t.Errorf("images sent = %d (%.40v), want %d PNG data URLs", len(last.ImageURLs), last.ImageURLs, tc.wantImages)
			}
			if !strings.Contains(last.Content, "from screenshot") || !strings.Contains(last.Content, tc.wantNote) {
				t.Errorf("image message text = %q, want it to name the tool and say %q", last.Content, tc.wantNote)
			}
			if got := fmt.Sprint(roles(res.Messages)); got != "[assistant tool assistant]" {
				t.Errorf("history = %s; the images (whose bytes are not stored) must not enter it", got)
			}
		})
	}
}
