package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"relaybot/internal/testkit/files"
)

// AudioRequest is one recorded request to POST /v1/audio/transcriptions (Path "transcriptions")
// or /v1/audio/speech (Path "speech").
type AudioRequest struct {
	Path   string
	Header http.Header
	Model  string
	// File, FileName and FileType are the transcription's uploaded file part.
	File     []byte
	FileName string
	FileType string
	// Fields are the other form fields of a transcription, or the JSON fields of a speech request
	// rendered as text.
	Fields map[string]string
	// Input and Voice are a speech request's text and voice.
	Input, Voice string
}

// AudioReply scripts the answer to one audio request.
type AudioReply struct {
	// Status, when neither 0 nor 200, is answered with an OpenAI-style error body.
	Status int
	Error  string
	// Text is a transcription's text (default: "transcript of N bytes").
	Text string
	// Delay waits before answering (a slow endpoint); the client going away ends it.
	Delay time.Duration
}

// AudioHandler decides the answer to an audio request. It may be called concurrently.
type AudioHandler func(AudioRequest) AudioReply

// SetAudio makes h decide the answers of the audio endpoints; without one, transcriptions say
// "transcript of N bytes" and speech answers with an OGG/Opus file of silence.
func (s *Server) SetAudio(h AudioHandler) {
	s.mu.Lock()
	s.audio = h
	s.mu.Unlock()
}

// AudioRequests returns the audio requests received so far, in order.
func (s *Server) AudioRequests() []AudioRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]AudioRequest(nil), s.audioReq...)
}

// Fields OpenAI's transcription endpoint takes; anything else is refused as the API does.
var transcriptionFields = []string{"model", "language", "prompt", "response_format", "temperature",
	"timestamp_granularities[]", "chunking_strategy", "include[]", "stream"}

// Containers the transcription endpoint reads, by file extension (OpenAI's list).
var audioExts = []string{".flac", ".mp3", ".mp4", ".mpeg", ".mpga", ".m4a", ".ogg", ".oga", ".opus", ".wav", ".webm"}

func (s *Server) serveAudio(w http.ResponseWriter, r *http.Request) {
	var req AudioRequest
	var err error
	switch r.URL.Path {
	case "/v1/audio/transcriptions":
		req, err = decodeTranscription(r)
	case "/v1/audio/speech":
		req, err = decodeSpeech(r)
	default:
		writeError(w, http.StatusNotFound, "invalid_request_error", "unknown endpoint "+r.URL.Path)
		return
	}
	req.Header = r.Header.Clone()
	s.mu.Lock()
	s.audioReq = append(s.audioReq, req)
	h := s.audio
	s.mu.Unlock()
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	var reply AudioReply
	if h != nil {
		reply = h(req)
	}
	if reply.Delay > 0 && !s.wait(r, reply.Delay, nil) {
		return
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		writeError(w, reply.Status, "server_error", reply.Error)
		return
	}
	if req.Path == "speech" {
		// About 60 ms of speech per character, as a voice reads.
		data := files.OggOpus(time.Duration(len([]rune(req.Input))) * 60 * time.Millisecond)
		w.Header().Set("Content-Type", "audio/ogg")
		_, _ = w.Write(data)
		return
	}
	text := reply.Text
	if text == "" {
		text = fmt.Sprintf("transcript of %d bytes", len(req.File))
	}
	w.Header().Set("Content-Type", "application/json")
	if req.Fields["response_format"] == "text" {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, text)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"text": text})
}

// decodeTranscription parses the multipart form the way the API does: a file part with a
// readable container (OGG files must be whole OGG streams), a model, and no unknown field.
func decodeTranscription(r *http.Request) (AudioRequest, error) {
	req := AudioRequest{Path: "transcriptions", Fields: map[string]string{}}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return req, fmt.Errorf("Content-Type must be multipart/form-data, got %q", r.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return req, fmt.Errorf("reading the form: %w", err)
		}
		data, err := io.ReadAll(io.LimitReader(part, 25<<20+1))
		if err != nil {
			return req, fmt.Errorf("reading part %q: %w", part.FormName(), err)
		}
		switch name := part.FormName(); {
		case name == "file":
			if len(data) > 25<<20 {
				return req, fmt.Errorf("file: larger than 25 MB")
			}
			req.File, req.FileName, req.FileType = data, part.FileName(), part.Header.Get("Content-Type")
		case slices.Contains(transcriptionFields, name):
			req.Fields[name] = string(data)
		default:
			return req, fmt.Errorf("unrecognized request argument supplied: %s", name)
		}
	}
	req.Model = req.Fields["model"]
	switch {
	case req.File == nil:
		return req, fmt.Errorf("file: a file is required")
	case req.Model == "":
		return req, fmt.Errorf("model: you must provide a model parameter")
	}
	ext := strings.ToLower(path.Ext(req.FileName))
	if !slices.Contains(audioExts, ext) {
		return req, fmt.Errorf("Invalid file format. Supported formats: %s", strings.Join(audioExts, ", "))
	}
	if ext == ".ogg" || ext == ".oga" || ext == ".opus" {
		if err := files.CheckOgg(req.File); err != nil {
			return req, fmt.Errorf("the audio file could not be decoded: %w", err)
		}
	}
	if f := req.Fields["response_format"]; f != "" && !slices.Contains([]string{"json", "text", "verbose_json", "srt", "vtt"}, f) {
		return req, fmt.Errorf("response_format: unknown format %q", f)
	}
	return req, nil
}

// decodeSpeech parses a speech request: model, input (at most 4096 characters) and voice are
// required, response_format is one the API names, and no unknown field.
func decodeSpeech(r *http.Request) (AudioRequest, error) {
	req := AudioRequest{Path: "speech", Fields: map[string]string{}}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return req, err
	}
	var in struct {
		Model          string   `json:"model"`
		Input          string   `json:"input"`
		Voice          string   `json:"voice"`
		Instructions   string   `json:"instructions"`
		ResponseFormat string   `json:"response_format"`
		Speed          *float64 `json:"speed"`
		StreamFormat   string   `json:"stream_format"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return req, fmt.Errorf("invalid request body: %w", err)
	}
	req.Model, req.Input, req.Voice = in.Model, in.Input, in.Voice
	req.Fields["response_format"] = in.ResponseFormat
	switch {
	case in.Model == "":
		return req, fmt.Errorf("model: required")
	case in.Input == "":
		return req, fmt.Errorf("input: required")
	case len([]rune(in.Input)) > 4096:
		return req, fmt.Errorf("input: string too long, at most 4096 characters")
	case in.Voice == "":
		return req, fmt.Errorf("voice: required")
	case in.ResponseFormat != "" && !slices.Contains([]string{"mp3", "opus", "aac", "flac", "wav", "pcm"}, in.ResponseFormat):
		return req, fmt.Errorf("response_format: unknown format %q", in.ResponseFormat)
	case in.ResponseFormat != "opus":
		return req, fmt.Errorf("response_format %q: this fake speaks only opus", in.ResponseFormat)
	}
	return req, nil
}
