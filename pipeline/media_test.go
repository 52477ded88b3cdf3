package pipeline

import (
	"strings"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/internal/testkit/llm"
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
