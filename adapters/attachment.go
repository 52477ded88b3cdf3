package adapters

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"relaybot/chat"
)

// AttachmentKind says what a file a user sent is, as the platform labels it.
type AttachmentKind string

// Kinds of attachment.
const (
	Voice     AttachmentKind = "voice"      // a recorded voice note (Telegram voice, Discord voice message, web microphone)
	Audio     AttachmentKind = "audio"      // an audio file
	VideoNote AttachmentKind = "video_note" // a round video message (Telegram); its sound is transcribed
	Picture   AttachmentKind = "image"      // a photo or an image file
	Document  AttachmentKind = "document"   // any other file
)

// Spoken reports whether the kind carries speech to transcribe.
func (k AttachmentKind) Spoken() bool { return k == Voice || k == Audio || k == VideoNote }

// Attachment is a file that came with a message. Its bytes are not read until Fetch is called,
// so a message with an attachment the bot will refuse (too large, a type it cannot read) costs
// no download.
type Attachment struct {
	Kind AttachmentKind `json:"kind"`
	MIME string         `json:"mime,omitempty"`
	Name string         `json:"name,omitempty"`
	// Size is the size in bytes the platform reports; 0 when it reports none.
	Size int64 `json:"size,omitempty"`
	// Duration is the length of a voice note, audio or video note the platform reports; 0 when
	// unknown. It is the sender's word: a longer one refuses the file before it is downloaded,
	// but what is transcribed, limited and billed is the length measured from the bytes.
	Duration time.Duration `json:"duration,omitempty"`
	// Limit is the most the platform lets a bot download (Telegram's 20 MB); 0 when none.
	Limit int64 `json:"limit,omitempty"`
	// Fetch downloads the bytes, reading at most max bytes: a file larger than max ends with an
	// error wrapping ErrTooLarge. It blocks until the download ends or ctx is done, and may be
	// called more than once.
	Fetch func(ctx context.Context, max int64) ([]byte, error) `json:"-"`
}

// ErrTooLarge is the error of a Fetch whose file is larger than its cap.
var ErrTooLarge = errors.New("file is larger than the limit")

// BytesAttachment returns Fetch for bytes already in memory (the web chat's uploads, tests).
func BytesAttachment(data []byte) func(context.Context, int64) ([]byte, error) {
	return func(_ context.Context, max int64) ([]byte, error) {
		if int64(len(data)) > max {
			return nil, fmt.Errorf("%d bytes: %w", len(data), ErrTooLarge)
		}
		return data, nil
	}
}

// ReadCapped reads at most max bytes of r; a longer body is ErrTooLarge. Adapters' Fetch
// functions use it on download bodies, so a file never takes more memory than its cap.
func ReadCapped(r io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("more than %d bytes: %w", max, ErrTooLarge)
	}
	return data, nil
}

// HTTPFetch returns Fetch for a file at url, downloaded with client. redact, when set, cleans
// error texts (a URL that carries a token).
func HTTPFetch(client *http.Client, url string, redact func(string) string) func(context.Context, int64) ([]byte, error) {
	if redact == nil {
		redact = func(s string) string { return s }
	}
	return func(ctx context.Context, max int64) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, errors.New(redact(err.Error()))
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("download: %s", redact(err.Error()))
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("download: HTTP %s", resp.Status)
		}
		if resp.ContentLength > max {
			return nil, fmt.Errorf("%d bytes: %w", resp.ContentLength, ErrTooLarge)
		}
		data, err := ReadCapped(resp.Body, max)
		if err != nil && !errors.Is(err, ErrTooLarge) {
			return nil, fmt.Errorf("download: %s", redact(err.Error()))
		}
		return data, err
	}
}

// VoiceSender is implemented by a Messenger whose platform shows an audio file as a voice
// message of its own kind (Telegram's sendVoice) rather than as a file. The delivery engine
// posts a file whose MIME type is chat.VoiceMIME with it; other platforms get the file through
// SendFiles (Discord an audio attachment, the web chat an audio player).
type VoiceSender interface {
	// SendVoice posts one OGG/Opus file as a voice message, in one platform request, with the
	// error reporting of Send.
	SendVoice(ctx context.Context, chat chat.Ref, voice chat.File, opts SendOptions) (MessageRef, error)
}
