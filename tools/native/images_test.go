package native_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"relaybot/chat"
	imagekit "relaybot/internal/testkit/images"
	"relaybot/tools"
	"relaybot/tools/native"
)

const imageKey = "sk-image-secret-789"

// meter records the calls generate_image reserves and settles, and the ones it tells its
// observer of; refuse makes Start refuse.
type meter struct {
	mu       sync.Mutex
	started  []chat.ModelCall
	settled  []chat.ModelCall
	observed []chat.ModelCall
	refuseBy error
}

func (m *meter) ModelCallFinished(_ context.Context, c chat.ModelCall) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.observed = append(m.observed, c)
}

func (m *meter) Start(_ context.Context, c chat.ModelCall, _ int) (func(chat.ModelCall), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refuseBy != nil {
		return nil, m.refuseBy
	}
	m.started = append(m.started, c)
	return func(c chat.ModelCall) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.settled = append(m.settled, c)
	}, nil
}

func imageLoader(t *testing.T, opts native.ImageOptions) *native.Loader {
	t.Helper()
	l, err := native.NewLoader(native.Options{Images: opts})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func generate(l *native.Loader, m tools.Meter, prompt string) (tools.Result, error) {
	args, _ := json.Marshal(map[string]string{"prompt": prompt})
	return l.Call(context.Background(), tools.Invocation{Name: native.GenerateImage, Arguments: args, Meter: m})
}

func TestGenerateImageReturnsTheImageAsAFileAndBillsOne(t *testing.T) {
	fake := imagekit.New(imageKey)
	t.Cleanup(fake.Close)
	for _, c := range []struct{ model, size, quality, wantText string }{
		{"gpt-image-1", "1024x1536", "medium", "attached to your answer"},       // b64_json
		{"dall-e-3", "1792x1024", "hd", "drew it from this prompt: A detailed"}, // url on the endpoint's origin, revised prompt
	} {
		t.Run(c.model, func(t *testing.T) {
			m := &meter{}
			l := imageLoader(t, native.ImageOptions{BaseURL: fake.URL, APIKey: imageKey, Model: c.model, Size: c.size, Quality: c.quality, Observer: m})
			res, err := generate(l, m, "a red fox in snow")
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Files) != 1 || res.Files[0].MIME != "image/png" || !bytes.Equal(res.Files[0].Data, imagekit.PNG()) {
				t.Fatalf("files %+v, want the fake's PNG", res.Files)
			}
			if !strings.Contains(res.Text, c.wantText) {
				t.Errorf("the model read %q, want it to contain %q", res.Text, c.wantText)
			}
			reqs := fake.Requests()
			last := reqs[len(reqs)-1]
			if last.Model != c.model || last.Size != c.size || last.Quality != c.quality || last.Prompt != "a red fox in snow" || last.N != 1 {
				t.Errorf("the endpoint got %+v", last)
			}
			if len(m.started) != 1 || m.started[0].Images != 1 || m.started[0].Model != c.model {
				t.Errorf("reserved %+v, want one image of %s", m.started, c.model)
			}
			if len(m.settled) != 1 || m.settled[0].Images != 1 || m.settled[0].Status != chat.StatusOK {
				t.Errorf("settled %+v, want one image, ok", m.settled)
			}
			if len(m.observed) != 1 || m.observed[0].Images != 1 || m.observed[0].Model != c.model {
				t.Errorf("the metrics heard of %+v, want one image of %s (its cost)", m.observed, c.model)
			}
		})
	}
}

func TestGenerateImageRefusalsAreClearErrorsWithoutTheKeyAndCostNothing(t *testing.T) {
	fake := imagekit.New(imageKey)
	t.Cleanup(fake.Close)
	cases := []struct {
		name  string
		opts  native.ImageOptions
		setup func()
		want  string
	}{
		{"missing key", native.ImageOptions{Model: "gpt-image-1"}, nil, "HTTP 401 (the bot's API key was refused: an admin must check tools.images.api_key)"},
		{"wrong key", native.ImageOptions{APIKey: "sk-wrong-000", Model: "gpt-image-1"}, nil, "Incorrect API key provided: [redacted]"},
		{"bad size", native.ImageOptions{APIKey: imageKey, Model: "dall-e-3", Size: "256x256"}, nil, "HTTP 400: Invalid value: '256x256'"},
		{"rate limit", native.ImageOptions{APIKey: imageKey, Model: "gpt-image-1"}, func() { fake.RateLimit(1) }, "HTTP 429 (rate limited"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.setup != nil {
				c.setup()
			}
			m := &meter{}
			c.opts.BaseURL, c.opts.Observer = fake.URL, m
			_, err := generate(imageLoader(t, c.opts), m, "a fox")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if c.opts.APIKey != "" && strings.Contains(err.Error(), c.opts.APIKey) {
				t.Errorf("the error carries the key: %v", err)
			}
			if len(m.settled) != 1 || m.settled[0].Images != 0 || m.settled[0].Status != chat.StatusError {
				t.Errorf("settled %+v, want no image, error", m.settled)
			}
			if len(m.observed) != 1 || m.observed[0].Images != 0 || m.observed[0].Status != chat.StatusError {
				t.Errorf("the metrics heard of %+v, want one failed call without an image", m.observed)
			}
		})
	}
}

func TestGenerateImageUsedUpQuotaMakesNoRequest(t *testing.T) {
	fake := imagekit.New(imageKey)
	t.Cleanup(fake.Close)
	before := len(fake.Requests())
	m := &meter{refuseBy: errors.New("your daily cost quota is used up")}
	_, err := generate(imageLoader(t, native.ImageOptions{BaseURL: fake.URL, APIKey: imageKey, Model: "gpt-image-1"}), m, "a fox")
	if err == nil || !strings.Contains(err.Error(), "quota is used up") {
		t.Fatalf("error %v, want the quota's refusal", err)
	}
	if len(fake.Requests()) != before {
		t.Error("the endpoint was asked although the quota refused")
	}
}

// TestGenerateImageDownloadsElsewhereOnlyFromPublicAddresses: an image URL on another origin
// is fetched through the guarded client, so an endpoint cannot point the bot inside.
func TestGenerateImageDownloadsElsewhereOnlyFromPublicAddresses(t *testing.T) {
	fake := imagekit.New(imageKey)
	t.Cleanup(fake.Close)
	fake.ServeURLsFrom("http://127.0.0.2:9/secret.png")
	_, err := generate(imageLoader(t, native.ImageOptions{BaseURL: fake.URL, APIKey: imageKey, Model: "dall-e-2", Timeout: time.Minute}), nil, "a fox")
	if err == nil || !strings.Contains(err.Error(), "downloading the image from 127.0.0.2:9: refusing to connect to 127.0.0.2: loopback address") {
		t.Fatalf("error %v, want the download refused", err)
	}
}
