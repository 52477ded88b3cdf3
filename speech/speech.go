// Package speech turns voice into text and text into voice through OpenAI-compatible endpoints
// (POST /v1/audio/transcriptions and /v1/audio/speech): OpenAI, Groq, a local whisper.cpp or
// speaches server. Transcription tries its candidates in order with the chat models' fallback
// rules and error classification (provider.ErrorKindOf, ErrorKind.MovesOn); every attempt is
// reported as a chat.ModelCall, so it reaches the audit trail, metrics and usage like a chat
// model's call. It speaks to its endpoints as the agent's runner does, through provider's
// Endpoint, and knows nothing of the runner.
package speech

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"relaybot/chat"
	"relaybot/provider"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Voice is the text-to-speech endpoint: Model is the speech model ("tts-1", "gpt-4o-mini-tts",
// ...), Voice the voice it speaks with ("alloy", ...).
type Voice struct {
	provider.Endpoint
	Voice string
}

// DefaultTimeout bounds one speech request when its candidate sets none.
const DefaultTimeout = 120 * time.Second

// Options configure a Client.
type Options struct {
	// Candidates are the transcription endpoints in order ("whisper-1", "gpt-4o-transcribe",
	// "whisper-large-v3", ...): the first is primary. A zero Timeout is DefaultTimeout.
	Candidates []provider.Endpoint
	// Voice, when its Model is set, speaks answers.
	Voice Voice
	// HTTPClient makes the requests (default http.DefaultClient).
	HTTPClient *http.Client
	// Observer, when set, hears of every call as it ends, failed attempts included (metrics),
	// as the agent's model calls are reported.
	Observer provider.Observer
	// Now returns the current time (tests); nil means time.Now.
	Now func() time.Time
}

// Client talks to the speech endpoints. It is safe for concurrent use.
type Client struct {
	cands   []provider.Endpoint
	clients []*openai.Client
	voice   Voice
	tts     *openai.Client
	obs     provider.Observer
	now     func() time.Time
}

// New checks the options and returns a Client.
func New(o Options) (*Client, error) {
	c := &Client{now: o.Now, voice: o.Voice, obs: o.Observer}
	if c.now == nil {
		c.now = time.Now
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	for i, cand := range o.Candidates {
		if cand.BaseURL == "" || cand.Model == "" {
			return nil, fmt.Errorf("speech: candidate %d: base_url and model are required", i)
		}
		cand.Name = cand.Label()
		if cand.Timeout <= 0 {
			cand.Timeout = DefaultTimeout
		}
		c.cands = append(c.cands, cand)
		c.clients = append(c.clients, cand.Client(hc))
	}
	if o.Voice.Model != "" {
		if o.Voice.BaseURL == "" {
			return nil, errors.New("speech: the voice needs a base_url")
		}
		c.voice.Name = c.voice.Label()
		if c.voice.Voice == "" {
			c.voice.Voice = "alloy"
		}
		if c.voice.Timeout <= 0 {
			c.voice.Timeout = DefaultTimeout
		}
		c.tts = c.voice.Client(hc)
	}
	return c, nil
}

// CanTranscribe reports whether any transcription endpoint is configured.
func (c *Client) CanTranscribe() bool { return c != nil && len(c.cands) > 0 }

// CanSpeak reports whether a voice is configured.
func (c *Client) CanSpeak() bool { return c != nil && c.tts != nil }

// Audio is a recording to transcribe.
type Audio struct {
	Name string // the file name sent with it; its extension tells the server the container
	MIME string
	Data []byte
	// Duration is the recording's length when known: usage prices it per minute.
	Duration time.Duration
}

// Transcribe returns the text of a recording, trying the candidates in order: a failure that
// MovesOn leaves a candidate for the next, any other ends the attempt. calls holds one entry
// per attempt (fallbacks included). The error of the last candidate tried is the error.
func (c *Client) Transcribe(ctx context.Context, a Audio) (text string, calls []chat.ModelCall, err error) {
	if !c.CanTranscribe() {
		return "", nil, errors.New("speech: no transcription endpoint is configured")
	}
	reason := ""
	for i, cand := range c.cands {
		call := chat.ModelCall{Model: cand.Name, Candidate: i, FallbackReason: reason, StartedAt: c.now(), Audio: a.Duration}
		cctx, cancel := context.WithTimeout(ctx, cand.Timeout)
		res, err := c.clients[i].CreateTranscription(cctx, openai.AudioRequest{
			Model:    cand.Model,
			FilePath: fileName(a),
			Reader:   bytes.NewReader(a.Data),
			Format:   openai.AudioResponseFormatJSON,
		})
		cancel()
		call.Duration = c.now().Sub(call.StartedAt)
		call.TimeToFirstToken = call.Duration
		if err == nil {
			call.Status = chat.StatusOK
			call.FinishReason = "stop"
			c.observe(ctx, call)
			return strings.TrimSpace(res.Text), append(calls, call), nil
		}
		kind := provider.ErrorKindOf(err)
		err = fmt.Errorf("transcription by %s (%s): %w", cand.Name, kind, err)
		call.Status, call.Err = chat.StatusError, err
		if kind == provider.ErrCanceled || ctx.Err() != nil {
			call.Status = chat.StatusCancelled
		}
		calls = append(calls, call)
		c.observe(ctx, call)
		if ctx.Err() != nil || !kind.MovesOn() {
			return "", calls, err
		}
		reason = err.Error()
		if i == len(c.cands)-1 {
			return "", calls, err
		}
	}
	return "", calls, errors.New("speech: no candidate answered")
}

// fileName is the name the recording is sent under: servers read the container from its
// extension (OGG/Opus goes as it is, no transcoding).
func fileName(a Audio) string {
	if a.Name != "" && strings.Contains(a.Name, ".") {
		return a.Name
	}
	ext := ".ogg"
	switch mt := strings.ToLower(a.MIME); {
	case strings.Contains(mt, "webm"):
		ext = ".webm"
	case strings.Contains(mt, "mpeg"), strings.Contains(mt, "mp3"):
		ext = ".mp3"
	case strings.Contains(mt, "mp4"), strings.Contains(mt, "m4a"), strings.Contains(mt, "aac"):
		ext = ".m4a"
	case strings.Contains(mt, "wav"):
		ext = ".wav"
	case strings.Contains(mt, "flac"):
		ext = ".flac"
	}
	return "audio" + ext
}

// oggMagic starts every OGG page.
var oggMagic = []byte("OggS")

// Speak returns text spoken as OGG/Opus (response_format "opus"), with the call for the audit
// trail. An answer that is not OGG is an error: platforms show only OGG/Opus as voice.
func (c *Client) Speak(ctx context.Context, text string) ([]byte, chat.ModelCall, error) {
	call := chat.ModelCall{Model: c.voice.Name, StartedAt: c.now()}
	if !c.CanSpeak() {
		return nil, call, errors.New("speech: no voice is configured")
	}
	cctx, cancel := context.WithTimeout(ctx, c.voice.Timeout)
	defer cancel()
	data, err := c.speak(cctx, text)
	call.Duration = c.now().Sub(call.StartedAt)
	call.TimeToFirstToken = call.Duration
	if err != nil {
		call.Status, call.Err = chat.StatusError, fmt.Errorf("speech by %s (%s): %w", c.voice.Name, provider.ErrorKindOf(err), err)
		if ctx.Err() != nil {
			call.Status = chat.StatusCancelled
		}
		c.observe(ctx, call)
		return nil, call, call.Err
	}
	call.Status, call.FinishReason = chat.StatusOK, "stop"
	c.observe(ctx, call)
	// The spoken answer's length is not transcribed audio: it is not priced per minute.
	return data, call, nil
}

func (c *Client) observe(ctx context.Context, call chat.ModelCall) {
	if c.obs != nil {
		c.obs.ModelCallFinished(ctx, call)
	}
}

func (c *Client) speak(ctx context.Context, text string) ([]byte, error) {
	res, err := c.tts.CreateSpeech(ctx, openai.CreateSpeechRequest{
		Model:          openai.SpeechModel(c.voice.Model),
		Input:          text,
		Voice:          openai.SpeechVoice(c.voice.Voice),
		ResponseFormat: openai.SpeechResponseFormatOpus,
	})
	if err != nil {
		return nil, err
	}
	defer res.Close()
	data, err := io.ReadAll(io.LimitReader(res, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the audio: %w", err)
	}
	if !bytes.HasPrefix(data, oggMagic) {
		return nil, fmt.Errorf("the answer is not OGG audio (%d bytes starting %q)", len(data), data[:min(len(data), 8)])
	}
	return data, nil
}
