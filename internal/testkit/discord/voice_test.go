package discord

import (
	"io"
	"net/http"
	"testing"
)

// A voice message is one audio/ogg attachment with its duration and waveform and no content:
// Post refuses anything else, and the message's flags and attachment carry what Discord sends.
// Its attachment downloads from the loopback CDN.
func TestVoiceMessagesLookLikeDiscords(t *testing.T) {
	s := New(Config{})
	defer s.Close()
	voice := Attachment{Filename: "voice-message.ogg", ContentType: "audio/ogg", Data: []byte("OggS..."), DurationSecs: 2.5, Waveform: "AAAA"}
	for _, bad := range []UserMessage{
		{ChannelID: "9", AuthorID: "1", Voice: true, Content: "words", Attachments: []Attachment{voice}},
		{ChannelID: "9", AuthorID: "1", Voice: true},
		{ChannelID: "9", AuthorID: "1", Voice: true, Attachments: []Attachment{{Filename: "a.mp3", ContentType: "audio/mpeg", Data: []byte("x"), DurationSecs: 1, Waveform: "A"}}},
	} {
		if _, err := s.Post(bad); err == nil {
			t.Fatalf("Post(%+v) took a voice message Discord would not send", bad)
		}
	}
	// No bot is connected here, so the dispatch fails; the message is stored as users see it.
	_, _ = s.Post(UserMessage{ChannelID: "9", AuthorID: "1", Voice: true, Attachments: []Attachment{voice}})
	s.mu.Lock()
	ids := s.order["9"]
	if len(ids) != 1 {
		s.mu.Unlock()
		t.Fatalf("channel holds %d messages, want the voice message", len(ids))
	}
	m := s.messages[ids[0]]
	js := s.messageJSON(m)
	s.mu.Unlock()
	if m.Flags&FlagVoiceMessage == 0 {
		t.Fatalf("flags %b: no IS_VOICE_MESSAGE", m.Flags)
	}
	att := js["attachments"].([]any)[0].(map[string]any)
	if att["duration_secs"] != 2.5 || att["waveform"] != "AAAA" {
		t.Fatalf("attachment %v: want duration_secs and waveform", att)
	}
	resp, err := http.Get(att["url"].(string))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(data) != "OggS..." || resp.Header.Get("Content-Type") != "audio/ogg" {
		t.Fatalf("CDN answered %q (%s)", data, resp.Header.Get("Content-Type"))
	}
}
