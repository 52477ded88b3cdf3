package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"relaybot/internal/testkit/files"
	"relaybot/internal/testkit/llm"
	tgkit "relaybot/internal/testkit/telegram"
)

// voiceResult is what the voice role measured.
type voiceResult struct {
	Samples int `json:"samples"`
	// TranscribeMs is the fake transcription endpoint's delay.
	TranscribeMs float64 `json:"transcribe_ms"`
	// Text and voice messages: the user's send → the model's first streamed token shown in the
	// chat (median and 95th percentile, milliseconds).
	TextFirstTokenP50  float64 `json:"text_first_token_p50_ms"`
	TextFirstTokenP95  float64 `json:"text_first_token_p95_ms"`
	VoiceFirstTokenP50 float64 `json:"voice_first_token_p50_ms"`
	VoiceFirstTokenP95 float64 `json:"voice_first_token_p95_ms"`
	// InFlight voice notes of NoteBytes each were held by a transcription endpoint at once;
	// BytesPerNote is the bot's anonymous memory growth per note.
	InFlight     int     `json:"in_flight"`
	NoteBytes    int     `json:"note_bytes"`
	BytesPerNote float64 `json:"bytes_per_note"`
}

// voiceMain measures what a voice note adds to the time to the first streamed token against
// a text message, and the memory a voice note in flight takes, on a `bot serve` process talking
// to the testkit's Telegram, model and transcription servers.
func voiceMain(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("loadtest voice", flag.ContinueOnError)
	n := fs.Int("n", 20, "messages of each kind, sent one at a time")
	transcribe := fs.Duration("transcribe", 300*time.Millisecond, "the transcription endpoint's latency")
	inFlight := fs.Int("in-flight", 50, "voice notes held in flight at once for the memory measure")
	noteKB := fs.Int("note-kb", 256, "size of each of those voice notes, in KB")
	bin := fs.String("bot", "", "bot binary (default: build ./cmd/bot)")
	src := fs.String("src", "", "module root to build the bot from (default: the current module)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 || *n > 1000 || *inFlight < 1 || *inFlight > 1000 || *noteKB < 1 || *noteKB > 20<<10 {
		return fmt.Errorf("voice: -n and -in-flight must be 1..1000, -note-kb 1..20480")
	}
	dir, err := os.MkdirTemp("", "loadtest-voice-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if *bin == "" {
		if *bin, err = buildBot(ctx, *src, dir); err != nil {
			return err
		}
	}
	model := llm.NewServer()
	defer model.Close()
	model.SetHandler(func(llm.Request) llm.Reply { return llm.Text("Heard", " you.") })
	release := make(chan struct{}) // closed once the memory measure has its notes in flight
	sp := llm.NewServer()
	defer sp.Close()
	sp.SetAudio(func(r llm.AudioRequest) llm.AudioReply {
		if len(r.File) > 64<<10 {
			<-release
			return llm.AudioReply{Text: "a long note"}
		}
		return llm.AudioReply{Text: "what is the weather", Delay: *transcribe}
	})
	tg, err := tgkit.New(tgkit.Options{})
	if err != nil {
		return err
	}
	defer tg.Close()
	cfg := fmt.Sprintf(`[storage]
dsn = %q
[[models]]
name = "load"
base_url = %q
model = "load-model"
[chat]
rate_limit_per_minute = 0
max_turns_in_flight = %d
[tools]
plugins = []
[telegram]
enabled = true
token = %q
api_endpoint = %q
drafts = "off"
rich = "off"
[admin]
enabled = true
listen = "127.0.0.1:0"
token = "voice-load-token-0123456789"
web_chat = false
[speech]
base_url = %q
model = "whisper-1"
max_seconds = 86400
`, filepath.Join(dir, "bot.db"), model.URL, *inFlight+8, tg.Token(), tg.Endpoint(), sp.URL)
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	bot, err := startBot(ctx, *bin, cfgPath, filepath.Join(dir, "bot.log"), "voice-load-token-0123456789", false)
	if err != nil {
		logText, _ := os.ReadFile(filepath.Join(dir, "bot.log"))
		return fmt.Errorf("%w\n%s", err, logText[max(0, len(logText)-2000):])
	}
	defer bot.stop(30 * time.Second)

	// firstToken sends one message and waits for the model's first token in the chat.
	chatID := int64(9000)
	firstToken := func(f *tgkit.File) (time.Duration, error) {
		chatID++
		c := tgkit.Chat{ID: chatID, Type: "private"}
		start := time.Now()
		tg.Send(tgkit.Inbound{Chat: c, From: tgkit.User{ID: chatID, FirstName: "load"}, Text: map[bool]string{true: "", false: "what is the weather"}[f != nil], File: f})
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			for _, m := range tg.BotMessages(chatID) {
				if strings.HasPrefix(m.Text, "Heard") {
					return time.Since(start), nil
				}
			}
			time.Sleep(time.Millisecond)
		}
		return 0, fmt.Errorf("no answer in chat %d within a minute", chatID)
	}
	note := files.OggOpus(4 * time.Second)
	var text, voice []time.Duration
	for range *n {
		d, err := firstToken(nil)
		if err != nil {
			return err
		}
		text = append(text, d)
		d, err = firstToken(&tgkit.File{Kind: "voice", MIME: "audio/ogg", Data: note, Duration: 4})
		if err != nil {
			return err
		}
		voice = append(voice, d)
	}

	// Memory: inFlight notes held by the transcription endpoint at once.
	before, err := procAnon(bot.pid())
	if err != nil {
		return err
	}
	big := files.OggOpus(time.Duration(*noteKB<<10/3) * 20 * time.Millisecond)
	for range *inFlight {
		chatID++
		tg.Send(tgkit.Inbound{Chat: tgkit.Chat{ID: chatID, Type: "private"}, From: tgkit.User{ID: chatID, FirstName: "load"},
			File: &tgkit.File{Kind: "voice", MIME: "audio/ogg", Data: big}})
	}
	var peak int64
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		held := 0
		for _, r := range sp.AudioRequests() {
			if len(r.File) > 64<<10 {
				held++
			}
		}
		if anon, err := procAnon(bot.pid()); err == nil {
			peak = max(peak, anon)
		}
		if held >= *inFlight {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 10 { // the growth settles as the last requests are read
		if anon, err := procAnon(bot.pid()); err == nil {
			peak = max(peak, anon)
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(release)

	res := voiceResult{Samples: *n, TranscribeMs: ms(*transcribe),
		TextFirstTokenP50: ms(pct(text, 50)), TextFirstTokenP95: ms(pct(text, 95)),
		VoiceFirstTokenP50: ms(pct(voice, 50)), VoiceFirstTokenP95: ms(pct(voice, 95)),
		InFlight: *inFlight, NoteBytes: len(big), BytesPerNote: float64(peak-before) / float64(*inFlight)}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "message\tfirst token p50\tp95\n")
	fmt.Fprintf(w, "text\t%.0f ms\t%.0f ms\n", res.TextFirstTokenP50, res.TextFirstTokenP95)
	fmt.Fprintf(w, "voice note (4 s, transcription %.0f ms)\t%.0f ms\t%.0f ms\n", res.TranscribeMs, res.VoiceFirstTokenP50, res.VoiceFirstTokenP95)
	fmt.Fprintf(w, "\nmemory: %d voice notes of %d KB in flight: %.0f KB each\n", res.InFlight, res.NoteBytes>>10, res.BytesPerNote/1024)
	return w.Flush()
}

// pct returns the p-th percentile of ds.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
