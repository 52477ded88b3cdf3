package web

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"relaybot/adapters"
)

// DefaultMaxUpload is the largest file a browser may send when Options.MaxUploadBytes is 0.
const DefaultMaxUpload = 20 << 20

// maxUploads is the most files one message may carry.
const maxUploads = 4

// MaxSendBytes is the largest body of a message with files of at most maxFile bytes each: the
// admin listener's cap for POST /chat/send.
func MaxSendBytes(maxFile int64) int64 {
	if maxFile <= 0 {
		maxFile = DefaultMaxUpload
	}
	return maxInput + 4096 + maxUploads*(maxFile+4096)
}

// readSend reads a message a browser posts: a form with text, or a multipart form that may
// also carry files (the file picker's, or a recording from the microphone button with
// voice=1 and its length in duration_ms), checks its CSRF token and returns the text and the
// files as attachments, or the status and error to answer.
func (c *Chat) readSend(w http.ResponseWriter, r *http.Request, conv *conversation) (string, []adapters.Attachment, int, error) {
	maxFile := c.opts.MaxUploadBytes
	if maxFile <= 0 {
		maxFile = DefaultMaxUpload
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	multi := mt == "multipart/form-data"
	limit := int64(maxInput + 4096)
	if multi {
		limit = MaxSendBytes(maxFile)
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	var err error
	if multi {
		// Files over 1 MB spill to temporary files while the form is parsed.
		err = r.ParseMultipartForm(1 << 20)
	} else {
		err = r.ParseForm()
	}
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return "", nil, http.StatusRequestEntityTooLarge, fmt.Errorf("message too large (more than %d bytes; files of at most %d MB)", mbe.Limit, maxFile>>20)
	}
	if err != nil {
		return "", nil, http.StatusBadRequest, fmt.Errorf("bad form: %w", err)
	}
	if multi {
		defer r.MultipartForm.RemoveAll()
	}
	token := r.Header.Get("X-CSRF-Token")
	if token == "" {
		token = r.PostForm.Get("csrf")
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(conv.csrf)) != 1 {
		return "", nil, http.StatusForbidden, errors.New("missing or wrong CSRF token: reload /chat")
	}
	text := strings.TrimSpace(r.PostForm.Get("text"))
	switch {
	case len(text) > maxInput:
		return "", nil, http.StatusRequestEntityTooLarge, fmt.Errorf("message too long (%d bytes, at most %d)", len(text), maxInput)
	case !utf8.ValidString(text):
		return "", nil, http.StatusBadRequest, errors.New("message is not valid UTF-8")
	}
	var atts []adapters.Attachment
	if multi {
		fhs := r.MultipartForm.File["file"]
		if len(fhs) > maxUploads {
			return "", nil, http.StatusBadRequest, fmt.Errorf("at most %d files a message", maxUploads)
		}
		voice := r.PostForm.Get("voice") == "1"
		for _, fh := range fhs {
			if fh.Size > maxFile {
				return "", nil, http.StatusRequestEntityTooLarge, fmt.Errorf("%s is %.1f MB; files of at most %.1f MB are read", fh.Filename, float64(fh.Size)/(1<<20), float64(maxFile)/(1<<20))
			}
			f, err := fh.Open()
			if err != nil {
				return "", nil, http.StatusBadRequest, fmt.Errorf("reading %s: %w", fh.Filename, err)
			}
			data, err := io.ReadAll(f)
			f.Close()
			if err != nil {
				return "", nil, http.StatusBadRequest, fmt.Errorf("reading %s: %w", fh.Filename, err)
			}
			a := adapters.Attachment{Kind: kindOf(fh.Header.Get("Content-Type"), voice), MIME: fh.Header.Get("Content-Type"),
				Name: fh.Filename, Size: int64(len(data)), Fetch: adapters.BytesAttachment(data)}
			if ms, err := strconv.Atoi(r.PostForm.Get("duration_ms")); err == nil && ms > 0 && a.Kind.Spoken() {
				a.Duration = time.Duration(ms) * time.Millisecond
			}
			atts = append(atts, a)
		}
	}
	if text == "" && len(atts) == 0 {
		return "", nil, http.StatusBadRequest, errors.New("empty message")
	}
	return text, atts, 0, nil
}

// kindOf is the kind of an uploaded file: a recording when the microphone made it, else by its
// MIME type.
func kindOf(mimeType string, voice bool) adapters.AttachmentKind {
	switch {
	case voice:
		return adapters.Voice
	case strings.HasPrefix(mimeType, "audio/"):
		return adapters.Audio
	case strings.HasPrefix(mimeType, "image/"):
		return adapters.Picture
	}
	return adapters.Document
}
