package speech_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"relaybot/chat"
	"relaybot/internal/testkit/files"
	"relaybot/internal/testkit/llm"
	"relaybot/provider"
	"relaybot/speech"
)

func TestTranscribeFallsBackLikeTheChatModels(t *testing.T) {
	voice := files.OggOpus(3 * time.Second)
	for _, tc := range []struct {
		name       string
		first      int // status of the first endpoint
		wantText   string
		wantCalls  int
		wantErrSub string
	}{
		{name: "primary answers", first: 200, wantText: "hello from the primary", wantCalls: 1},
		{name: "overloaded primary falls back", first: http.StatusServiceUnavailable, wantText: "hello from the fallback", wantCalls: 2},
		{name: "rate-limited primary falls back", first: http.StatusTooManyRequests, wantText: "hello from the fallback", wantCalls: 2},
		{name: "a wrong key stops at once", first: http.StatusUnauthorized, wantCalls: 1, wantErrSub: "auth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			primary, fallback := llm.NewServer(), llm.NewServer()
			defer primary.Close()
			defer fallback.Close()
			primary.SetAudio(func(llm.AudioRequest) llm.AudioReply {
				return llm.AudioReply{Status: tc.first, Error: "nope", Text: "hello from the primary"}
			})
			fallback.SetAudio(func(llm.AudioRequest) llm.AudioReply { return llm.AudioReply{Text: "hello from the fallback"} })
			var seen observed
			c, err := speech.New(speech.Options{Observer: &seen, Candidates: []provider.Endpoint{
				{Name: "primary", BaseURL: primary.URL, Model: "whisper-1"},
				{Name: "fallback", BaseURL: fallback.URL, Model: "whisper-large-v3"},
			}})
			if err != nil {
				t.Fatal(err)
			}
			text, calls, err := c.Transcribe(context.Background(), speech.Audio{MIME: "audio/ogg", Data: voice, Duration: 3 * time.Second})
			if tc.wantErrSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrSub) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErrSub)
				}
			} else if err != nil || text != tc.wantText {
				t.Fatalf("Transcribe = %q, %v; want %q", text, err, tc.wantText)
			}
			if len(calls) != tc.wantCalls || len(seen.calls) != tc.wantCalls {
				t.Fatalf("%d calls recorded and %d observed, want %d: %+v", len(calls), len(seen.calls), tc.wantCalls, calls)
			}
			last := calls[len(calls)-1]
			if last.Audio != 3*time.Second || (tc.wantCalls == 2 && (last.Model != "fallback" || last.FallbackReason == "")) {
				t.Fatalf("last call %+v: want 3 s of audio and, after a fallback, its reason", last)
			}
			if tc.wantErrSub == "" {
				reqs := append(primary.AudioRequests(), fallback.AudioRequests()...)
				got := reqs[len(reqs)-1]
				if got.FileName != "audio.ogg" || string(got.File[:4]) != "OggS" {
					t.Fatalf("sent %q (%d bytes): want the OGG file as it is", got.FileName, len(got.File))
				}
			}
		})
	}
}

func TestSpeakReturnsOggOpus(t *testing.T) {
	srv := llm.NewServer()
	defer srv.Close()
	c, err := speech.New(speech.Options{Voice: speech.Voice{Endpoint: provider.Endpoint{BaseURL: srv.URL, Model: "tts-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	data, call, err := c.Speak(context.Background(), "Hello there, this is the answer.")
	if err != nil {
		t.Fatal(err)
	}
	if err := files.CheckOgg(data); err != nil {
		t.Fatalf("spoken answer is not OGG: %v", err)
	}
	if call.Status != chat.StatusOK || call.Audio != 0 {
		t.Fatalf("call %+v: want ok, with no transcribed audio to price", call)
	}
	req := srv.AudioRequests()[0]
	if req.Fields["response_format"] != "opus" || req.Voice != "alloy" {
		t.Fatalf("request %+v: want opus in the default voice", req)
	}
}

// observed is a provider.Observer that keeps the calls it hears of.
type observed struct{ calls []chat.ModelCall }

func (o *observed) ModelCallFinished(_ context.Context, c chat.ModelCall) {
	o.calls = append(o.calls, c)
}
