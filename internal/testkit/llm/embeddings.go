package llm

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"strings"
	"unicode"
)

// DefaultEmbeddingDims is the length of the fake's vectors when the request names no dimensions
// and SetEmbeddingDims named none for the model.
const DefaultEmbeddingDims = 64

// maxEmbeddingInputs is the API's limit on inputs in one request.
const maxEmbeddingInputs = 2048

// EmbeddingRequest is one recorded POST /v1/embeddings.
type EmbeddingRequest struct {
	Model      string
	Inputs     []string
	Dimensions int
}

type wireEmbeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	Dimensions     int             `json:"dimensions"`
	EncodingFormat string          `json:"encoding_format"`
}

// SetEmbeddingDims makes model answer with vectors of dims numbers (when the request names no
// dimensions); a model not set answers with DefaultEmbeddingDims.
func (s *Server) SetEmbeddingDims(model string, dims int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.embedDims == nil {
		s.embedDims = map[string]int{}
	}
	s.embedDims[model] = dims
}

// FailEmbeddings makes the next n embedding requests fail with status (a provider outage).
func (s *Server) FailEmbeddings(n, status int) {
	s.mu.Lock()
	s.embedFail, s.embedFailStatus = n, status
	s.mu.Unlock()
}

// EmbeddingRequests returns the embedding requests received so far, in order (refused ones
// included).
func (s *Server) EmbeddingRequests() []EmbeddingRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]EmbeddingRequest(nil), s.embedReq...)
}

// serveEmbeddings answers POST /v1/embeddings with deterministic vectors: each word of an input
// (lower-cased letters and digits) adds to the dimensions its hash and the model's name pick, and
// the vector is normalised, so texts that share words are close and another model's vectors live
// in another space. It refuses what OpenAI refuses: no model, an empty input, more than 2,048
// inputs, dimensions asked of a model that cannot shorten its vectors (only text-embedding-3-*
// can), and an encoding format other than float or base64.
func (s *Server) serveEmbeddings(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "reading body: "+err.Error())
		return
	}
	var wr wireEmbeddingRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "request body is not an embeddings request: "+err.Error())
		return
	}
	inputs, inErr := embeddingInputs(wr.Input)
	s.mu.Lock()
	s.embedReq = append(s.embedReq, EmbeddingRequest{Model: wr.Model, Inputs: inputs, Dimensions: wr.Dimensions})
	dims := s.embedDims[wr.Model]
	fail := s.embedFail > 0
	status := s.embedFailStatus
	if fail {
		s.embedFail--
	}
	s.mu.Unlock()
	if msg := refuseEmbedding(wr, inputs, inErr); msg != "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", msg)
		return
	}
	if fail {
		writeError(w, status, errorType(status, ""), "llm fake: embeddings unavailable")
		return
	}
	if wr.Dimensions > 0 {
		dims = wr.Dimensions
	}
	if dims <= 0 {
		dims = DefaultEmbeddingDims
	}
	writeEmbeddings(w, wr.Model, inputs, dims)
}

// embeddingInputs reads input: a string or an array of strings (token arrays are not faked).
func embeddingInputs(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("'input' is a required property")
	}
	if raw[0] == '"' {
		var one string
		if err := json.Unmarshal(raw, &one); err != nil {
			return nil, err
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("'input' must be a string or an array of strings: %w", err)
	}
	return many, nil
}

func refuseEmbedding(wr wireEmbeddingRequest, inputs []string, inErr error) string {
	switch {
	case wr.Model == "":
		return "you must provide a model parameter"
	case inErr != nil:
		return inErr.Error()
	case len(inputs) == 0:
		return "'$.input' is invalid: an empty array"
	case len(inputs) > maxEmbeddingInputs:
		return fmt.Sprintf("'$.input' is invalid: at most %d inputs, got %d", maxEmbeddingInputs, len(inputs))
	case wr.Dimensions < 0:
		return "'dimensions' must be positive"
	case wr.Dimensions > 0 && !strings.HasPrefix(wr.Model, "text-embedding-3"):
		return "This model does not support specifying dimensions."
	case wr.EncodingFormat != "" && wr.EncodingFormat != "float" && wr.EncodingFormat != "base64":
		return "'encoding_format' must be float or base64"
	}
	for i, in := range inputs {
		if in == "" {
			return fmt.Sprintf("'$.input[%d]' is invalid: an empty string", i)
		}
	}
	return ""
}

func writeEmbeddings(w http.ResponseWriter, model string, inputs []string, dims int) {
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	out := struct {
		Object string `json:"object"`
		Data   []item `json:"data"`
		Model  string `json:"model"`
		Usage  struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}{Object: "list", Model: model}
	for i, in := range inputs {
		out.Data = append(out.Data, item{Object: "embedding", Index: i, Embedding: FakeEmbedding(model, in, dims)})
		out.Usage.PromptTokens += (len(in) + 3) / 4
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens
	body, err := json.Marshal(out)
	if err != nil {
		panic(fmt.Sprintf("llm fake: encoding embeddings: %v", err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// FakeEmbedding is the vector the fake answers for text from model with dims numbers: a bag of
// its words hashed with the model's name, normalised to length 1 (all zero but the first number
// for a text without words).
func FakeEmbedding(model, text string, dims int) []float32 {
	v := make([]float32, dims)
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for _, word := range words {
		h := fnv.New64a()
		_, _ = io.WriteString(h, model)
		_, _ = io.WriteString(h, "\x00")
		_, _ = io.WriteString(h, word)
		sum := h.Sum64()
		sign := float32(1)
		if sum>>63 == 1 {
			sign = -1
		}
		v[int(sum%uint64(dims))] += sign
	}
	var norm float64
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	if norm == 0 {
		v[0] = 1
		return v
	}
	n := float32(math.Sqrt(norm))
	for i := range v {
		v[i] /= n
	}
	return v
}
