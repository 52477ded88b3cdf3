package config

import (
	"strings"
	"testing"
	"time"
)

func TestMediaAndSpeechKeysAreCheckedByName(t *testing.T) {
	speech := "[speech]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"whisper-1\"\n"
	for _, tc := range []struct{ name, toml, want string }{
		{"max bytes", minimal + "[media]\nmax_bytes = 0\n", "media.max_bytes: must be between 1 and 2147483648, got 0"},
		{"document share", minimal + "[media]\ndocument_share = 1.5\n", "media.document_share: must be above 0 and at most 1, got 1.5"},
		{"no base url", minimal + "[speech]\nmodel = \"whisper-1\"\n", "speech.base_url: must be set"},
		{"fallback without model", minimal + speech + "[[speech.fallbacks]]\nbase_url = \"http://127.0.0.1:9/v1\"\n", "speech.fallbacks[0].model: must be set"},
		{"fallbacks without a first", minimal + "[[speech.fallbacks]]\nbase_url = \"http://h/v1\"\nmodel = \"m\"\n", "speech.model: must be set when [[speech.fallbacks]] are"},
		{"negative price", minimal + speech + "price_per_minute = -1.0\n", "speech.price_per_minute: must be 0 or more, got -1"},
		{"reply enum", minimal + speech + "reply = \"sometimes\"\n", `speech.reply: must be one of "off", "when_spoken_to", "always", got "sometimes"`},
		{"reply without endpoint", minimal + "[speech]\nreply = \"always\"\n", `speech.tts_base_url: must be set (or speech.base_url) when speech.reply is "always"`},
		{"reply chars", minimal + speech + "max_reply_chars = 5000\n", "speech.max_reply_chars: must be between 1 and 4096 (the speech endpoint's limit), got 5000"},
		{"max seconds", minimal + speech + "max_seconds = 0\n", "speech.max_seconds: must be between 1 and 86400, got 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.toml), func(string) (string, bool) { return "", false })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestSpeechCandidatesAndDefaults(t *testing.T) {
	cfg, err := Parse([]byte(minimal+`
[speech]
base_url = "http://127.0.0.1:9/v1"
api_key = "${KEY}"
model = "whisper-1"
reply = "when_spoken_to"
[[speech.fallbacks]]
base_url = "http://127.0.0.1:10/v1"
model = "whisper-large-v3"
`), func(k string) (string, bool) { return "secret-" + k, true })
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Speech.Candidates()
	if len(c) != 2 || c[0].Name != "whisper-1" || c[0].APIKey != "secret-KEY" || c[1].Name != "whisper-large-v3" || c[1].Timeout != 2*time.Minute {
		t.Fatalf("candidates %+v", c)
	}
	if cfg.Speech.TTSBaseURL != "http://127.0.0.1:9/v1" || cfg.Speech.TTSAPIKey != "secret-KEY" || cfg.Media.MaxBytes != 20<<20 {
		t.Fatalf("speech %+v, media %+v: want the voice on the first endpoint and the 20 MB default", cfg.Speech, cfg.Media)
	}
}
