package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	"relaybot/store"
)

// Without a transcription endpoint, a voice note is answered with one line saying so and no
// model call; a caption beside it still reaches the model, told what was not read.
func TestVoiceWithoutSpeechIsToldNotDropped(t *testing.T) {
	h := newHarness(t, Options{})
	h.llm.Push(llm.Text("Answered the caption."))
	voice := adapters.Attachment{Kind: adapters.Voice, MIME: "audio/ogg", Size: 2000, Duration: 2 * time.Second,
		Fetch: adapters.BytesAttachment([]byte("OggS"))}

	in := privateMsg("51", "1", "")
	in.Attachments = []adapters.Attachment{voice}
	out := &recResponder{}
	<-h.handle(in, out)
	if n := out.Notices(); len(n) != 1 || n[0] != "The voice note was not transcribed: speech to text is not set up on this bot." {
		t.Fatalf("notices %q, want the one line", n)
	}
	if h.llm.RequestCount() != 0 {
		t.Fatalf("the model was asked about a voice note nobody transcribed")
	}

	in = privateMsg("51", "2", "and this caption")
	in.Attachments = []adapters.Attachment{voice}
	out = &recResponder{}
	<-h.handle(in, out)
	reqs := h.llm.Requests()
	got := lastUserContent(reqs[len(reqs)-1])
	if !strings.HasPrefix(got, "and this caption") || !strings.Contains(got, "[Not read: The voice note was not transcribed") {
		t.Fatalf("the model was given %q, want the caption and a note of the voice note", got)
	}
}

func TestSpeakableLeavesOutFoldsAndMarkup(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"**Sunny** in `Paris`.", "Sunny in Paris."},
		{"<details>\n<summary>💭 Thought</summary>\n\nhmm\n\n</details>\n\nIt is sunny.", "It is sunny."},
		{"-# ✓ weather 1.2 s\nIt rains.", "It rains."},
		{strings.Repeat("One sentence here. ", 10), strings.TrimSpace(strings.Repeat("One sentence here. ", 3))},
	} {
		if got := speakable(tc.in, 60); got != tc.want {
			t.Errorf("speakable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestATurnsFilesAreSavedBothWays: the turn's row names what the member sent (a photo, a
// document) and what the bot sent on its answer (a tool's file), in that order, with their
// sizes, so the admin's conversation page can list them.
func TestATurnsFilesAreSavedBothWays(t *testing.T) {
	h := newHarness(t, Options{})
	h.llm.Push(llm.ToolCalls(llm.Call{ID: "c1", Name: "echo", Args: []string{`{"text":"hello file"}`}}), llm.Text("Sent you a file."))
	in := privateMsg("52", "1", "read this")
	in.Images = []adapters.Image{{MIME: "image/png", Data: []byte("not really a png")}}
	in.Attachments = []adapters.Attachment{{Kind: adapters.Document, MIME: "text/plain", Name: "notes.txt",
		Fetch: adapters.BytesAttachment([]byte("twelve bytes"))}}
	<-h.handle(in, &recResponder{})
	ctx := context.Background()
	conv, err := h.store.Conversations.Conversation(ctx, chat.Key{Platform: chat.Telegram, ChatID: "52", UserID: "52"})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := h.store.Transcripts.Transcript(ctx, conv.ID, store.Paging{})
	if err != nil || len(tr.Turns) != 1 {
		t.Fatalf("conversation %d reads %d turns, %v\n%s", conv.ID, len(tr.Turns), err, h.logs.String())
	}
	var got []string
	for _, f := range tr.Turns[0].Files {
		got = append(got, fmt.Sprintf("%v %s %s %s %d", f.FromBot, f.Kind, f.Name, f.MIME, f.Size))
	}
	want := []string{"false image image 1 image/png 16", "false document notes.txt text/plain 12", "true file echo.txt text/plain 10"}
	if !slices.Equal(got, want) {
		t.Errorf("the turn's files are %q, want %q", got, want)
	}
}
