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

// voiceOptions are the voice role's flags.
type voiceOptions struct {
	n, inFlight, noteKB int
	transcribe          time.Duration
	bin, src            string
	asJSON              bool
}

// parseVoiceFlags reads and checks the voice role's flags.
func parseVoiceFlags(args []string) (voiceOptions, error) {
	var vo voiceOptions
	fs := flag.NewFlagSet("loadtest voice", flag.ContinueOnError)
	fs.IntVar(&vo.n, "n", 20, "messages of each kind, sent one at a time")
	fs.DurationVar(&vo.transcribe, "transcribe", 300*time.Millisecond, "the transcription endpoint's latency")
	fs.IntVar(&vo.inFlight, "in-flight", 50, "voice notes held in flight at once for the memory measure")
	fs.IntVar(&vo.noteKB, "note-kb", 256, "size of each of those voice notes, in KB")
	fs.StringVar(&vo.bin, "bot", "", "bot binary (default: build ./cmd/bot)")
	fs.StringVar(&vo.src, "src", "", "module root to build the bot from (default: the current module)")
	fs.BoolVar(&vo.asJSON, "json", false, "print the result as JSON")
	if err := fs.Parse(args); err != nil {
		return vo, err
	}
	if vo.n < 1 || vo.n > 1000 || vo.inFlight < 1 || vo.inFlight > 1000 || vo.noteKB < 1 || vo.noteKB > 20<<10 {
		return vo, fmt.Errorf("voice: -n and -in-flight must be 1..1000, -note-kb 1..20480")
	}
	return vo, nil
}

// voiceMain measures what a voice note adds to the time to the first streamed token against
// a text message, and the memory a voice note in flight takes, on a `bot serve` process talking
// to the testkit's Telegram, model and transcription servers.
func voiceMain(ctx context.Context, args []string, stdout io.Writer) error {
	vo, err := parseVoiceFlags(args)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "loadtest-voice-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if vo.bin == "" {
		if vo.bin, err = buildBot(ctx, vo.src, dir); err != nil {
			return err
		}
	}
	v, err := startVoice(ctx, vo, dir)
	if err != nil {
		return err
	}
	defer v.close()
	note := files.OggOpus(4 * time.Second)
	var text, voice []time.Duration
	for range vo.n {
		d, err := v.firstToken(nil)
		if err != nil {
			return err
		}
		text = append(text, d)
		d, err = v.firstToken(&tgkit.File{Kind: "voice", MIME: "audio/ogg", Data: note, Duration: 4})
		if err != nil {
			return err
		}
		voice = append(voice, d)
	}
	perNote, noteBytes, err := v.notesInFlight(vo)
	if err != nil {
		return err
	}
	res := voiceResult{Samples: vo.n, TranscribeMs: ms(vo.transcribe),
		TextFirstTokenP50: ms(pct(text, 50)), TextFirstTokenP95: ms(pct(text, 95)),
		VoiceFirstTokenP50: ms(pct(voice, 50)), VoiceFirstTokenP95: ms(pct(voice, 95)),
		InFlight: vo.inFlight, NoteBytes: noteBytes, BytesPerNote: perNote}
	if vo.asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	return res.write(stdout)
}

// voiceRun is the voice role's bot and the fakes it talks to.
type voiceRun struct {
	model, sp *llm.Server
	tg        *tgkit.Server
	bot       *botProcess
	release   chan struct{} // closed once the memory measure has its notes in flight
	released  bool
	chatID    int64 // the last chat used: every message goes to a new one
}

// startVoice starts the fake model, the transcription endpoint (holding long notes until
// release), the fake Telegram and the bot.
func startVoice(ctx context.Context, vo voiceOptions, dir string) (*voiceRun, error) {
	v := &voiceRun{model: llm.NewServer(), sp: llm.NewServer(), release: make(chan struct{}), chatID: 9000}
	v.model.SetHandler(func(llm.Request) llm.Reply { return llm.Text("Heard", " you.") })
	v.sp.SetAudio(func(r llm.AudioRequest) llm.AudioReply {
		if len(r.File) > 64<<10 {
			<-v.release
			return llm.AudioReply{Text: "a long note"}
		}
		return llm.AudioReply{Text: "what is the weather", Delay: vo.transcribe}
	})
	tg, err := tgkit.New(tgkit.Options{})
	if err != nil {
		v.close()
		return nil, err
	}
	v.tg = tg
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(voiceConfig(dir, v.model.URL, v.sp.URL, tg, vo.inFlight+8)), 0o600); err != nil {
		v.close()
		return nil, err
	}
	bot, err := startBot(ctx, vo.bin, cfgPath, filepath.Join(dir, "bot.log"), voiceAdminToken, false)
	if err != nil {
		v.close()
		logText, _ := os.ReadFile(filepath.Join(dir, "bot.log"))
		return nil, fmt.Errorf("%w\n%s", err, logText[max(0, len(logText)-2000):])
	}
	v.bot = bot
	return v, nil
}

// close stops the bot and the fakes, releasing the notes held.
func (v *voiceRun) close() {
	if !v.released {
		close(v.release)
		v.released = true
	}
	if v.bot != nil {
		_ = v.bot.stop(30 * time.Second)
	}
	if v.tg != nil {
		v.tg.Close()
	}
	v.sp.Close()
	v.model.Close()
}

// voiceAdminToken is the voice role's admin token.
const voiceAdminToken = "voice-load-token-0123456789"

// voiceConfig is the voice role's bot config: drafts and rich messages off, so the first
// token shows as a sent message.
func voiceConfig(dir, modelURL, speechURL string, tg *tgkit.Server, maxInFlight int) string {
	return fmt.Sprintf(`[storage]
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
token = %q
web_chat = false
[speech]
base_url = %q
model = "whisper-1"
max_seconds = 86400
`, filepath.Join(dir, "bot.db"), modelURL, maxInFlight, tg.Token(), tg.Endpoint(), voiceAdminToken, speechURL)
}

// firstToken sends one message (a voice note when f is set) in a new chat and waits for the
// model's first token in the chat.
func (v *voiceRun) firstToken(f *tgkit.File) (time.Duration, error) {
	v.chatID++
	chatID := v.chatID
	text := "what is the weather"
	if f != nil {
		text = ""
	}
	start := time.Now()
	v.tg.Send(tgkit.Inbound{Chat: tgkit.Chat{ID: chatID, Type: "private"}, From: tgkit.User{ID: chatID, FirstName: "load"}, Text: text, File: f})
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		for _, m := range v.tg.BotMessages(chatID) {
			if strings.HasPrefix(m.Text, "Heard") {
				return time.Since(start), nil
			}
		}
		time.Sleep(time.Millisecond)
	}
	return 0, fmt.Errorf("no answer in chat %d within a minute", chatID)
}

// notesInFlight sends inFlight voice notes of noteKB each, which the transcription endpoint
// holds, and returns the bot's anonymous memory growth per note at its peak and a note's size.
func (v *voiceRun) notesInFlight(vo voiceOptions) (perNote float64, noteBytes int, err error) {
	before, err := procAnon(v.bot.pid())
	if err != nil {
		return 0, 0, err
	}
	big := files.OggOpus(time.Duration(vo.noteKB<<10/3) * 20 * time.Millisecond)
	for range vo.inFlight {
		v.chatID++
		v.tg.Send(tgkit.Inbound{Chat: tgkit.Chat{ID: v.chatID, Type: "private"}, From: tgkit.User{ID: v.chatID, FirstName: "load"},
			File: &tgkit.File{Kind: "voice", MIME: "audio/ogg", Data: big}})
	}
	var peak int64
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		held := 0
		for _, r := range v.sp.AudioRequests() {
			if len(r.File) > 64<<10 {
				held++
			}
		}
		if anon, err := procAnon(v.bot.pid()); err == nil {
			peak = max(peak, anon)
		}
		if held >= vo.inFlight {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 10 { // the growth settles as the last requests are read
		if anon, err := procAnon(v.bot.pid()); err == nil {
			peak = max(peak, anon)
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(v.release)
	v.released = true
	return float64(peak-before) / float64(vo.inFlight), len(big), nil
}

// write prints the result as a table.
func (res voiceResult) write(stdout io.Writer) error {
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
