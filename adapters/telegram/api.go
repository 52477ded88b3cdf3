package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"relaybot/adapters"
)

// ctxClient sends every request of one call with the call's context, which tgbotapi's
// NewBotAPIWithClient (getMe) and UploadFiles do not take themselves.
type ctxClient struct {
	ctx  context.Context
	base *http.Client
}

func (c ctxClient) Do(req *http.Request) (*http.Response, error) {
	return c.base.Do(req.WithContext(c.ctx))
}

// api makes the Bot API calls, with per-call contexts, token redaction, error classification
// and the following of groups upgraded to supergroups. Calls with parameters only (call,
// callInto) go out through post, which sends what tgbotapi's MakeRequest sends, byte for byte,
// for less work; uploads go through tgbotapi's UploadFiles.
type api struct {
	bot            *tgbotapi.BotAPI
	base           *http.Client
	endpoint       string // the Bot API URL format: token, then method
	token          string
	retryAfterUnit time.Duration
	log            *slog.Logger
	// answers are the buffers answers are read into (*bytes.Buffer), kept between calls.
	answers sync.Pool
	// urls are the methods' URLs, the endpoint formatted once for each.
	urlMu sync.RWMutex
	urls  map[string]string

	mu       sync.Mutex
	migrated map[string]string // group chat id → the supergroup it was upgraded to
}

// with returns a copy of the bot that sends with ctx.
func (a *api) with(ctx context.Context) *tgbotapi.BotAPI {
	b := *a.bot
	b.Client = ctxClient{ctx: ctx, base: a.base}
	return &b
}

// redact removes the token (plain or URL-escaped) from s.
func (a *api) redact(s string) string { return redactToken(a.token, s) }

// call makes one Bot API request and returns its result, classifying failures.
func (a *api) call(ctx context.Context, method string, params tgbotapi.Params) (json.RawMessage, error) {
	var res json.RawMessage
	err := a.callInto(ctx, method, params, &res)
	return res, err
}

// callInto makes one Bot API request and decodes its result into out, a pointer (nil when
// success is all the caller needs to know), classifying failures. A result that does not fit
// out is an error, not a temporary one: the call took effect.
func (a *api) callInto(ctx context.Context, method string, params tgbotapi.Params, out any) error {
	return a.do(ctx, method, params, func() error { return a.post(ctx, method, params, out) })
}

// upload makes one multipart Bot API request with a file.
func (a *api) upload(ctx context.Context, method string, params tgbotapi.Params, files []tgbotapi.RequestFile) (json.RawMessage, error) {
	var res json.RawMessage
	err := a.do(ctx, method, params, func() error {
		resp, err := a.with(ctx).UploadFiles(method, params, files)
		if err == nil {
			res = resp.Result
		}
		return err
	})
	return res, err
}

// do sends a request built from params. A chat_id of a group known to have been upgraded to a
// supergroup is replaced by the supergroup's id first. When Telegram answers that the group was
// upgraded (400 with parameters.migrate_to_chat_id), the new id is remembered for every later
// request to that chat and the request is sent once more to the supergroup; params keeps the
// id it went out with, so a caller's own retry with the same params goes there too.
func (a *api) do(ctx context.Context, method string, params tgbotapi.Params, send func() error) error {
	chatID, hasChat := params["chat_id"]
	if hasChat {
		params["chat_id"] = a.chatID(chatID)
	}
	err := send()
	if err == nil {
		return nil
	}
	if to, ok := migratedTo(err); hasChat && ok {
		from := params["chat_id"]
		a.migrate(from, to)
		a.log.Info("telegram: group upgraded to a supergroup; sending there from now on", "chat", from, "supergroup", to, "method", method)
		params["chat_id"] = to
		err = send()
	}
	if err != nil {
		return a.classify(ctx, method, err)
	}
	return nil
}

// migratedTo is the supergroup of a failure answer that says the group was upgraded to one.
func migratedTo(err error) (string, bool) {
	var terr *tgbotapi.Error
	if !errors.As(err, &terr) || terr.MigrateToChatID == 0 {
		return "", false
	}
	return strconv.FormatInt(terr.MigrateToChatID, 10), true
}

// post sends params to method as a form and reads the answer, as tgbotapi's MakeRequest does,
// with the same request on the wire (URL, headers and body, byte for byte: encodeForm), and
// fails the same ways: a *tgbotapi.Error for a failure answer, the transport's or the JSON
// decoder's error otherwise. It does less to get there: the form is written straight into
// the body, and the answer is read into a kept buffer and decoded once, its result straight
// into out.
func (a *api) post(ctx context.Context, method string, params tgbotapi.Params, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url(method), bytes.NewReader(encodeForm(params)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := a.base.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	buf, _ := a.answers.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	defer a.keep(buf)
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return err
	}
	return decodeAnswer(buf.Bytes(), out)
}

// url is the URL of method, as MakeRequest formats it.
func (a *api) url(method string) string {
	a.urlMu.RLock()
	u, ok := a.urls[method]
	a.urlMu.RUnlock()
	if ok {
		return u
	}
	u = fmt.Sprintf(a.endpoint, a.token, method)
	a.urlMu.Lock()
	defer a.urlMu.Unlock()
	if a.urls == nil {
		a.urls = map[string]string{}
	}
	a.urls[method] = u
	return u
}

// maxKeptAnswer bounds the buffers kept for answers: one grown by a rare large answer (a
// getUpdates of many updates) goes to the garbage collector instead.
const maxKeptAnswer = 64 << 10

// keep empties buf and keeps it for the next answer, unless it grew too large.
func (a *api) keep(buf *bytes.Buffer) {
	if buf.Cap() > maxKeptAnswer {
		return
	}
	buf.Reset()
	a.answers.Put(buf)
}

// envelope is every Bot API answer; Result is where the caller wants the result.
type envelope struct {
	OK          bool                         `json:"ok"`
	Result      any                          `json:"result"`
	ErrorCode   int                          `json:"error_code"`
	Description string                       `json:"description"`
	Parameters  *tgbotapi.ResponseParameters `json:"parameters"`
}

// ignored takes a result nobody reads, without decoding it.
type ignored struct{}

func (*ignored) UnmarshalJSON([]byte) error { return nil }

// resultError is a success answer whose result does not fit what the caller expects.
type resultError struct{ err error }

func (e *resultError) Error() string { return "unexpected result: " + e.err.Error() }

func (e *resultError) Unwrap() error { return e.err }

// decodeAnswer decodes a Bot API answer, its result into out (nil: not decoded). It returns
// the answer's failure as a *tgbotapi.Error, as tgbotapi does.
func decodeAnswer(body []byte, out any) error {
	if out == nil {
		out = &ignored{}
	}
	ans := envelope{Result: out}
	if err := json.Unmarshal(body, &ans); err != nil {
		if ans.OK && inResult(err) {
			return &resultError{err: err}
		}
		return err
	}
	if !ans.OK {
		var params tgbotapi.ResponseParameters
		if ans.Parameters != nil {
			params = *ans.Parameters
		}
		return &tgbotapi.Error{Code: ans.ErrorCode, Message: ans.Description, ResponseParameters: params}
	}
	return nil
}

// inResult reports whether err is a JSON value of the result that does not fit its Go type.
func inResult(err error) bool {
	var typeErr *json.UnmarshalTypeError
	return errors.As(err, &typeErr) && (typeErr.Field == "result" || strings.HasPrefix(typeErr.Field, "result."))
}

// chatID is the chat to send to for id: the supergroup a group was upgraded to, or id itself.
func (a *api) chatID(id string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	// An upgraded group cannot be upgraded again, but follow a chain all the same.
	for range len(a.migrated) {
		to, ok := a.migrated[id]
		if !ok {
			break
		}
		id = to
	}
	return id
}

// migrate records that the group from was upgraded to the supergroup to.
func (a *api) migrate(from, to string) {
	if from == to {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.migrated == nil {
		a.migrated = map[string]string{}
	}
	a.migrated[from] = to
}

// apiError is a failure answer of the Bot API: the method, its error code and description.
type apiError struct {
	method string
	code   int
	desc   string
}

func (e *apiError) Error() string { return fmt.Sprintf("telegram %s: %d %s", e.method, e.code, e.desc) }

// errEntities is Telegram refusing the formatting of a text; the text is then sent plain.
var errEntities = errors.New("telegram rejected the formatting")

// classify maps a failed call onto the adapters error kinds. The returned error never contains
// the token (transport errors carry the request URL, token included).
func (a *api) classify(ctx context.Context, method string, err error) error {
	var terr *tgbotapi.Error
	var rerr *resultError
	switch {
	case errors.As(err, &rerr):
		// The call was answered with success: repeating it would repeat what it did.
		return fmt.Errorf("telegram %s: %s", method, a.redact(err.Error()))
	case !errors.As(err, &terr):
		msg := a.redact(err.Error())
		if ctx.Err() != nil {
			return fmt.Errorf("telegram %s: %s: %w", method, msg, ctx.Err())
		}
		// Transport failures and undecodable answers (a proxy's HTML error page) may pass later.
		return fmt.Errorf("telegram %s: %s: %w", method, msg, adapters.ErrTemporary)
	}
	code := terr.Code
	desc := a.redact(terr.Message)
	lower := strings.ToLower(desc)
	var base error = &apiError{method: method, code: code, desc: desc}
	switch {
	case code == http.StatusTooManyRequests || strings.HasPrefix(lower, "too many requests"):
		wait := terr.RetryAfter
		if wait <= 0 {
			wait = 1
		}
		return &adapters.RateLimitError{RetryAfter: time.Duration(wait) * a.retryAfterUnit, Err: base}
	case strings.Contains(lower, "message is not modified"):
		return fmt.Errorf("%w: %w", base, adapters.ErrNotModified)
	case strings.Contains(lower, "message to edit not found"), strings.Contains(lower, "message can't be edited"),
		strings.Contains(lower, "message_id_invalid"):
		return fmt.Errorf("%w: %w", base, adapters.ErrMessageGone)
	case strings.Contains(lower, "message is too long"), strings.Contains(lower, "text is too long"):
		return fmt.Errorf("%w: %w", base, adapters.ErrTooLong)
	case strings.Contains(lower, "can't parse entities"), strings.Contains(lower, "can't find end of"):
		return fmt.Errorf("%w: %w", base, errEntities)
	case code >= 500:
		return fmt.Errorf("%w: %w", base, adapters.ErrTemporary)
	}
	return base
}
