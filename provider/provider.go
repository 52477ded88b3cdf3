// Package provider is the model client noun: the connection to one OpenAI-compatible endpoint
// (Endpoint: base URL, key, model, timeout, and the client it is reached through), how its
// failures are classified (ErrorKind) and who hears of its calls (Observer). The agent's runner,
// speech and every other caller of a model build on it, so none of them depends on another's
// loop.
package provider

import (
	"context"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"relaybot/chat"
)

// Endpoint is one model at one provider. Its toml tags are the keys config.toml writes it
// with ([[models]], [speech]): config decodes the file into it, so the runner and speech take
// the value the file named, with no copy between.
type Endpoint struct {
	// Name labels the endpoint in logs, the audit trail, usage and metrics; Label falls back
	// to Model when it is empty.
	Name string `toml:"name"`
	// BaseURL is the OpenAI-compatible API root, e.g. "https://api.openai.com/v1".
	BaseURL string `toml:"base_url"`
	// APIKey is sent as a bearer token; it never appears in errors or logs.
	APIKey string `toml:"api_key"`
	// Model is the provider's model id ("gpt-4o-mini", "whisper-1", "tts-1", ...).
	Model string `toml:"model"`
	// Timeout bounds the wait for an answer: a whole request, or each chunk of a stream. Its
	// callers say what zero means for them.
	Timeout time.Duration `toml:"timeout_sec"`
}

// Label is the endpoint's Name, or its Model when it has none.
func (e Endpoint) Label() string {
	if e.Name != "" {
		return e.Name
	}
	return e.Model
}

// Client returns the go-openai client that speaks to the endpoint through hc (nil:
// http.DefaultClient). A trailing slash of BaseURL is dropped: go-openai appends the paths.
func (e Endpoint) Client(hc *http.Client) *openai.Client {
	cfg := openai.DefaultConfig(e.APIKey)
	cfg.BaseURL = strings.TrimRight(e.BaseURL, "/")
	if hc != nil {
		cfg.HTTPClient = hc
	}
	return openai.NewClientWithConfig(cfg)
}

// Observer is told about every model call when it ends, failed fallback attempts included.
// ModelCallFinished is called synchronously from the caller's goroutine and must not block; ctx
// is the caller's context (it carries the turn's trace span, if any).
type Observer interface {
	ModelCallFinished(ctx context.Context, c chat.ModelCall)
}
