// Package telegram connects the bot to Telegram through the Bot API (go-telegram-bot-api v5):
// it receives messages by long polling or a webhook, turns them into adapters.Inbound values,
// and streams replies through the shared delivery engine with Telegram's limits.
package telegram

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	"relaybot/internal/logredact"
)

// Limits returns Telegram's limits: 4096 UTF-16 units per message; about one message a second
// per chat (a short burst allowed), 20 a minute per group, 30 a second in all; edits count.
func Limits() adapters.Limits {
	return adapters.Limits{
		MaxLen:   4096,
		Unit:     adapters.UTF16,
		PerChat:  adapters.Rate{N: 3, Per: 3 * time.Second},
		PerGroup: adapters.Rate{N: 20, Per: time.Minute},
		Global:   adapters.Rate{N: 30, Per: time.Second},
	}
}

// Options configure an Adapter.
type Options struct {
	Token string
	// APIEndpoint is the Bot API URL format, "https://api.telegram.org/bot%s/%s" by default;
	// the file download URL is derived from it ("/bot%s/%s" → "/file/bot%s/%s").
	APIEndpoint string
	Mode        string // "polling" (default) or "webhook"
	// Webhook mode: the address to listen on, the public URL Telegram posts to, and the secret
	// Telegram sends in X-Telegram-Bot-Api-Secret-Token (requests without it are refused).
	WebhookListen, WebhookURL, WebhookSecret string
	// AllowedChats and AllowedUsers restrict who is answered (chat ids; user ids or usernames);
	// empty means everyone.
	AllowedChats, AllowedUsers []string
	// TriggerPrefix addresses the bot in a group when a message starts with it (it is removed).
	TriggerPrefix string
	// Stream makes replies stream by edits (Responder.SupportsStreaming).
	Stream bool
	// MaxImageBytes caps a downloaded photo; 0 means 10 MiB, negative turns photos off.
	MaxImageBytes int
	// OffsetFile keeps, across restarts, the polling offset and every update handed to the
	// Handler that it has not finished with (see journal.go): after a crash the next run hands
	// those over again, marked Redelivered, so nothing is missed, and none it finished is
	// handed over twice. The webhook mode keeps its unfinished updates there too. Empty keeps
	// the offset only on the server: a crash loses the messages whose turns were running.
	OffsetFile string
	// PollTimeout is the long-polling wait; default 30s.
	PollTimeout time.Duration
	// RetryAfterUnit is what one unit of retry_after lasts; 1s (tests shorten it together with
	// their server).
	RetryAfterUnit time.Duration
	Logger         *slog.Logger
	// Delivery tunes the delivery engine (Observer for metrics, retries, typing interval).
	Delivery delivery.Options
	// HTTPClient is used for every request; default a client without a global timeout (each
	// request has its own deadline).
	HTTPClient *http.Client
}

// Adapter is one Telegram bot connection.
type Adapter struct {
	opts   Options
	api    *api
	engine *delivery.Engine
	log    *slog.Logger
	self   tgbotapi.User

	allowedChats map[string]bool
	allowedUsers map[string]bool

	journal *journal // nil without OffsetFile

	mu     sync.Mutex
	offset int64
}

// New checks the options, asks Telegram who the bot is (getMe), and returns the adapter.
func New(opts Options) (*Adapter, error) {
	if opts.Token == "" {
		return nil, errors.New("telegram: token is empty")
	}
	if opts.APIEndpoint == "" {
		opts.APIEndpoint = tgbotapi.APIEndpoint
	}
	if strings.Count(opts.APIEndpoint, "%s") != 2 {
		return nil, fmt.Errorf("telegram: api_endpoint %q must contain two %%s (token, method)", opts.APIEndpoint)
	}
	switch opts.Mode {
	case "":
		opts.Mode = "polling"
	case "polling":
	case "webhook":
		if opts.WebhookListen == "" || opts.WebhookURL == "" {
			return nil, errors.New("telegram: webhook mode needs webhook_listen and webhook_url")
		}
		if opts.WebhookSecret == "" {
			return nil, errors.New("telegram: webhook mode needs webhook_secret")
		}
	default:
		return nil, fmt.Errorf("telegram: mode %q is neither \"polling\" nor \"webhook\"", opts.Mode)
	}
	if opts.MaxImageBytes == 0 {
		opts.MaxImageBytes = 10 << 20
	}
	if opts.PollTimeout <= 0 {
		opts.PollTimeout = 30 * time.Second
	}
	if opts.RetryAfterUnit <= 0 {
		opts.RetryAfterUnit = time.Second
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	log := slog.New(logredact.NewHandler(opts.Logger.Handler(), func(s string) string { return redactToken(opts.Token, s) }))

	a := &api{base: opts.HTTPClient, token: opts.Token, retryAfterUnit: opts.RetryAfterUnit, log: log}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bot, err := tgbotapi.NewBotAPIWithClient(opts.Token, opts.APIEndpoint, ctxClient{ctx: ctx, base: opts.HTTPClient})
	if err != nil {
		return nil, a.classify(ctx, "getMe", nil, err)
	}
	a.bot = bot

	ad := &Adapter{
		opts:         opts,
		api:          a,
		log:          log,
		self:         bot.Self,
		allowedChats: set(opts.AllowedChats, false),
		allowedUsers: set(opts.AllowedUsers, true),
	}
	dopts := opts.Delivery
	dopts.Logger = log
	dopts.IsGroup = func(c adapters.ChatRef) bool { return strings.HasPrefix(c.ChatID, "-") }
	ad.engine = delivery.New(&messenger{api: a}, Limits(), dopts)
	if opts.OffsetFile != "" {
		j, dropped, err := loadJournal(opts.OffsetFile, bot.Self.ID)
		if err != nil {
			return nil, fmt.Errorf("telegram: %w", err)
		}
		if j.foreignBot != 0 {
			log.Warn("telegram: offset file was written for another bot; starting over", "file", opts.OffsetFile,
				"file_bot", j.foreignBot, "unfinished_updates_dropped", dropped)
		}
		ad.journal = j
		ad.offset = j.offset
	}
	return ad, nil
}

func set(items []string, users bool) map[string]bool {
	if len(items) == 0 {
		return nil
	}
	m := map[string]bool{}
	for _, it := range items {
		it = strings.TrimSpace(it)
		it = strings.TrimPrefix(it, "telegram:")
		if users {
			it = strings.ToLower(strings.TrimPrefix(it, "@"))
		}
		m[it] = true
	}
	return m
}

// Engine is the adapter's delivery engine (for metrics and direct notices).
func (a *Adapter) Engine() *delivery.Engine { return a.engine }

// BotUsername is the bot's username from getMe.
func (a *Adapter) BotUsername() string { return a.self.UserName }

// Run receives updates until ctx ends, handing every addressed message to h on its own
// goroutine. It returns after the handlers it started have returned and the delivery engine
// has closed; an error only when receiving cannot start (a webhook that cannot listen or
// register). Run may be called once.
func (a *Adapter) Run(ctx context.Context, h adapters.Handler) error {
	var wg sync.WaitGroup
	defer a.engine.Close()
	if a.journal != nil {
		if err := a.journal.open(); err != nil {
			return fmt.Errorf("telegram: %w", err)
		}
		defer func() { // after every handler has finished
			if err := a.journal.close(); err != nil {
				a.log.Error("telegram: offset file not saved", "file", a.opts.OffsetFile, "err", err)
			}
		}()
	}
	defer wg.Wait()
	dispatch := func(id int64, m *message, redelivered bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer a.finished(id)
			in, ok := a.inbound(ctx, m)
			if !ok {
				return
			}
			in.Redelivered = redelivered
			h.Handle(ctx, in, a.engine.Responder(in.Chat, adapters.SendOptions{ReplyTo: in.MessageID}, a.opts.Stream))
		}()
	}
	if a.journal != nil {
		// Updates a crashed run took but did not finish go first, oldest first.
		ids, raws := a.journal.unfinished()
		for _, id := range ids {
			var u update
			if err := json.Unmarshal(raws[id], &u); err != nil || u.Message == nil {
				a.log.Warn("telegram: undecodable update in the offset file skipped", "update", id, "err", err)
				a.finished(id)
				continue
			}
			a.log.Info("telegram: handing over again an update a previous run did not finish", "update", id)
			dispatch(id, u.Message, true)
		}
	}
	if a.opts.Mode == "webhook" {
		return a.runWebhook(ctx, dispatch)
	}
	return a.runPolling(ctx, dispatch)
}

// finished records that the handler is done with update id.
func (a *Adapter) finished(id int64) {
	if a.journal == nil {
		return
	}
	if err := a.journal.done(id); err != nil {
		a.log.Warn("telegram: offset file not updated; a restart may hand this update over again", "update", id, "err", err)
	}
}

// take records updates about to be handed over, and the offset after them, in the offset file.
func (a *Adapter) take(ids []int64, raws []json.RawMessage, offset int64) {
	if a.journal == nil || len(ids) == 0 && offset == 0 {
		return
	}
	if err := a.journal.take(ids, raws, offset); err != nil {
		a.log.Error("telegram: offset file not written; a crash before these turns end would lose them", "file", a.opts.OffsetFile, "updates", len(ids), "err", err)
	}
}

// dispatcher hands one update's message to the handler on its own goroutine.
type dispatcher func(id int64, m *message, redelivered bool)

type update struct {
	UpdateID int64    `json:"update_id"`
	Message  *message `json:"message"`
}

type message struct {
	MessageID       int             `json:"message_id"`
	MessageThreadID int             `json:"message_thread_id"`
	IsTopicMessage  bool            `json:"is_topic_message"`
	From            *tgbotapi.User  `json:"from"`
	Chat            tgChat          `json:"chat"`
	Date            int64           `json:"date"`
	Text            string          `json:"text"`
	Caption         string          `json:"caption"`
	Photo           []photoSize     `json:"photo"`
	ReplyTo         *message        `json:"reply_to_message"`
	Entities        json.RawMessage `json:"entities"`
}

type tgChat struct {
	ID      int64  `json:"id"`
	Type    string `json:"type"`
	IsForum bool   `json:"is_forum"`
}

type photoSize struct {
	FileID   string `json:"file_id"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
	FileSize int    `json:"file_size"`
}

func (a *Adapter) runPolling(ctx context.Context, dispatch dispatcher) error {
	// A webhook left over from webhook mode would make getUpdates fail.
	if _, err := a.api.call(ctx, "deleteWebhook", tgbotapi.Params{}); err != nil && ctx.Err() == nil {
		a.log.Warn("telegram: deleteWebhook failed", "err", err)
	}
	failures := 0
	for {
		a.mu.Lock()
		offset := a.offset
		a.mu.Unlock()
		p := tgbotapi.Params{
			"timeout":         strconv.Itoa(int(a.opts.PollTimeout / time.Second)),
			"allowed_updates": `["message"]`,
		}
		if offset > 0 {
			p["offset"] = strconv.FormatInt(offset, 10)
		}
		cctx, cancel := context.WithTimeout(ctx, a.opts.PollTimeout+15*time.Second)
		res, err := a.api.call(cctx, "getUpdates", p)
		cancel()
		if ctx.Err() != nil {
			a.confirm()
			return nil
		}
		if err != nil {
			failures++
			wait := min(time.Duration(failures)*time.Second, 30*time.Second)
			var rl *adapters.RateLimitError
			if errors.As(err, &rl) {
				wait = rl.RetryAfter
			}
			a.log.Warn("telegram: getUpdates failed", "err", err, "retry_in", wait)
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				a.confirm()
				return nil
			}
			continue
		}
		failures = 0
		var ups []json.RawMessage
		if err := json.Unmarshal(res, &ups); err != nil {
			a.log.Warn("telegram: undecodable getUpdates answer", "err", err)
			continue
		}
		var (
			ids  []int64
			raws []json.RawMessage
			msgs []*message
		)
		next := offset
		for _, raw := range ups {
			var u update
			if err := json.Unmarshal(raw, &u); err != nil {
				var id struct {
					UpdateID int64 `json:"update_id"`
				}
				if json.Unmarshal(raw, &id) == nil && id.UpdateID >= next {
					next = id.UpdateID + 1
				}
				a.log.Warn("telegram: undecodable update skipped", "err", err)
				continue
			}
			if u.UpdateID < next {
				continue // already taken
			}
			next = u.UpdateID + 1
			if u.Message == nil {
				continue
			}
			ids, raws, msgs = append(ids, u.UpdateID), append(raws, raw), append(msgs, u.Message)
		}
		// On disk before the next getUpdates confirms them to the server.
		if next != offset {
			a.take(ids, raws, next)
		}
		a.setOffset(next)
		for i, id := range ids {
			dispatch(id, msgs[i], false)
		}
	}
}

// setOffset records that every update below offset was taken.
func (a *Adapter) setOffset(offset int64) {
	a.mu.Lock()
	a.offset = offset
	a.mu.Unlock()
}

// confirm tells the server that every update taken so far is done, so a restart does not get
// them again even without an offset file.
func (a *Adapter) confirm() {
	a.mu.Lock()
	offset := a.offset
	a.mu.Unlock()
	if offset == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p := tgbotapi.Params{"offset": strconv.FormatInt(offset, 10), "timeout": "0", "limit": "1"}
	if _, err := a.api.call(ctx, "getUpdates", p); err != nil {
		a.log.Warn("telegram: confirming taken updates failed", "err", err)
	}
}

func (a *Adapter) runWebhook(ctx context.Context, dispatch dispatcher) error {
	hookURL, err := url.Parse(a.opts.WebhookURL)
	if err != nil {
		return fmt.Errorf("telegram: webhook_url %q: %w", a.opts.WebhookURL, err)
	}
	ln, err := net.Listen("tcp", a.opts.WebhookListen)
	if err != nil {
		return fmt.Errorf("telegram: webhook listen on %s: %w", a.opts.WebhookListen, err)
	}
	p := tgbotapi.Params{"url": a.opts.WebhookURL, "secret_token": a.opts.WebhookSecret, "allowed_updates": `["message"]`}
	if _, err := a.api.call(ctx, "setWebhook", p); err != nil {
		ln.Close()
		return fmt.Errorf("telegram: setWebhook: %w", err)
	}
	// Telegram posts updates over several connections at once (max_connections), and retries an
	// update the bot did not answer while newer ones go ahead: ids arrive out of order, so an
	// update is a repeat only when its own id was taken before, not when a higher one was.
	var mu sync.Mutex
	seen := newRecentIDs(webhookSeenIDs)
	path := hookURL.Path
	if path == "" {
		path = "/"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("X-Telegram-Bot-Api-Secret-Token")
		if subtle.ConstantTimeCompare([]byte(got), []byte(a.opts.WebhookSecret)) != 1 {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		var u update
		if err := json.Unmarshal(raw, &u); err != nil {
			a.log.Warn("telegram: undecodable update refused", "err", err)
			http.Error(w, "bad update", http.StatusBadRequest)
			return
		}
		mu.Lock()
		dup := !seen.add(u.UpdateID)
		mu.Unlock()
		if !dup && u.Message != nil { // Telegram re-sends an update it got no answer to: take it once
			// On disk before Telegram hears it arrived.
			a.take([]int64{u.UpdateID}, []json.RawMessage{raw}, 0)
			dispatch(u.UpdateID, u.Message, false)
		}
		w.WriteHeader(http.StatusOK)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-errc
		return nil
	case err := <-errc:
		return fmt.Errorf("telegram: webhook server: %w", err)
	}
}

// webhookSeenIDs is how many recent update ids the webhook remembers to take each update once.
const webhookSeenIDs = 4096

// recentIDs remembers the last n distinct ids it was given.
type recentIDs struct {
	set  map[int64]struct{}
	ring []int64
	next int
}

func newRecentIDs(n int) *recentIDs {
	return &recentIDs{set: make(map[int64]struct{}, n), ring: make([]int64, 0, n)}
}

// add records id and reports whether it is new.
func (r *recentIDs) add(id int64) bool {
	if _, ok := r.set[id]; ok {
		return false
	}
	if len(r.ring) < cap(r.ring) {
		r.ring = append(r.ring, id)
	} else {
		delete(r.set, r.ring[r.next])
		r.ring[r.next] = id
		r.next = (r.next + 1) % len(r.ring)
	}
	r.set[id] = struct{}{}
	return true
}

var commandRE = regexp.MustCompile(`^/([A-Za-z0-9_]{1,32})(?:@([A-Za-z0-9_]+))?`)

// parseCommand reads a bot command at the start of text: "/name" or "/name@bot", ended by the
// end of the text or white space (a newline too: "/audit\nfetch_url"), or, after "@bot", by
// anything but a username character ("/reset@bot, please"). A "/name" followed by another
// character ("/etc/hosts") is text, not a command. bot is the username the command names, ""
// when it names none. ("/reset@a@b" is a command for bot a, as a Telegram client marks it.)
func parseCommand(text string) (name, bot, args string, ok bool) {
	c := commandRE.FindStringSubmatch(text)
	if c == nil {
		return "", "", "", false
	}
	rest := text[len(c[0]):]
	if rest != "" {
		r, _ := utf8.DecodeRuneInString(rest)
		if c[2] == "" && !unicode.IsSpace(r) {
			return "", "", "", false
		}
	}
	return strings.ToLower(c[1]), c[2], strings.TrimSpace(rest), true
}

// inbound turns a Telegram message into an Inbound, or false when it is not for the bot.
func (a *Adapter) inbound(ctx context.Context, m *message) (adapters.Inbound, bool) {
	if m.From == nil || m.From.ID == a.self.ID {
		return adapters.Inbound{}, false
	}
	chatID := strconv.FormatInt(m.Chat.ID, 10)
	if a.allowedChats != nil && !a.allowedChats[chatID] {
		a.log.Debug("telegram: chat not allowed", "chat", chatID)
		return adapters.Inbound{}, false
	}
	if a.allowedUsers != nil && !a.allowedUsers[strconv.FormatInt(m.From.ID, 10)] && !a.allowedUsers[strings.ToLower(m.From.UserName)] {
		a.log.Debug("telegram: user not allowed", "user", m.From.ID)
		return adapters.Inbound{}, false
	}
	in := adapters.Inbound{
		Chat:      adapters.ChatRef{Platform: adapters.Telegram, ChatID: chatID},
		Kind:      adapters.Private,
		MessageID: strconv.Itoa(m.MessageID),
		UserID:    strconv.FormatInt(m.From.ID, 10),
		UserName:  m.From.UserName,
		Time:      time.Unix(m.Date, 0).UTC(),
	}
	if in.UserName == "" {
		in.UserName = strings.TrimSpace(m.From.FirstName + " " + m.From.LastName)
	}
	if m.Chat.Type != "private" {
		in.Kind = adapters.Group
	}
	// Only a topic message belongs to a topic: a reply in a forum's General topic carries the
	// reply chain's message_thread_id too, and sending to that thread fails.
	if m.MessageThreadID != 0 && m.IsTopicMessage {
		in.Chat.ThreadID = strconv.Itoa(m.MessageThreadID)
	}
	text := m.Text
	if text == "" {
		text = m.Caption
	}
	text = strings.TrimSpace(text)
	addressed := in.Kind == adapters.Private
	mention := "@" + strings.ToLower(a.self.UserName)

	// command takes a command at the start of text; false when it names another bot, whose
	// command this bot must neither run nor answer (several bots share a group).
	command := func(text string) bool {
		name, bot, args, ok := parseCommand(text)
		if !ok {
			return true
		}
		if bot != "" && !strings.EqualFold(bot, a.self.UserName) {
			return false
		}
		in.Command, in.Args = name, args
		addressed = true
		return true
	}
	if !command(text) {
		return adapters.Inbound{}, false
	}
	if !addressed && a.opts.TriggerPrefix != "" && strings.HasPrefix(text, a.opts.TriggerPrefix) {
		text = strings.TrimSpace(strings.TrimPrefix(text, a.opts.TriggerPrefix))
		addressed = true
	}
	if i := indexFold(text, mention); i >= 0 && a.self.UserName != "" {
		end := i + len(mention)
		if end == len(text) || !isNameByte(text[end]) {
			text = strings.TrimSpace(text[:i] + text[end:])
			addressed = true
		}
	}
	// In a forum, every topic message "replies" to the topic's first message: not a reply to us.
	if r := m.ReplyTo; r != nil && r.From != nil && r.From.ID == a.self.ID &&
		!(m.IsTopicMessage && r.MessageID == m.MessageThreadID) {
		addressed = true
	}
	if !addressed {
		return adapters.Inbound{}, false
	}
	// A command after the trigger prefix or our mention ("@bot /audit\nfetch_url").
	if in.Command == "" && !command(text) {
		return adapters.Inbound{}, false
	}
	in.Addressed = true
	if in.Command == "" {
		in.Text = text
	}
	if len(m.Photo) > 0 && a.opts.MaxImageBytes > 0 {
		img, err := a.photo(ctx, m.Photo)
		if err != nil {
			a.log.Warn("telegram: photo not downloaded", "chat", chatID, "err", err)
		} else {
			in.Images = append(in.Images, img)
		}
	}
	if in.Command == "" && in.Text == "" && len(in.Images) == 0 {
		return adapters.Inbound{}, false
	}
	return in, true
}

// indexFold returns the byte offset in s of the first match of the ASCII string sub, ignoring
// ASCII case, or -1. Unlike searching strings.ToLower(s), offsets stay those of s: lower-casing
// changes the UTF-8 length of some letters ("İ", the Kelvin sign).
func indexFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if asciiEqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

func asciiEqualFold(a, b string) bool {
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func isNameByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// photo downloads the largest size of a photo that fits MaxImageBytes.
func (a *Adapter) photo(ctx context.Context, sizes []photoSize) (adapters.Image, error) {
	best := -1
	for i, s := range sizes {
		if s.FileSize > a.opts.MaxImageBytes {
			continue
		}
		if best < 0 || s.Width*s.Height > sizes[best].Width*sizes[best].Height {
			best = i
		}
	}
	if best < 0 {
		return adapters.Image{}, fmt.Errorf("every size is over the %d-byte cap", a.opts.MaxImageBytes)
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	res, err := a.api.call(cctx, "getFile", tgbotapi.Params{"file_id": sizes[best].FileID})
	if err != nil {
		return adapters.Image{}, err
	}
	var f tgbotapi.File
	if err := json.Unmarshal(res, &f); err != nil || f.FilePath == "" {
		return adapters.Image{}, fmt.Errorf("getFile answer without a file path: %s", res)
	}
	fileURL := fmt.Sprintf(fileEndpoint(a.opts.APIEndpoint), a.opts.Token, f.FilePath)
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, fileURL, nil)
	if err != nil {
		return adapters.Image{}, errors.New(a.api.redact(err.Error()))
	}
	resp, err := a.opts.HTTPClient.Do(req)
	if err != nil {
		return adapters.Image{}, fmt.Errorf("download: %s", a.api.redact(err.Error()))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return adapters.Image{}, fmt.Errorf("download: %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(a.opts.MaxImageBytes)+1))
	if err != nil {
		return adapters.Image{}, fmt.Errorf("download: %s", a.api.redact(err.Error()))
	}
	if len(data) > a.opts.MaxImageBytes {
		return adapters.Image{}, fmt.Errorf("photo is over the %d-byte cap", a.opts.MaxImageBytes)
	}
	mimeType := http.DetectContentType(data)
	if !strings.HasPrefix(mimeType, "image/") {
		mimeType = "image/jpeg" // Telegram stores photos as JPEG
	}
	return adapters.Image{MIME: mimeType, Data: data}, nil
}

// fileEndpoint derives the file download URL format from the API endpoint format.
func fileEndpoint(apiEndpoint string) string {
	if i := strings.LastIndex(apiEndpoint, "/bot%s/%s"); i >= 0 {
		return apiEndpoint[:i] + "/file/bot%s/%s"
	}
	return tgbotapi.FileEndpoint
}

// redactToken removes the bot token, raw and URL-escaped, from s.
func redactToken(token, s string) string {
	if token == "" {
		return s
	}
	s = strings.ReplaceAll(s, token, "<redacted>")
	return strings.ReplaceAll(s, url.PathEscape(token), "<redacted>")
}
