package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/html/charset"

	"relaybot/internal/outbound"
	"relaybot/tools"
)

var fetchURLSpec = tools.Spec{
	Name: FetchURL,
	Description: "Fetch a web page or text document with HTTP GET and return its readable text " +
		"(HTML is reduced to text). At most 1 MiB is read.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string",` +
		`"description":"Absolute http or https URL."}},"required":["url"],"additionalProperties":false}`),
	// A GET changes nothing the bot answers for: fetches may run side by side.
	ReadOnly: true,
}

// newClient returns the HTTP client of fetch_url: the guarded transport (every connection, the
// first and each redirect's, is checked at dial time against the resolved address, so DNS names
// that point inside cannot get around the rule). fetch_url carries no credentials, so it follows
// redirects to other origins too, http and https only.
func newClient(opts Options) *http.Client {
	return &http.Client{
		Transport: outbound.Transport(outbound.Options{Local: opts.AllowPrivate, Permit: opts.Permit,
			ResponseHeaderTimeout: opts.Timeout, DisableKeepAlives: true}), // no idle connections outlive a call
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > outbound.MaxRedirects {
				return fmt.Errorf("more than %d redirects", outbound.MaxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirect to a %s URL", req.URL.Scheme)
			}
			return nil
		},
	}
}

// fetchURL runs fetch_url: one GET, at most opts.MaxBytes read, the page as text.
func (l *Loader) fetchURL(ctx context.Context, raw json.RawMessage, r tools.Running) (tools.Result, error) {
	u, err := fetchTarget(raw)
	if err != nil {
		return tools.Result{}, err
	}
	shown := u.Redacted()

	cctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return tools.Result{}, fmt.Errorf("fetch_url: %s: %w", shown, err)
	}
	req.Header.Set("User-Agent", l.opts.UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain,application/json,*/*;q=0.5")
	if r != nil {
		r.Progress(tools.Progress{Message: "fetching " + u.Host})
	}

	resp, err := l.client.Do(req)
	if err != nil {
		return tools.Result{}, l.fetchError(ctx, cctx, shown, err)
	}
	defer resp.Body.Close()
	final := resp.Request.URL.Redacted()
	if resp.StatusCode >= 400 {
		return tools.Result{}, fmt.Errorf("fetch_url: GET %s: HTTP %s", final, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, l.opts.MaxBytes+1))
	if err != nil {
		return tools.Result{}, l.fetchError(ctx, cctx, shown, err)
	}
	truncated := int64(len(body)) > l.opts.MaxBytes
	if truncated {
		body = body[:l.opts.MaxBytes]
	}
	text, err := pageText(final, resp.Header.Get("Content-Type"), body)
	if err != nil {
		return tools.Result{}, err
	}
	if truncated {
		text += fmt.Sprintf("\n[truncated: only the first %d bytes were read]", l.opts.MaxBytes)
	}
	return tools.Result{Text: text}, nil
}

// fetchTarget reads fetch_url's arguments: an absolute http(s) URL without credentials.
func fetchTarget(raw json.RawMessage) (*url.URL, error) {
	var a struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("fetch_url: bad arguments: %w", err)
	}
	u, err := url.Parse(strings.TrimSpace(a.URL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("fetch_url: %q is not an absolute http or https URL", a.URL)
	}
	if u.User != nil {
		return nil, errors.New("fetch_url: URLs with credentials are not fetched")
	}
	return u, nil
}

// pageText is what the model reads of a page fetched from final: its URL, then HTML reduced to
// its title and text, or other text decoded from its charset. ctype is the Content-Type header
// (sniffed from body when empty); a body that is not text is refused.
func pageText(final, ctype string, body []byte) (string, error) {
	if ctype == "" {
		ctype = http.DetectContentType(body)
	}
	mediaType, _, err := mime.ParseMediaType(ctype)
	if err != nil {
		mediaType = strings.ToLower(strings.TrimSpace(strings.Split(ctype, ";")[0]))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "URL: %s\n", final)
	switch {
	case mediaType == "text/html" || mediaType == "application/xhtml+xml":
		title, text, err := htmlText(body, ctype)
		if err != nil {
			return "", fmt.Errorf("fetch_url: reading the HTML of %s: %w", final, err)
		}
		if title != "" {
			fmt.Fprintf(&b, "Title: %s\n", title)
		}
		b.WriteString("\n")
		b.WriteString(text)
	case isText(mediaType):
		r, err := charset.NewReader(strings.NewReader(string(body)), ctype)
		if err != nil {
			return "", fmt.Errorf("fetch_url: decoding %s: %w", final, err)
		}
		text, err := io.ReadAll(r)
		if err != nil {
			return "", fmt.Errorf("fetch_url: decoding %s: %w", final, err)
		}
		fmt.Fprintf(&b, "Content-Type: %s\n\n", mediaType)
		b.Write(text)
	default:
		return "", fmt.Errorf("fetch_url: %s is %s, not text", final, mediaType)
	}
	// A page may declare a charset its bytes break (or none the decoder knows, which passes
	// them through): what reaches the model is valid UTF-8 all the same.
	return strings.ToValidUTF8(b.String(), "\uFFFD"), nil
}

func isText(mediaType string) bool {
	return strings.HasPrefix(mediaType, "text/") ||
		strings.HasSuffix(mediaType, "+json") || strings.HasSuffix(mediaType, "+xml") ||
		mediaType == "application/json" || mediaType == "application/xml" ||
		mediaType == "application/javascript" || mediaType == "application/x-ndjson"
}

// fetchError turns a client error into the tool's error: a refused address, a timeout (wrapping
// tools.ErrTimeout) or the failure as it is.
func (l *Loader) fetchError(parent, cctx context.Context, shown string, err error) error {
	var refused *outbound.RefusedError
	switch {
	case errors.As(err, &refused):
		return fmt.Errorf("fetch_url: %s: %w (loopback, private and link-local addresses are not allowed)", shown, refused)
	case parent.Err() != nil:
		return fmt.Errorf("fetch_url: %s: %w", shown, parent.Err())
	case errors.Is(cctx.Err(), context.DeadlineExceeded) || tools.IsTimeout(err):
		// The transport's response-header timer has the same length as cctx and may fire first.
		return fmt.Errorf("fetch_url: %s: no complete answer within %s: %w", shown, l.opts.Timeout, tools.ErrTimeout)
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err // url.Error repeats the method and URL, possibly with credentials
	}
	return fmt.Errorf("fetch_url: %s: %w", shown, err)
}
