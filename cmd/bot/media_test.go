package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"relaybot/chat"
	dtk "relaybot/internal/testkit/discord"
	"relaybot/internal/testkit/files"
	"relaybot/internal/testkit/llm"
	tgkit "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
	"relaybot/store"
)

// speechWorld is two transcription endpoints (the second also speaks) whose failures a test
// turns on.
type speechWorld struct {
	primary, fallback *llm.Server
	primaryDown       atomic.Bool
	fallbackDown      atomic.Bool
	text              atomic.Value // string: what both transcribe every recording to
}

func newSpeechWorld(t *testing.T) *speechWorld {
	w := &speechWorld{primary: llm.NewServer(), fallback: llm.NewServer()}
	t.Cleanup(w.primary.Close)
	t.Cleanup(w.fallback.Close)
	w.text.Store("please summarise the weather report")
	reply := func(down *atomic.Bool) llm.AudioHandler {
		return func(r llm.AudioRequest) llm.AudioReply {
			if down.Load() && r.Path == "transcriptions" {
				return llm.AudioReply{Status: http.StatusServiceUnavailable, Error: "overloaded"}
			}
			return llm.AudioReply{Text: w.text.Load().(string)}
		}
	}
	w.primary.SetAudio(reply(&w.primaryDown))
	w.fallback.SetAudio(reply(&w.fallbackDown))
	return w
}

// apply adds the world's [media] and [speech] config to c: the primary, the fallback, voice
// answers when spoken to (spoken by the fallback's server).
func (w *speechWorld) apply(c *tomlConfig) *tomlConfig {
	return c.set("media", "max_bytes", 20<<20).
		set("speech", "name", "whisper-primary", "base_url", w.primary.URL, "model", "whisper-1",
			"price_per_minute", 0.006, "max_seconds", 120, "reply", "when_spoken_to", "tts_base_url", w.fallback.URL).
		set("speech.fallbacks", "name", "whisper-fallback", "base_url", w.fallback.URL, "model", "whisper-large-v3")
}

// answerEcho makes the model answer every message with the length of its last user message
// and its first and last words, so a test reads from the chat what the model was given.
func answerEcho(r llm.Request) llm.Reply {
	u := lastUser(r)
	f := strings.Fields(u)
	if len(f) == 0 {
		return llm.Text("empty")
	}
	word := func(s string) string { return strings.Trim(s, `"[]().,?!:`) }
	return llm.Text(fmt.Sprintf("I read %d characters, from %s to %s.", len(u), word(f[0]), word(f[len(f)-1])))
}

// Voice notes, PDFs, logs, oversized and unreadable files on Telegram, end to end: what the
// user sees, what the model is given, what the store keeps.
func TestTelegramVoiceAndDocuments(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	sp := newSpeechWorld(t)
	e.llm.SetHandler(answerEcho)
	stop := e.start(sp.apply(e.toml()).parse(t))
	const alice = 4100
	sendFile := func(f tgkit.File, caption string) {
		e.tg.Send(tgkit.Inbound{Chat: private(alice), From: user(alice), Text: caption, File: &f})
	}
	lastPrompt := func() string {
		rs := e.llm.Requests()
		if len(rs) == 0 {
			return ""
		}
		return lastUser(rs[len(rs)-1])
	}

	t.Run("a voice note is transcribed, shown folded, answered and spoken", func(t *testing.T) {
		sendFile(tgkit.File{Kind: "voice", MIME: "audio/ogg", Data: files.OggOpus(3 * time.Second), Duration: 3}, "")
		transcript := e.waitBotText(alice, "the transcript", contains("please summarise the weather report"))
		if !strings.HasPrefix(transcript, "🎤 Transcript") {
			t.Fatalf("transcript shown as %q, want it under the 🎤 Transcript fold", transcript)
		}
		var folded bool
		for _, m := range e.tg.BotMessages(alice) {
			if strings.Contains(m.Text, "weather report") && slices.ContainsFunc(m.Entities, func(en tgkit.Entity) bool { return en.Type == "expandable_blockquote" }) {
				folded = true
			}
		}
		if !folded {
			t.Fatalf("the transcript is not in an expandable blockquote: %+v", e.tg.BotMessages(alice))
		}
		e.waitBotText(alice, "the answer to the voice note", contains("from please to report"))
		wait.For(t, "the spoken answer after the text", func() bool {
			ms := e.tg.BotMessages(alice)
			return len(ms) > 0 && ms[len(ms)-1].Kind == "voice" && files.CheckOgg(ms[len(ms)-1].Data) == nil
		})
		if got := lastPrompt(); got != "please summarise the weather report" {
			t.Fatalf("the model was given %q, want the transcript", got)
		}
	})

	t.Run("an audio file and a video note are transcribed too", func(t *testing.T) {
		sp.text.Store("the audio file says hello")
		sendFile(tgkit.File{Kind: "audio", Name: "memo.ogg", MIME: "audio/ogg", Data: files.OggOpus(2 * time.Second), Duration: 2}, "")
		e.waitBotText(alice, "the audio file's answer", contains("from the to hello"))
		sp.text.Store("the video note says goodbye")
		sendFile(tgkit.File{Kind: "video_note", Data: files.MP4(2 * time.Second), Duration: 2}, "")
		e.waitBotText(alice, "the video note's answer", contains("from the to goodbye"))
		reqs := sp.primary.AudioRequests()
		if last := reqs[len(reqs)-1]; last.FileName != "video_note.mp4" {
			t.Fatalf("the video note was sent as %q, want video_note.mp4", last.FileName)
		}
		sp.text.Store("please summarise the weather report")
	})

	t.Run("a three-page PDF reaches the model", func(t *testing.T) {
		pdf := files.PDF([][]string{{"Quarterly report, page one."}, {"Revenue grew on page two."}, {"Outlook closes page three."}})
		sendFile(tgkit.File{Kind: "document", Name: "report.pdf", MIME: "application/pdf", Data: pdf}, "what does it say?")
		e.waitBotText(alice, "the answer to the PDF", contains("from what to report.pdf"))
		got := lastPrompt()
		for _, want := range []string{"what does it say?", "PDF, 3 pages", "page one", "page two", "closes page three"} {
			if !strings.Contains(got, want) {
				t.Fatalf("the model was not given %q:\n%s", want, got)
			}
		}
	})

	t.Run("/retry answers the PDF again from the stored text", func(t *testing.T) {
		n := e.llm.RequestCount()
		e.say(alice, "/retry")
		wait.For(t, "the retried answer", func() bool { return e.llm.RequestCount() > n })
		if got := lastPrompt(); !strings.Contains(got, "closes page three") {
			t.Fatalf("/retry gave the model %q, want the PDF's text again", got)
		}
	})

	t.Run("a 200 KB log is cut to its share with a note", func(t *testing.T) {
		var b strings.Builder
		for i := 0; b.Len() < 200<<10; i++ {
			fmt.Fprintf(&b, "2026-12-01T10:00:%02dZ INFO request %d served in 12 ms\n", i%60, i)
		}
		sendFile(tgkit.File{Kind: "document", Name: "server.log", MIME: "text/plain", Data: []byte(b.String())}, "")
		e.waitBotText(alice, "the answer to the log", contains("to server.log"))
		got := lastPrompt()
		if !strings.Contains(got, "left out: the document is longer than its share") || !strings.Contains(got, "request 0 served") {
			t.Fatalf("the log reached the model without its start or the note of what was cut (%d chars)", len(got))
		}
		// The primary model here has the default window: a quarter of it, less its answer.
		if len(got) > 200<<10/2 {
			t.Fatalf("the model was given %d characters of a 200 KB log; want it cut to its share", len(got))
		}
	})

	t.Run("a 30 MB file and an unknown binary get one line each", func(t *testing.T) {
		n := e.llm.RequestCount()
		sendFile(tgkit.File{Kind: "document", Name: "video.mkv", MIME: "video/x-matroska", Size: 30 << 20}, "")
		e.waitBotText(alice, "the over-size answer", contains(`The file "video.mkv" is 30.0 MB; I read files of at most 20.0 MB.`))
		sendFile(tgkit.File{Kind: "document", Name: "blob.bin", MIME: "application/octet-stream", Data: []byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0}}, "")
		e.waitBotText(alice, "the unreadable-type answer", contains(`I cannot read blob.bin (.bin files)`))
		if e.llm.RequestCount() != n {
			t.Fatalf("the model was asked about files nobody could read")
		}
	})

	t.Run("the 187-byte PDF that killed the bot gets one line, and another chat is answered", func(t *testing.T) {
		n := e.llm.RequestCount()
		sendFile(tgkit.File{Kind: "document", Name: "crash.pdf", MIME: "application/pdf", Data: files.CrashPDF()}, "what does it say?")
		e.waitBotText(alice, "the crash PDF's line", contains("crash.pdf could not be read: it breaks the reader's limits"))
		const bob = 4101
		e.say(bob, "are you still there?")
		e.waitBotText(bob, "the next chat's answer", contains("from are to there"))
		// The caption is answered too, the model told what was not read.
		if e.llm.RequestCount() != n+2 || !slices.ContainsFunc(e.llm.Requests()[n:], func(r llm.Request) bool {
			return strings.Contains(lastUser(r), "[Not read: crash.pdf could not be read")
		}) {
			t.Fatalf("the model was asked %d times, want twice (the caption with a note of the PDF, the next chat)", e.llm.RequestCount()-n)
		}
	})

	t.Run("a voice note declared 1 s but 3:00 long is measured and refused", func(t *testing.T) {
		sendFile(tgkit.File{Kind: "voice", MIME: "audio/ogg", Data: files.OggOpus(3 * time.Minute), Duration: 1}, "")
		e.waitBotText(alice, "the measured-length answer", contains("The voice note is 3:00 long; I transcribe at most 2:00."))
	})

	t.Run("a voice note over speech.max_seconds gets one line", func(t *testing.T) {
		sendFile(tgkit.File{Kind: "voice", MIME: "audio/ogg", Data: files.OggOpus(time.Second), Duration: 200}, "")
		e.waitBotText(alice, "the too-long answer", contains("The voice note is 3:20 long; I transcribe at most 2:00."))
	})

	t.Run("a failing transcription endpoint falls back, then tells the user", func(t *testing.T) {
		sp.primaryDown.Store(true)
		sp.text.Store("second endpoint heard this")
		sendFile(tgkit.File{Kind: "voice", MIME: "audio/ogg", Data: files.OggOpus(2 * time.Second), Duration: 2}, "")
		e.waitBotText(alice, "the fallback's transcript", contains("second endpoint heard this"))
		sp.fallbackDown.Store(true)
		sendFile(tgkit.File{Kind: "voice", MIME: "audio/ogg", Data: files.OggOpus(2 * time.Second), Duration: 2}, "")
		e.waitBotText(alice, "the failure line", contains("The voice note could not be transcribed: the speech service failed (overloaded)."))
	})

	t.Run("/usage counts the audio", func(t *testing.T) {
		e.say(alice, "/usage")
		e.waitBotText(alice, "the usage answer", contains("s of audio"))
	})

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	st := e.openStore()
	ctx := context.Background()
	rows, err := st.Usage.Usage(ctx, store.UsageFilter{Platform: "telegram"})
	if err != nil {
		t.Fatal(err)
	}
	var audio int64
	models := map[string]bool{}
	for _, r := range rows {
		audio += r.AudioMs
		models[r.Model] = true
	}
	// 3 s (primary), 2 s (fallback after the primary failed); the failed attempts carry none
	// of the audio's cost twice: each attempt records the audio it was sent.
	if audio < 5000 || !models["whisper-primary"] || !models["whisper-fallback"] {
		t.Fatalf("usage rows %+v: want the transcriptions by both endpoints with their audio", rows)
	}
	conv, err := st.Conversations.Conversation(ctx, chat.Key{Platform: chat.Telegram, ChatID: fmt.Sprint(alice), UserID: fmt.Sprint(alice)})
	if err != nil {
		t.Fatal(err)
	}
	rounds, err := st.Messages.Rounds(ctx, conv.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, r := range rounds {
		for _, m := range r.Messages {
			if m.Role == store.RoleUser {
				users = append(users, m.Content)
			}
		}
	}
	if len(users) == 0 || users[0] != "please summarise the weather report" || !slices.ContainsFunc(users, func(s string) bool { return strings.Contains(s, "closes page three") }) {
		t.Fatalf("stored user messages %q: want the transcript and the PDF's text", users)
	}
}

// The same on Discord: a voice message (IS_VOICE_MESSAGE) and files from the CDN.
func TestDiscordVoiceAndDocuments(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	sp := newSpeechWorld(t)
	e.llm.SetHandler(answerEcho)
	dc := dtk.New(dtk.Config{})
	t.Cleanup(dc.Close)
	e.discord = []any{"enabled", true, "token", dc.Token(), "api_base", dc.APIBase()}
	stop := e.start(sp.apply(e.toml()).parse(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := dc.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitLog("msg=receiving platform=discord")
	const dm, author = "500000000000000009", "601"
	post := func(um dtk.UserMessage) {
		um.ChannelID, um.AuthorID = dm, author
		if _, err := dc.Post(um); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, ok func(dtk.Message) bool) dtk.Message {
		var got dtk.Message
		wait.For(t, what, func() bool {
			for _, m := range dc.BotMessages(dm) {
				if ok(m) {
					got = m
					return true
				}
			}
			return false
		})
		return got
	}
	has := func(sub string) func(dtk.Message) bool {
		return func(m dtk.Message) bool { return strings.Contains(unescaped(m.Content), sub) }
	}

	post(dtk.UserMessage{Voice: true, Attachments: []dtk.Attachment{{Filename: "voice-message.ogg", ContentType: "audio/ogg",
		Data: files.OggOpus(3 * time.Second), DurationSecs: 3, Waveform: "AAAAAAAA"}}})
	shown := waitFor("the transcript", has("please summarise the weather report"))
	if !strings.HasPrefix(shown.Content, "-# 🎤 Transcript\n-# please summarise") {
		t.Fatalf("transcript shown as %q, want Discord subtext lines", shown.Content)
	}
	waitFor("the answer to the voice message", has("from please to report"))
	waitFor("the spoken answer as an audio attachment", func(m dtk.Message) bool {
		return len(m.Attachments) == 1 && m.Attachments[0].Filename == "answer.ogg" && files.CheckOgg(m.Attachments[0].Data) == nil
	})

	pdf := files.PDF([][]string{{"Quarterly report, page one."}, {"Revenue grew on page two."}, {"Outlook closes page three."}})
	post(dtk.UserMessage{Content: "read this", Attachments: []dtk.Attachment{{Filename: "report.pdf", ContentType: "application/pdf", Data: pdf}}})
	waitFor("the answer to the PDF", has("from read to report.pdf"))
	var b strings.Builder
	for i := 0; b.Len() < 200<<10; i++ {
		fmt.Fprintf(&b, "2026-12-01T10:00:%02dZ INFO request %d served in 12 ms\n", i%60, i)
	}
	post(dtk.UserMessage{Attachments: []dtk.Attachment{{Filename: "message.txt", ContentType: "text/plain; charset=utf-8", Data: []byte(b.String())}}})
	waitFor("the answer to the pasted log", has("to message.txt"))
	if got := lastUser(e.llm.Requests()[len(e.llm.Requests())-1]); !strings.Contains(got, "left out") || len(got) > 200<<10/2 {
		t.Fatalf("the pasted log reached the model uncut (%d characters)", len(got))
	}

	post(dtk.UserMessage{Attachments: []dtk.Attachment{{Filename: "big.iso", ContentType: "application/octet-stream", Size: 30 << 20}}})
	waitFor("the over-size answer", has(`The file "big.iso" is 30.0 MB; I read files of at most 20.0 MB.`))
	post(dtk.UserMessage{Attachments: []dtk.Attachment{{Filename: "blob.bin", ContentType: "application/octet-stream", Data: []byte{0, 1, 2, 3, 0, 0xff}}}})
	waitFor("the unreadable-type answer", has("I cannot read blob.bin (.bin files)"))

	sp.primaryDown.Store(true)
	sp.text.Store("second endpoint heard this")
	voice := dtk.Attachment{Filename: "voice-message.ogg", ContentType: "audio/ogg", Data: files.OggOpus(2 * time.Second), DurationSecs: 2, Waveform: "AAAA"}
	post(dtk.UserMessage{Voice: true, Attachments: []dtk.Attachment{voice}})
	waitFor("the fallback's transcript", has("second endpoint heard this"))
	sp.fallbackDown.Store(true)
	post(dtk.UserMessage{Voice: true, Attachments: []dtk.Attachment{voice}})
	waitFor("the failure line", has("The voice note could not be transcribed: the speech service failed (overloaded)."))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// upload posts a message with files as the page's file picker (or, with voice, its
// microphone button) does, and returns the status and body of the answer.
func (w *webChat) upload(text string, voice bool, durationMs int, fs ...webUpload) (int, string) {
	w.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("text", text)
	_ = mw.WriteField("csrf", w.csrf)
	if voice {
		_ = mw.WriteField("voice", "1")
		_ = mw.WriteField("duration_ms", fmt.Sprint(durationMs))
	}
	for _, f := range fs {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, f.name))
		h.Set("Content-Type", f.mime)
		part, _ := mw.CreatePart(h)
		_, _ = part.Write(f.data)
	}
	mw.Close()
	req, _ := http.NewRequest(http.MethodPost, w.base+"/chat/send", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("X-CSRF-Token", w.csrf)
	resp, err := w.client.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

type webUpload struct {
	name, mime string
	data       []byte
}

// The same in the web chat: a recording from the microphone button and uploaded files.
func TestWebChatVoiceAndDocuments(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	sp := newSpeechWorld(t)
	e.llm.SetHandler(answerEcho)
	e.start(sp.apply(e.toml().set("admin", webChatAdmin...)).parse(t))
	e.waitLog("admin listening")
	m := regexp.MustCompile(`admin listening" addr=(\S+)`).FindStringSubmatch(e.logs.String())
	if m == nil {
		t.Fatalf("no admin address in the logs")
	}
	w := openWebChat(t, "http://"+m[1])
	has := func(sub string) func(webMsg) bool {
		return func(m webMsg) bool { return m.Role == "bot" && strings.Contains(unescaped(m.Text), sub) }
	}

	if code, body := w.upload("", true, 3000, webUpload{"voice.ogg", "audio/ogg", files.OggOpus(3 * time.Second)}); code != http.StatusAccepted {
		t.Fatalf("recording refused: %d %s", code, body)
	}
	shown := w.waitMsg("the transcript", has("please summarise the weather report"))
	if !strings.Contains(shown.HTML, "<details>") || !strings.Contains(shown.HTML, "🎤 Transcript") {
		t.Fatalf("transcript shown as %q, want it folded in <details>", shown.HTML)
	}
	w.waitMsg("the answer to the recording", has("from please to report"))
	spoken := w.waitMsg("the spoken answer", func(m webMsg) bool { return len(m.Files) == 1 && m.Files[0].Audio })
	resp, err := w.client.Get(w.base + spoken.Files[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	audio, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := files.CheckOgg(audio); err != nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "audio/ogg") {
		t.Fatalf("the audio player's file (%s) is not OGG: %v", resp.Header.Get("Content-Type"), err)
	}

	pdf := files.PDF([][]string{{"Quarterly report, page one."}, {"Revenue grew on page two."}, {"Outlook closes page three."}})
	var log strings.Builder
	for i := 0; log.Len() < 200<<10; i++ {
		fmt.Fprintf(&log, "2026-12-01T10:00:%02dZ INFO request %d served in 12 ms\n", i%60, i)
	}
	if code, body := w.upload("read both", false, 0, webUpload{"report.pdf", "application/pdf", pdf}, webUpload{"app.log", "text/plain", []byte(log.String())}); code != http.StatusAccepted {
		t.Fatalf("upload refused: %d %s", code, body)
	}
	w.waitMsg("the answer to the files", has("from read to app.log"))
	got := lastUser(e.llm.Requests()[len(e.llm.Requests())-1])
	if !strings.Contains(got, "closes page three") || !strings.Contains(got, "left out") {
		t.Fatalf("the model was not given the PDF and the cut log (%d characters)", len(got))
	}

	if code, body := w.upload("", false, 0, webUpload{"blob.bin", "application/octet-stream", []byte{0, 1, 2, 0, 0xfe}}); code != http.StatusAccepted {
		t.Fatalf("upload refused: %d %s", code, body)
	}
	w.waitMsg("the unreadable-type answer", has("I cannot read blob.bin (.bin files)"))
	big := webUpload{"big.iso", "application/octet-stream", make([]byte, 21<<20)}
	if code, body := w.upload("", false, 0, big); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "20.0 MB") {
		t.Fatalf("a 21 MB upload answered %d %q; want 413 naming the 20 MB limit", code, body)
	}
	sp.primaryDown.Store(true)
	sp.fallbackDown.Store(true)
	if code, body := w.upload("", true, 2000, webUpload{"voice.ogg", "audio/ogg", files.OggOpus(2 * time.Second)}); code != http.StatusAccepted {
		t.Fatalf("recording refused: %d %s", code, body)
	}
	w.waitMsg("the failure line", has("The voice note could not be transcribed"))
}

// unescaped is Markdown text as the chat shows it: a backslash before ASCII punctuation (how
// the bot escapes words it did not write, such as file names) is not shown.
func unescaped(md string) string {
	var b strings.Builder
	for i := 0; i < len(md); i++ {
		if md[i] == '\\' && i+1 < len(md) && strings.IndexByte("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", md[i+1]) >= 0 {
			i++
		}
		b.WriteByte(md[i])
	}
	return b.String()
}
