// Package images is a loopback fake of OpenAI's image generation API
// (POST /v1/images/generations), answering as OpenAI does: b64_json or url images, and
// OpenAI's error bodies for what it refuses (a missing or wrong key 401, a size or quality the
// model does not take 400, response_format sent to a gpt-image model 400, over the rate limit
// 429). The url format's images are served by the fake itself (GET /files/NAME.png).
package images

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"
)

// Request is one accepted generation request.
type Request struct {
	Model, Prompt, Size, Quality, ResponseFormat string
	N                                            int
}

// Server is a running fake.
type Server struct {
	// URL is the base the bot is configured with, up to /v1.
	URL string
	key string
	srv *httptest.Server

	mu       sync.Mutex
	requests []Request
	files    map[string][]byte
	limited  int
	// fileURL, when set, replaces the URL of url-format images (an image hosted elsewhere).
	fileURL string
}

// New starts a fake that takes key as its API key.
func New(key string) *Server {
	s := &Server{key: key, files: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/images/generations", s.generate)
	mux.HandleFunc("/files/", s.file)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL + "/v1"
	return s
}

// Close stops the fake.
func (s *Server) Close() { s.srv.Close() }

// RateLimit makes the next n requests be refused with 429.
func (s *Server) RateLimit(n int) {
	s.mu.Lock()
	s.limited = n
	s.mu.Unlock()
}

// ServeURLsFrom makes url-format answers point at u instead of the fake's own /files/.
func (s *Server) ServeURLsFrom(u string) {
	s.mu.Lock()
	s.fileURL = u
	s.mu.Unlock()
}

// Requests returns the accepted requests, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// PNG is the image the fake draws: a small PNG, the same for every prompt.
func PNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for i := range img.Pix {
		img.Pix[i] = byte(i)
	}
	img.Set(0, 0, color.RGBA{255, 0, 0, 255})
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes()
}

// sizes are the sizes each model family takes, as OpenAI documents them.
func sizes(model string) []string {
	switch {
	case strings.HasPrefix(model, "gpt-image"):
		return []string{"1024x1024", "1536x1024", "1024x1536", "auto"}
	case model == "dall-e-3":
		return []string{"1024x1024", "1792x1024", "1024x1792"}
	default: // dall-e-2, the default model
		return []string{"256x256", "512x512", "1024x1024"}
	}
}

func qualities(model string) []string {
	switch {
	case strings.HasPrefix(model, "gpt-image"):
		return []string{"low", "medium", "high", "auto"}
	case model == "dall-e-3":
		return []string{"standard", "hd"}
	default:
		return []string{"standard"}
	}
}

// openAIError writes OpenAI's error body.
func openAIError(w http.ResponseWriter, status int, typ, code, param, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	e := map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}
	if code != "" {
		e["code"] = code
	}
	if param != "" {
		e["param"] = param
	}
	json.NewEncoder(w).Encode(map[string]any{"error": e})
}

func (s *Server) generate(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		openAIError(w, http.StatusMethodNotAllowed, "invalid_request_error", "", "", "Method not allowed.")
		return
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case !ok || key == "":
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "", "", "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")
		return
	case key != s.key:
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "", "Incorrect API key provided: "+key+". You can find your API key at https://platform.openai.com/account/api-keys.")
		return
	}
	var req struct {
		Model          string `json:"model"`
		Prompt         string `json:"prompt"`
		N              *int   `json:"n"`
		Size           string `json:"size"`
		Quality        string `json:"quality"`
		ResponseFormat string `json:"response_format"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "", "We could not parse the JSON body of your request.")
		return
	}
	model := req.Model
	if model == "" {
		model = "dall-e-2"
	}
	n := 1
	if req.N != nil {
		n = *req.N
	}
	gptImage := strings.HasPrefix(model, "gpt-image")
	switch {
	case !gptImage && model != "dall-e-2" && model != "dall-e-3":
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "model", fmt.Sprintf("Invalid value for 'model' = %s.", model))
	case strings.TrimSpace(req.Prompt) == "":
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "prompt", "Missing required parameter: 'prompt'.")
	case n < 1 || n > 10 || model == "dall-e-3" && n != 1:
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "n", fmt.Sprintf("Invalid 'n': %d is not supported by %s.", n, model))
	case req.Size != "" && !slices.Contains(sizes(model), req.Size):
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value", "size",
			fmt.Sprintf("Invalid value: '%s'. Supported values are: %s.", req.Size, strings.Join(sizes(model), ", ")))
	case req.Quality != "" && !slices.Contains(qualities(model), req.Quality):
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value", "quality",
			fmt.Sprintf("Invalid value: '%s'. Supported values are: %s.", req.Quality, strings.Join(qualities(model), ", ")))
	case gptImage && req.ResponseFormat != "":
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "unknown_parameter", "response_format", "Unknown parameter: 'response_format'.")
	case req.ResponseFormat != "" && req.ResponseFormat != "url" && req.ResponseFormat != "b64_json":
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value", "response_format", "Invalid value for 'response_format'.")
	default:
		s.answer(w, Request{Model: model, Prompt: req.Prompt, Size: req.Size, Quality: req.Quality, ResponseFormat: req.ResponseFormat, N: n})
	}
}

// answer writes the images of an accepted request: b64_json for gpt-image models and when asked
// for, url otherwise (DALL·E's default).
func (s *Server) answer(w http.ResponseWriter, req Request) {
	s.mu.Lock()
	if s.limited > 0 {
		s.limited--
		s.mu.Unlock()
		openAIError(w, http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "", "Rate limit reached for images per minute. Please try again later.")
		return
	}
	s.requests = append(s.requests, req)
	seq := len(s.requests)
	fileURL := s.fileURL
	pic := PNG()
	var data []map[string]any
	for i := range req.N {
		item := map[string]any{}
		if strings.HasPrefix(req.Model, "gpt-image") || req.ResponseFormat == "b64_json" {
			item["b64_json"] = base64.StdEncoding.EncodeToString(pic)
		} else {
			name := fmt.Sprintf("img-%d-%d.png", seq, i)
			s.files[name] = pic
			item["url"] = strings.TrimSuffix(s.URL, "/v1") + "/files/" + name
			if fileURL != "" {
				item["url"] = fileURL
			}
		}
		if req.Model == "dall-e-3" {
			item["revised_prompt"] = "A detailed rendering of " + req.Prompt
		}
		data = append(data, item)
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"created": time.Now().Unix(), "data": data})
}

func (s *Server) file(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	pic, ok := s.files[strings.TrimPrefix(r.URL.Path, "/files/")]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Write(pic)
}
