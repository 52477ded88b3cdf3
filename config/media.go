package config

import (
	"fmt"
	"math"
	"time"

	"relaybot/provider"
)

// Media limits the files users send: [media].
type Media struct {
	// MaxBytes is the largest file the bot reads (default 20 MB, Telegram's download limit).
	MaxBytes int64 `toml:"max_bytes"`
	// DocumentShare is the share of the primary model's context window (less its answer) the
	// documents of one message may fill; a longer document is cut with a note.
	DocumentShare float64 `toml:"document_share"`
}

// SpeechModel is one transcription endpoint: [speech] itself is the first, [[speech.fallbacks]]
// the others, tried in order with the chat models' fallback rules.
type SpeechModel struct {
	provider.Endpoint
	PricePerMinute float64 `toml:"price_per_minute"`
}

// Speech configures voice in and out: [speech].
type Speech struct {
	// SpeechModel is the first transcription endpoint: its keys stand at the top of [speech].
	SpeechModel

	Fallbacks []SpeechModel `toml:"fallbacks"`
	// MaxAudio is the longest recording transcribed.
	MaxAudio time.Duration `toml:"max_seconds"`
	// Reply is when answers are also spoken: "off", "when_spoken_to" or "always".
	Reply string `toml:"reply"`
	// MaxReplyChars is how much of an answer is spoken; the rest is left to the text.
	MaxReplyChars int `toml:"max_reply_chars"`
	// TTSModel, Voice and TTSBaseURL/TTSAPIKey (default: base_url and api_key) speak answers.
	TTSModel   string `toml:"tts_model"`
	Voice      string `toml:"voice"`
	TTSBaseURL string `toml:"tts_base_url"`
	TTSAPIKey  string `toml:"tts_api_key"`
}

// Candidates returns the transcription endpoints in order: none when [speech] sets no model.
func (s Speech) Candidates() []SpeechModel {
	if s.Model == "" {
		return nil
	}
	return append([]SpeechModel{s.SpeechModel}, s.Fallbacks...)
}

// defaultMedia and defaultSpeech are the defaults of [media] and [speech].
func defaultMedia() Media { return Media{MaxBytes: 20 << 20, DocumentShare: 0.25} }

func defaultSpeech() Speech {
	return Speech{SpeechModel: SpeechModel{Endpoint: provider.Endpoint{Timeout: defaultModelTimeout}}, MaxAudio: 10 * time.Minute, Reply: "off", MaxReplyChars: 1000, TTSModel: "tts-1", Voice: "alloy"}
}

// fillSpeechDefaults names the candidates and gives fallbacks the default timeout and the
// voice the transcription endpoint.
func (c *Config) fillSpeechDefaults() {
	s := &c.Speech
	if s.Name == "" {
		s.Name = s.Model
	}
	for i := range s.Fallbacks {
		f := &s.Fallbacks[i]
		if f.Name == "" {
			f.Name = f.Model
		}
		if f.Timeout == 0 {
			f.Timeout = defaultModelTimeout
		}
	}
	if s.TTSBaseURL == "" {
		s.TTSBaseURL = s.BaseURL
	}
	if s.TTSAPIKey == "" {
		s.TTSAPIKey = s.APIKey
	}
}

// validateMedia checks [media] and [speech].
func (c *Config) validateMedia(bad func(key, format string, args ...any), httpURL func(key, v string)) {
	if c.Media.MaxBytes < 1 || c.Media.MaxBytes > 2<<30 {
		bad("media.max_bytes", "must be between 1 and 2147483648, got %d", c.Media.MaxBytes)
	}
	if d := c.Media.DocumentShare; math.IsNaN(d) || d <= 0 || d > 1 {
		bad("media.document_share", "must be above 0 and at most 1, got %v", d)
	}
	s := c.Speech
	for i, m := range s.Candidates() {
		key := "speech"
		if i > 0 {
			key = fmt.Sprintf("speech.fallbacks[%d]", i-1)
		}
		switch {
		case m.BaseURL == "":
			bad(key+".base_url", "must be set")
		default:
			httpURL(key+".base_url", m.BaseURL)
		}
		if m.Model == "" {
			bad(key+".model", "must be set")
		}
		if m.Timeout < time.Second || m.Timeout > time.Hour {
			bad(key+".timeout_sec", "must be between 1 and 3600, got %s", inUnit("timeout_sec", m.Timeout))
		}
		if m.PricePerMinute < 0 || math.IsNaN(m.PricePerMinute) {
			bad(key+".price_per_minute", "must be 0 or more, got %v", m.PricePerMinute)
		}
	}
	if s.Model == "" && len(s.Fallbacks) > 0 {
		bad("speech.model", "must be set when [[speech.fallbacks]] are")
	}
	if s.MaxAudio < time.Second || s.MaxAudio > 24*time.Hour {
		bad("speech.max_seconds", "must be between 1 and 86400, got %s", inUnit("max_seconds", s.MaxAudio))
	}
	switch s.Reply {
	case "off":
	case "when_spoken_to", "always":
		if s.TTSModel == "" {
			bad("speech.tts_model", "must be set when speech.reply is %q", s.Reply)
		}
		if s.TTSBaseURL == "" {
			bad("speech.tts_base_url", "must be set (or speech.base_url) when speech.reply is %q", s.Reply)
		} else {
			httpURL("speech.tts_base_url", s.TTSBaseURL)
		}
	default:
		bad("speech.reply", "must be one of \"off\", \"when_spoken_to\", \"always\", got %q", s.Reply)
	}
	if s.MaxReplyChars < 1 || s.MaxReplyChars > 4096 {
		bad("speech.max_reply_chars", "must be between 1 and 4096 (the speech endpoint's limit), got %d", s.MaxReplyChars)
	}
}
