package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/markdown"
	"relaybot/agent"
	"relaybot/chat"
	"relaybot/media"
	"relaybot/pipeline/history"
	"relaybot/provider"
	"relaybot/speech"
	"relaybot/store"
)

// Transcriber turns a recording into text (*speech.Client).
type Transcriber interface {
	CanTranscribe() bool
	Transcribe(ctx context.Context, a speech.Audio) (string, []chat.ModelCall, error)
}

// Speaker speaks an answer as OGG/Opus (*speech.Client).
type Speaker interface {
	CanSpeak() bool
	Speak(ctx context.Context, text string) ([]byte, chat.ModelCall, error)
}

// Reader reads the bytes users send under limits of memory, time, pages and decompressed
// bytes, away from the bot's own process (*sandbox.Reader): a file that breaks a limit is an
// error (*media.LimitError), never a crash or a hang of the bot; a cancelled context ends the
// read at once.
type Reader interface {
	// ReadDocument reads a document as media.Read does.
	ReadDocument(ctx context.Context, name, mimeType string, data []byte) (media.Document, error)
	// AudioDuration measures a recording from its container; an error wrapping
	// audio.ErrUnmeasured when it cannot.
	AudioDuration(ctx context.Context, name, mimeType string, data []byte) (time.Duration, error)
}

// When answers are also spoken (MediaOptions.Reply).
const (
	SpeakOff          = "off"
	SpeakWhenSpokenTo = "when_spoken_to"
	SpeakAlways       = "always"
)

// MediaOptions say how the files users send are read and whether answers are spoken.
type MediaOptions struct {
	// Transcriber transcribes voice notes, audio and video notes; nil: they are answered with a
	// line saying voice is not set up.
	Transcriber Transcriber
	// Speaker speaks answers when Reply says so.
	Speaker Speaker
	// Reader reads documents and measures recordings (default: a *sandbox.Reader running this
	// binary, which must call sandbox.Main first thing).
	Reader Reader
	// MaxBytes is the largest file read (default DefaultMediaMaxBytes).
	MaxBytes int64
	// MaxAudio is the longest recording transcribed (default DefaultMaxAudio).
	MaxAudio time.Duration
	// DocumentShare is the share of the primary model's window (less its answer) the documents
	// of one message may fill (default DefaultDocumentShare).
	DocumentShare float64
	// Reply is SpeakOff (default), SpeakWhenSpokenTo or SpeakAlways; MaxReplyChars caps what is
	// spoken (default DefaultMaxReplyChars).
	Reply         string
	MaxReplyChars int
}

// Defaults of MediaOptions.
const (
	DefaultMediaMaxBytes  = 20 << 20
	DefaultMaxAudio       = 10 * time.Minute
	DefaultDocumentShare  = 0.25
	DefaultMaxReplyChars  = 1000
	transcriptFoldSummary = "🎤 Transcript"
)

// readMedia is the turn's stage before start: the message's attachments become its text. It
// reports whether anything is left to answer (the user was told of what could not be read).
func (t *turn) readMedia() bool {
	t.media = t.parts.media.readAttachments(t.ctx, t.in, t.r.out, t.log)
	t.in = t.media.in
	return t.in.Command != "" || strings.TrimSpace(t.in.Text) != "" || len(t.in.Images) > 0
}

// speak is the turn's stage after its delivery: a delivered answer is also spoken when
// MediaOptions.Reply says so.
func (t *turn) speak(res *agent.Result, status chat.Status) {
	if status != store.TurnOK {
		return
	}
	answer := ""
	for i := len(res.Messages) - 1; i >= 0; i-- {
		if m := res.Messages[i]; m.Role == chat.RoleAssistant && strings.TrimSpace(m.Content) != "" {
			answer = m.Content
			break
		}
	}
	if call, voice, ok := t.parts.media.speakAnswer(t.ctx, t.r.out, t.media.spoken, answer, t.log); ok {
		t.spoken = append(t.spoken, call)
		t.voice = voice
	}
}

// readMedia is what reading a message's attachments gave: the message with their text, the
// transcription calls (for the turn's llm_calls), whether the user spoke, and whether anything
// is left to answer.
type readMedia struct {
	in     adapters.Inbound
	calls  []chat.ModelCall
	spoken bool
	// files name what the member sent (their images and attachments), for the turn's row.
	files []store.TurnFile
}

// readAttachments is the step before the agent that turns a message's attachments into text:
// voice, audio and video notes into their transcript (shown to the user folded), documents into
// their text within the budget, image files into images for a vision model. Whatever cannot be
// read is told to the user in one line naming the limit or the type, and noted in the message,
// so nothing is dropped without a word. The returned Inbound has no attachments left.
func (m *mediaReader) readAttachments(ctx context.Context, in adapters.Inbound, out adapters.Responder, log *slog.Logger) readMedia {
	var files []store.TurnFile
	for i, img := range in.Images {
		files = append(files, store.TurnFile{Kind: string(adapters.Picture), Name: fmt.Sprintf("image %d", i+1), MIME: img.MIME, Size: int64(len(img.Data))})
	}
	if len(in.Attachments) == 0 {
		return readMedia{in: in, files: files}
	}
	ar := &attachmentReader{m: m, o: m.o, out: out, log: log, r: readMedia{in: in, files: files}}
	if t := strings.TrimSpace(in.Text); t != "" {
		ar.parts = append(ar.parts, t)
	}
	for _, a := range in.Attachments {
		name := a.Name
		if name == "" {
			name = string(a.Kind)
		}
		f := store.TurnFile{Kind: string(a.Kind), Name: name, MIME: a.MIME, Size: a.Size}
		if data, ok := ar.fetch(ctx, a, name); ok {
			f.Size = int64(len(data))
			ar.read(ctx, a, name, data)
		}
		ar.r.files = append(ar.r.files, f)
	}
	parts := append(ar.parts, m.documentParts(ar.docs, ar.docNames)...)
	for _, n := range ar.notes {
		m.outbox.notice(out, markdown.Escape(n), log) // a note names the file as its sender named it
	}
	if len(parts) > 0 && len(ar.notes) > 0 {
		parts = append(parts, "[Not read: "+strings.Join(ar.notes, " ")+"]")
	}
	ar.r.in.Text = strings.Join(parts, "\n\n")
	ar.r.in.Attachments = nil
	return ar.r
}

// attachmentReader reads the attachments of one message, in order, into the message's text,
// images and documents, and collects the lines that tell the user what could not be read.
type attachmentReader struct {
	m   *mediaReader
	o   MediaOptions
	out adapters.Responder
	log *slog.Logger

	r        readMedia
	parts    []string // the message's text, then the transcripts, in order
	notes    []string // what could not be read, one line each
	docs     []media.Document
	docNames []string
}

// tell notes a line about an attachment that was not read.
func (ar *attachmentReader) tell(a adapters.Attachment, name, line string) {
	ar.log.Info("pipeline: attachment not read", "kind", a.Kind, "file", name, "why", line)
	ar.notes = append(ar.notes, line)
}

// fetch checks an attachment against the limits it can be checked against before its bytes
// arrive, and downloads it within them; false when it is not to be read (and told why).
func (ar *attachmentReader) fetch(ctx context.Context, a adapters.Attachment, name string) ([]byte, bool) {
	o := ar.o
	limit := o.MaxBytes
	if a.Limit > 0 && a.Limit < limit {
		limit = a.Limit
	}
	if a.Size > limit {
		ar.tell(a, name, fmt.Sprintf("%s is %s; I read files of at most %s.", describe(a, name), sizeText(a.Size), sizeText(limit)))
		return nil, false
	}
	if a.Kind.Spoken() {
		ar.r.spoken = true
		if o.Transcriber == nil || !o.Transcriber.CanTranscribe() {
			ar.tell(a, name, fmt.Sprintf("%s was not transcribed: speech to text is not set up on this bot.", describe(a, name)))
			return nil, false
		}
		if a.Duration > o.MaxAudio {
			ar.tell(a, name, fmt.Sprintf("%s is %s long; I transcribe at most %s.", describe(a, name), audioClock(a.Duration), audioClock(o.MaxAudio)))
			return nil, false
		}
	}
	if a.Fetch == nil {
		ar.tell(a, name, fmt.Sprintf("%s could not be downloaded.", describe(a, name)))
		return nil, false
	}
	data, err := a.Fetch(ctx, limit)
	if errors.Is(err, adapters.ErrTooLarge) {
		ar.tell(a, name, fmt.Sprintf("%s is larger than %s, the most I read.", describe(a, name), sizeText(limit)))
		return nil, false
	}
	if err != nil {
		ar.log.Warn("pipeline: attachment not downloaded", "file", name, "err", err)
		ar.tell(a, name, fmt.Sprintf("%s could not be downloaded.", describe(a, name)))
		return nil, false
	}
	return data, true
}

// read turns an attachment's bytes into what the model gets: a transcript, an image or a
// document.
func (ar *attachmentReader) read(ctx context.Context, a adapters.Attachment, name string, data []byte) {
	switch {
	case a.Kind.Spoken():
		ar.transcribe(ctx, a, name, data)
	case a.Kind == adapters.Picture || strings.HasPrefix(a.MIME, "image/") && !media.IsPDF(a.Name, a.MIME, data):
		if max := ar.m.maxImageBytes; max > 0 && len(data) > max {
			ar.tell(a, name, fmt.Sprintf("the image %s is %s; I pass images of at most %s to the model.", name, sizeText(int64(len(data))), sizeText(int64(max))))
			return
		}
		ar.r.in.Images = append(ar.r.in.Images, adapters.Image{MIME: a.MIME, Data: data})
	default:
		doc, err := ar.o.Reader.ReadDocument(ctx, a.Name, a.MIME, data)
		var unsup *media.UnsupportedError
		switch {
		case ctx.Err() != nil:
			return // stopped: the turn says so
		case errors.As(err, &unsup):
			ar.tell(a, name, fmt.Sprintf("I cannot read %s (%s files): I read text, Markdown, code, CSV, JSON, logs and PDFs.", name, unsup.Type))
			return
		case err != nil:
			ar.tell(a, name, fmt.Sprintf("%s could not be read: %v.", name, err))
			return
		}
		ar.docs = append(ar.docs, doc)
		ar.docNames = append(ar.docNames, name)
	}
}

// transcribe turns a voice note, audio file or video note into its transcript, shown to the user
// folded.
func (ar *attachmentReader) transcribe(ctx context.Context, a adapters.Attachment, name string, data []byte) {
	o := ar.o
	// The length the sender declares is not believed: what is measured is limited and billed.
	d, err := o.Reader.AudioDuration(ctx, a.Name, a.MIME, data)
	var limit *media.LimitError
	switch {
	case ctx.Err() != nil:
		return
	case errors.As(err, &limit):
		ar.tell(a, name, fmt.Sprintf("%s could not be read: %v.", describe(a, name), err))
		return
	case err != nil:
		ar.log.Info("pipeline: recording not measured", "file", name, "declared", a.Duration, "err", err)
		ar.tell(a, name, fmt.Sprintf("%s was not transcribed: I cannot tell how long it is (I measure OGG, MP3, WAV, M4A and WebM recordings).", describe(a, name)))
		return
	}
	if d > o.MaxAudio {
		ar.tell(a, name, fmt.Sprintf("%s is %s long; I transcribe at most %s.", describe(a, name), audioClock(d), audioClock(o.MaxAudio)))
		return
	}
	text, calls, err := o.Transcriber.Transcribe(ctx, speech.Audio{Name: a.Name, MIME: a.MIME, Data: data, Duration: d})
	ar.r.calls = append(ar.r.calls, calls...)
	if err != nil {
		ar.log.Warn("pipeline: transcription failed", "file", name, "err", err)
		ar.tell(a, name, fmt.Sprintf("%s could not be transcribed: the speech service failed (%s).", describe(a, name), provider.ErrorKindOf(err)))
		return
	}
	if text == "" {
		ar.tell(a, name, fmt.Sprintf("%s has no speech I could make out.", describe(a, name)))
		return
	}
	ar.m.showTranscript(ar.out, ar.r.in.Chat.Platform, text, ar.log)
	ar.parts = append(ar.parts, text)
}

// documentParts renders documents for the model, each cut to its share of the budget.
func (m *mediaReader) documentParts(docs []media.Document, names []string) []string {
	if len(docs) == 0 {
		return nil
	}
	each := int(float64(m.primary.ContextWindow-m.primary.MaxOutputTokens)*m.o.DocumentShare) / len(docs)
	out := make([]string, 0, len(docs))
	for i, d := range docs {
		text, _ := media.Cut(d.Text, each, history.EstimateText)
		kind := "text file"
		if d.Format == media.FormatPDF {
			kind = fmt.Sprintf("PDF, %d pages", d.Pages)
		}
		out = append(out, fmt.Sprintf("[File %q (%s)]\n%s\n[End of %q]", names[i], kind, text, names[i]))
	}
	return out
}

// showTranscript shows the user what the bot heard, folded the way reasoning is.
func (m *mediaReader) showTranscript(out adapters.Responder, platform chat.Platform, text string, log *slog.Logger) {
	ctx, cancel := m.outbox.context()
	defer cancel()
	body := newSurface(platform, ReasoningCollapsed).fold(transcriptFoldSummary, text)
	if err := out.NewReply(ctx).Finish(ctx, body, nil); err != nil {
		log.Warn("pipeline: transcript not shown", "err", err)
	}
}

// speakAnswer sends the answer as a voice message after its text, when Reply says so; the call
// joins the turn's model calls, and the voice message, once delivered, its files.
func (m *mediaReader) speakAnswer(ctx context.Context, out adapters.Responder, spoken bool, answer string, log *slog.Logger) (chat.ModelCall, []chat.File, bool) {
	o := m.o
	if o.Speaker == nil || !o.Speaker.CanSpeak() || o.Reply == SpeakOff || o.Reply == "" || (o.Reply == SpeakWhenSpokenTo && !spoken) {
		return chat.ModelCall{}, nil, false
	}
	text := speakable(answer, o.MaxReplyChars)
	if text == "" {
		return chat.ModelCall{}, nil, false
	}
	data, call, err := o.Speaker.Speak(ctx, text)
	if err != nil {
		log.Warn("pipeline: answer not spoken", "err", err)
		return call, nil, true
	}
	dctx, cancel := m.outbox.context()
	defer cancel()
	voice := []chat.File{{Name: "answer.ogg", MIME: chat.VoiceMIME, Data: data}}
	if err := out.NewReply(dctx).Finish(dctx, "", voice); err != nil {
		log.Warn("pipeline: spoken answer not delivered", "err", err)
		return call, nil, true
	}
	return call, voice, true
}

var (
	foldBlock   = regexp.MustCompile(`(?s)<details>.*?</details>`)
	subtextLine = regexp.MustCompile(`(?m)^-# .*$`)
	markup      = strings.NewReplacer("**", "", "__", "", "`", "", "#", "", "> ", "", "*", "")
)

// speakable is the part of an answer worth speaking: without folded blocks (reasoning, tool
// lines) and Markdown marks, cut to at most max characters at a sentence end where there is
// one in the second half.
func speakable(answer string, max int) string {
	if max <= 0 {
		max = DefaultMaxReplyChars
	}
	s := foldBlock.ReplaceAllString(answer, "")
	s = subtextLine.ReplaceAllString(s, "")
	s = strings.TrimSpace(markup.Replace(s))
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	cut := string(r[:max])
	if i := strings.LastIndexAny(cut, ".!?\n"); i >= len(cut)/2 {
		cut = cut[:i+1]
	}
	return strings.TrimSpace(cut)
}

// mediaReader reads the files of a message into its text, within the limits of MediaOptions,
// and speaks answers.
type mediaReader struct {
	o MediaOptions // with its defaults
	// maxImageBytes drops larger images (history.Options.MaxImageBytes); primary is the budget
	// documents take their share of.
	maxImageBytes int
	primary       history.ModelBudget
	outbox        *outbox
}

// newMediaReader returns the reader of o's media, delivering what it shows through ob.
func newMediaReader(o *Options, ob *outbox) *mediaReader {
	m := &mediaReader{o: o.Media.filled(), maxImageBytes: o.History.MaxImageBytes, outbox: ob,
		primary: history.ModelBudget{ContextWindow: history.DefaultContextWindow, MaxOutputTokens: history.DefaultContextWindow / 4}}
	if b := o.Models.Budgets; len(b) > 0 {
		m.primary = b[0]
	}
	return m
}

// filled returns o with the defaults of the fields left zero.
func (o MediaOptions) filled() MediaOptions {
	o.MaxBytes = media.OrDefault(o.MaxBytes, DefaultMediaMaxBytes)
	o.MaxAudio = media.OrDefault(o.MaxAudio, DefaultMaxAudio)
	o.DocumentShare = media.OrDefault(o.DocumentShare, DefaultDocumentShare)
	return o
}

// describe names an attachment in a reply: "The voice note", "The file "x.zip"".
func describe(a adapters.Attachment, name string) string {
	switch a.Kind {
	case adapters.Voice:
		return "The voice note"
	case adapters.VideoNote:
		return "The video note"
	case adapters.Audio:
		return fmt.Sprintf("The audio %q", name)
	case adapters.Picture:
		return fmt.Sprintf("The image %q", name)
	}
	return fmt.Sprintf("The file %q", name)
}

// sizeText renders a size in MB (or KB below one).
func sizeText(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KB", (n+1023)>>10)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
}

// audioClock renders a duration as m:ss.
func audioClock(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// botFiles are the files the bot sent in a turn, named for its row: a picture, a voice message,
// any other file; the store keeps the bytes of the pictures only (store.MaxKeptFileBytes).
func botFiles(lists ...[]chat.File) []store.TurnFile {
	var out []store.TurnFile
	for _, files := range lists {
		for _, f := range files {
			kind := "file"
			switch {
			case f.IsVoice():
				kind = "voice"
			case f.IsImage():
				kind = "image"
			}
			out = append(out, store.TurnFile{FromBot: true, Kind: kind, Name: f.Name, MIME: f.MIME, Size: int64(len(f.Data)), Data: f.Data})
		}
	}
	return out
}
