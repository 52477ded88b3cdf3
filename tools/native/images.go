package native

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"relaybot/chat"
	"relaybot/internal/outbound"
	"relaybot/tools"
)

// Limits of generate_image.
const (
	// DefaultImageTimeout caps one generation when ImageOptions.Timeout is 0: image models
	// take tens of seconds.
	DefaultImageTimeout = 2 * time.Minute
	// MaxImageBytes caps an image read (decoded or downloaded).
	MaxImageBytes = 20 << 20
	// MaxPromptChars caps the prompt (OpenAI's longest, gpt-image's, is 32,000).
	MaxPromptChars = 4000
)

// ImageOptions configures generate_image: an OpenAI-compatible POST /v1/images/generations
// endpoint. An empty BaseURL leaves the tool out.
type ImageOptions struct {
	// Name is the endpoint's name in the usage ledger (its llm_calls rows) and /usage, priced
	// per image there; empty means Model.
	Name string
	// BaseURL is the API's base up to /v1 ("https://api.openai.com/v1"). The admin configured it:
	// it is reached as a model endpoint is, private addresses included, never through a redirect.
	BaseURL string
	// APIKey is sent as a Bearer token; it never reaches a log, an error or the audit.
	APIKey string
	// Model, Size and Quality are sent as they are; empty ones are left out (the endpoint's
	// defaults).
	Model, Size, Quality string
	// Timeout caps one generation, the image's download included; 0 means DefaultImageTimeout.
	Timeout time.Duration
	// Observer, when set, hears of each image call as it ends, as the model calls' observer
	// does (the metrics count its price in relaybot_model_cost_total).
	Observer ModelObserver
}

// ModelObserver hears of a model call as it ends; provider.Observer is one (the metrics, the
// traces). It must not block.
type ModelObserver interface {
	ModelCallFinished(ctx context.Context, c chat.ModelCall)
}

var generateImageSpec = tools.Spec{
	Name: GenerateImage,
	Description: "Generate an image from a text description. The image is sent to the user with your answer; " +
		"do not describe how to view it or repeat its link.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string",` +
		`"description":"A detailed description of the image to create, in English where possible."}},` +
		`"required":["prompt"],"additionalProperties":false}`),
	// An image costs money: in groups it is asked for unless a policy rule says otherwise.
	AskInGroups: true,
}

// imager runs generate_image.
type imager struct {
	opts ImageOptions
	// client reaches the configured endpoint (and an image URL on its origin); fetch reaches an
	// image URL elsewhere through the guarded transport, without the key.
	client, fetch *http.Client
	now           func() time.Time
}

func newImager(opts ImageOptions, fetch *http.Client, now func() time.Time) *imager {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultImageTimeout
	}
	if opts.Name == "" {
		opts.Name = opts.Model
	}
	opts.BaseURL = strings.TrimRight(opts.BaseURL, "/")
	return &imager{opts: opts, client: adminClient(opts.Timeout), fetch: fetch, now: now}
}

// generateImage runs generate_image: the call is reserved against the person's quotas first,
// then made, then settled with the images it delivered (a failed one costs nothing).
func (l *Loader) generateImage(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
	var a struct {
		Prompt string `json:"prompt"`
	}
	if err := json.Unmarshal(inv.Arguments, &a); err != nil {
		return tools.Result{}, fmt.Errorf("generate_image: bad arguments: %w", err)
	}
	a.Prompt = strings.TrimSpace(a.Prompt)
	switch {
	case a.Prompt == "":
		return tools.Result{}, errors.New("generate_image: prompt is empty")
	case len([]rune(a.Prompt)) > MaxPromptChars:
		return tools.Result{}, fmt.Errorf("generate_image: prompt is longer than %d characters", MaxPromptChars)
	}
	g := l.images
	call := chat.ModelCall{Model: g.opts.Name, RequestModel: g.opts.Model, StartedAt: g.now(), Images: 1}
	settle := func(chat.ModelCall) {}
	if inv.Meter != nil {
		s, err := inv.Meter.Start(ctx, call, 0)
		if err != nil {
			return tools.Result{}, fmt.Errorf("generate_image: %w", err)
		}
		settle = s
	}
	if inv.Running != nil {
		inv.Running.Progress(tools.Progress{Message: "generating an image"})
	}
	cctx, cancel := context.WithTimeout(ctx, g.opts.Timeout)
	defer cancel()
	file, revised, err := g.generate(cctx, a.Prompt)
	call.Duration = g.now().Sub(call.StartedAt)
	call.TimeToFirstToken = call.Duration // not streamed: the answer comes whole
	call.Status, call.Images = chat.StatusOK, 1
	if err != nil {
		err = g.imageError(ctx, cctx, err)
		call.Status, call.Images, call.Err, call.TimeToFirstToken = chat.StatusError, 0, err, 0
		if ctx.Err() != nil {
			call.Status = chat.StatusCancelled
		}
	}
	settle(call)
	if g.opts.Observer != nil {
		g.opts.Observer.ModelCallFinished(ctx, call)
	}
	if err != nil {
		return tools.Result{}, err
	}
	text := "The image was generated and is attached to your answer."
	if revised != "" {
		text += " The endpoint drew it from this prompt: " + plainLine(revised, 1000)
	}
	return tools.Result{Text: text, Files: []chat.File{file}}, nil
}

// imageResponse is the endpoint's answer, as OpenAI's: each image as b64_json or url.
type imageResponse struct {
	Data []struct {
		B64JSON       string `json:"b64_json"`
		URL           string `json:"url"`
		RevisedPrompt string `json:"revised_prompt"`
	} `json:"data"`
}

// generate asks for one image and returns it as a file, with the prompt the endpoint says it
// drew from (DALL·E 3 rewrites prompts).
func (g *imager) generate(ctx context.Context, prompt string) (chat.File, string, error) {
	body := map[string]any{"prompt": prompt, "n": 1}
	for k, v := range map[string]string{"model": g.opts.Model, "size": g.opts.Size, "quality": g.opts.Quality} {
		if v != "" {
			body[k] = v
		}
	}
	data, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.opts.BaseURL+"/images/generations", bytes.NewReader(data))
	if err != nil {
		return chat.File{}, "", fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", DefaultAgent)
	if g.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+g.opts.APIKey)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return chat.File{}, "", unwrapURL(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 2*MaxImageBytes))
	if err != nil {
		return chat.File{}, "", fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return chat.File{}, "", &providerError{Provider: "the images endpoint", Key: "tools.images.api_key", Status: resp.StatusCode, Detail: g.redact(errorDetail(raw))}
	}
	var ans imageResponse
	if err := json.Unmarshal(raw, &ans); err != nil {
		return chat.File{}, "", fmt.Errorf("reading the answer: %w", err)
	}
	if len(ans.Data) == 0 {
		return chat.File{}, "", errors.New("the answer holds no image")
	}
	img := ans.Data[0]
	var pic []byte
	switch {
	case img.B64JSON != "":
		pic, err = base64.StdEncoding.DecodeString(img.B64JSON)
		if err != nil {
			return chat.File{}, "", fmt.Errorf("the image's base64: %w", err)
		}
	case img.URL != "":
		pic, err = g.download(ctx, img.URL)
		if err != nil {
			return chat.File{}, "", err
		}
	default:
		return chat.File{}, "", errors.New("the answer's image has neither b64_json nor url")
	}
	if len(pic) > MaxImageBytes {
		return chat.File{}, "", fmt.Errorf("the image is larger than %d bytes", MaxImageBytes)
	}
	mime := http.DetectContentType(pic)
	ext, ok := map[string]string{"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}[mime]
	if !ok {
		return chat.File{}, "", fmt.Errorf("the answer is %s, not an image", mime)
	}
	return chat.File{Name: "image." + ext, MIME: mime, Data: pic}, img.RevisedPrompt, nil
}

// download reads an image URL the endpoint answered with: on the endpoint's own origin through
// its client (a self-hosted server serves its images itself), elsewhere through the guarded
// transport (public addresses only); never with the key.
func (g *imager) download(ctx context.Context, raw string) ([]byte, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, errors.New("the answer's image URL is not an http(s) URL")
	}
	client := g.fetch
	if base, err := url.Parse(g.opts.BaseURL); err == nil && base.Scheme == u.Scheme && base.Host == u.Host {
		client = g.client
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("downloading the image: %w", err)
	}
	req.Header.Set("User-Agent", DefaultAgent)
	resp, err := client.Do(req)
	if err != nil {
		var refused *outbound.RefusedError
		if errors.As(err, &refused) {
			return nil, fmt.Errorf("downloading the image from %s: %w", u.Host, refused)
		}
		return nil, fmt.Errorf("downloading the image from %s: %w", u.Host, unwrapURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("downloading the image from %s: HTTP %s", u.Host, resp.Status)
	}
	pic, err := io.ReadAll(io.LimitReader(resp.Body, MaxImageBytes+1))
	if err != nil {
		return nil, fmt.Errorf("downloading the image from %s: %w", u.Host, err)
	}
	return pic, nil
}

// unwrapURL drops url.Error's repetition of the method and URL.
func unwrapURL(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// redact removes the API key from text the endpoint sent back.
func (g *imager) redact(text string) string {
	if g.opts.APIKey == "" {
		return text
	}
	return strings.ReplaceAll(text, g.opts.APIKey, tools.Redacted)
}

// imageError is the tool's error for a failed generation: a timeout wraps tools.ErrTimeout.
func (g *imager) imageError(parent, cctx context.Context, err error) error {
	switch {
	case parent.Err() != nil:
		return fmt.Errorf("generate_image: %w", parent.Err())
	case errors.Is(cctx.Err(), context.DeadlineExceeded) || tools.IsTimeout(err):
		return fmt.Errorf("generate_image: no image within %s: %w", g.opts.Timeout, tools.ErrTimeout)
	}
	return fmt.Errorf("generate_image: %s", g.redact(err.Error()))
}
