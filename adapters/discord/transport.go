package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"relaybot/adapters"
)

// defaultAPIBase is Discord's REST API. discordgo v0.29 builds v9 URLs; the routes the adapter
// uses are the same in v10, whose rules (message content intent) the adapter follows.
const defaultAPIBase = "https://discord.com/api/v10"

// discordgoAPI is the prefix of every URL discordgo builds ("https://discord.com/api/v9");
// discordgo's endpoint variables are only read.
func discordgoAPI() string { return strings.TrimSuffix(discordgo.EndpointAPI, "/") }

// rewriter is the http.RoundTripper of the adapter's discordgo session. discordgo builds its
// URLs from package-level endpoint variables (https://discord.com/api/v9/...); instead of
// changing those for the whole process, every request to that prefix is sent to the configured
// API base. It also removes the X-RateLimit-* headers from answers before discordgo sees them:
// discordgo's buckets would otherwise sleep (uncancellably, holding a lock) before the next
// request, while pacing is owned by the delivery engine. 429 answers keep their body, so the
// engine still learns retry_after (and, through globalBucket, whether the limit was global); a
// 429 whose body is not Discord's JSON is given one (normalize429).
//
// Discord counts every request of the bot's token against its global limit. The adapter makes
// its own requests through the delivery engine, which paces them (reqOpts marks their contexts:
// accounted); a request to the API that discordgo makes on its own (GET /gateway before each
// connection) waits for its place in the bot-wide budget here (pace), so that one replica's
// reconnects cannot push the bot over its limit.
type rewriter struct {
	from string   // "https://discord.com/api/v9"
	to   *url.URL // the configured base
	next http.RoundTripper
	// pace waits for a request's place in the bot-wide budget and returns the func giving it
	// back; nil paces nothing. Set once, before the first request.
	pace func(ctx context.Context) (release func(), err error)
}

// accountedKey marks the context of a request the delivery engine has given its place.
type accountedKey struct{}

// accounted returns ctx marked as the context of a request the delivery engine paces.
func accounted(ctx context.Context) context.Context {
	return context.WithValue(ctx, accountedKey{}, true)
}

func newRewriter(apiBase string, next http.RoundTripper) (*rewriter, error) {
	to, err := url.Parse(strings.TrimSuffix(apiBase, "/"))
	if err != nil {
		return nil, fmt.Errorf("discord: api base %q: %w", apiBase, err)
	}
	if to.Scheme != "http" && to.Scheme != "https" || to.Host == "" {
		return nil, fmt.Errorf("discord: api base %q: want an http(s) URL such as %s", apiBase, defaultAPIBase)
	}
	if next == nil {
		next = http.DefaultTransport
	}
	return &rewriter{from: discordgoAPI(), to: to, next: next}, nil
}

func (t *rewriter) RoundTrip(req *http.Request) (*http.Response, error) {
	u := req.URL.String()
	if rest, ok := strings.CutPrefix(u, t.from); ok && (rest == "" || rest[0] == '/' || rest[0] == '?') {
		target, err := url.Parse(t.to.String() + rest)
		if err != nil {
			return nil, fmt.Errorf("discord: rewriting %s: %w", req.URL.Path, err)
		}
		req = req.Clone(req.Context())
		req.URL = target
		req.Host = target.Host
		if t.pace != nil && req.Context().Value(accountedKey{}) == nil {
			release, err := t.pace(req.Context())
			if err != nil {
				return nil, fmt.Errorf("discord: %s %s: waiting for a place in the bot's global budget: %w", req.Method, req.URL.Path, err)
			}
			defer release()
		}
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		global := resp.Header.Get("X-RateLimit-Global") == "true" || resp.Header.Get("X-RateLimit-Scope") == "global"
		normalize429(resp, global, time.Now())
	}
	for k := range resp.Header {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "X-Ratelimit-") {
			resp.Header.Del(k)
		}
	}
	return resp, nil
}

// globalBucket marks a 429 of Discord's global limit. discordgo's RateLimitError keeps only the
// bucket, message and retry_after of a 429 body, so the transport writes this into the body's
// bucket field when the headers say the limit is global; classify reads it back.
const globalBucket = "relaybot:global"

// normalize429 rewrites a 429's body into the JSON discordgo can read. Discord's own body is
// kept, with globalBucket written into its bucket field when global is set, and retry_after
// taken from the Retry-After header if the body has none. A body that is not a JSON object (an
// HTML page from a proxy or Cloudflare in front of Discord) would make discordgo report a JSON
// decode error, which reads as a permanent failure; it is replaced by a JSON body whose
// retry_after comes from the Retry-After header (defaultRetryAfter if absent or unreadable),
// so the delivery engine waits and tries again.
func normalize429(resp *http.Response, global bool, now time.Time) {
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	var body map[string]any
	if err != nil || json.Unmarshal(data, &body) != nil || body == nil {
		body = map[string]any{
			"message": fmt.Sprintf("rate limited (HTTP 429 with a %q body, not Discord's JSON)", mediaType(resp.Header.Get("Content-Type"))),
		}
	}
	if _, ok := body["retry_after"].(float64); !ok {
		d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), now)
		if !ok {
			d = defaultRetryAfter
		}
		body["retry_after"] = d.Seconds()
	}
	if global {
		body["bucket"] = globalBucket
	}
	if b, err := json.Marshal(body); err == nil {
		data = b
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	resp.ContentLength = int64(len(data))
	resp.Header.Set("Content-Length", strconv.Itoa(len(data)))
	resp.Header.Set("Content-Type", "application/json")
}

// mediaType is the media type of a Content-Type header without its parameters.
func mediaType(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	if mt = strings.TrimSpace(mt); mt == "" {
		return "untyped"
	}
	return mt
}

// parseRetryAfter reads a Retry-After header: seconds (Discord and most proxies; fractions
// allowed) or an HTTP date. It reports false for an absent or unreadable header.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs < 0 || secs > maxRetryAfter.Seconds() {
			return 0, false
		}
		return time.Duration(secs * float64(time.Second)), true
	}
	if at, err := http.ParseTime(v); err == nil {
		d := max(at.Sub(now), 0)
		if d > maxRetryAfter {
			return 0, false
		}
		return d, true
	}
	return 0, false
}

// Discord JSON error codes the adapter acts on.
const (
	codeUnknownMessage  = 10008
	codeInvalidFormBody = 50035
	codeTooOldToEdit    = 30046 // "maximum number of edits to messages older than 1 hour reached"
)

// classify maps a discordgo error onto the error types of package adapters, keeping the
// original error in the chain. what names the request ("edit message 123").
func classify(what string, err error) error {
	if err == nil {
		return nil
	}
	var rl *discordgo.RateLimitError
	if errors.As(err, &rl) {
		global := rl.RateLimit != nil && rl.TooManyRequests != nil && rl.Bucket == globalBucket
		return fmt.Errorf("discord: %s: %w", what, &adapters.RateLimitError{RetryAfter: rl.RetryAfter, Global: global, Err: err})
	}
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil {
		code := 0
		if re.Message != nil {
			code = re.Message.Code
		}
		switch {
		case code == codeUnknownMessage || code == codeTooOldToEdit:
			return fmt.Errorf("discord: %s: %w (%w)", what, adapters.ErrMessageGone, err)
		case code == codeInvalidFormBody && strings.Contains(string(re.ResponseBody), "BASE_TYPE_MAX_LENGTH"):
			return fmt.Errorf("discord: %s: %w (%w)", what, adapters.ErrTooLong, err)
		case re.Response.StatusCode >= 500:
			return fmt.Errorf("discord: %s: %w (%w)", what, adapters.ErrTemporary, err)
		}
		return fmt.Errorf("discord: %s: %w", what, err)
	}
	// With retries off, discordgo reports a 502 as a plain error rather than a RESTError.
	if strings.HasPrefix(err.Error(), "Exceeded Max retries HTTP 5") {
		return fmt.Errorf("discord: %s: %w (%w)", what, adapters.ErrTemporary, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("discord: %s: %w", what, err)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// The connection failed or broke: the request may pass when tried again.
		return fmt.Errorf("discord: %s: %w (%w)", what, adapters.ErrTemporary, err)
	}
	return fmt.Errorf("discord: %s: %w", what, err)
}

const (
	// defaultRetryAfter is the wait assumed for a 429 that says neither in its body nor in a
	// readable Retry-After header how long to wait.
	defaultRetryAfter = 5 * time.Second
	// maxRetryAfter bounds a Retry-After header believed; a larger value (or a date further
	// out) is treated as unreadable and defaultRetryAfter is used.
	maxRetryAfter = time.Hour
)
