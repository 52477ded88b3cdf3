// Package web is the local web chat: a page at /chat where a browser talks to the bot, with the
// reply streaming in over server-sent events through the same delivery engine as Telegram and
// Discord. It is how a newcomer tries the bot with only a model endpoint.
//
// The handler does no login of its own: mount it behind the admin server's login. Each browser
// gets its own conversation, selected by an HttpOnly, SameSite=Strict cookie; its public chat id
// (random, not the cookie secret) is the ChatRef.ChatID the pipeline and the audit log see.
//
// A conversation is started only by a same-origin POST to /chat/session, which the page's own
// script sends when it finds no cookie: a GET, which any web page can make with an <img> tag,
// never starts one. A conversation whose page is open (its event stream is connected) is never
// dropped to make room for a new one.
package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
)

//go:embed assets
var assets embed.FS

var (
	pageTemplate  = template.Must(template.ParseFS(assets, "assets/chat.html"))
	startTemplate = template.Must(template.ParseFS(assets, "assets/start.html"))
)

const (
	chatCookie = "relaybot_chat"
	// maxInput is the longest message a browser may post, in bytes.
	maxInput = 16 << 10
)

// Options configure New.
type Options struct {
	// Handler receives every message a browser sends; SetHandler may set it later.
	Handler adapters.Handler
	// Delivery tunes the delivery engine that streams replies into the page (its Observer
	// feeds metrics).
	Delivery delivery.Options
	// UserName is the name the pipeline sees for the browser's user; empty means "web".
	UserName string
	// SecureCookies reports whether the browser reached the chat over HTTPS, so its cookie must
	// be Secure (the admin listener's admin.Proxies.Secure: TLS here, an https public URL, or a
	// trusted proxy's X-Forwarded-Proto); nil means only when this server terminates TLS.
	SecureCookies func(*http.Request) bool
	// Logger receives failures that have nowhere else to go; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Chat is the web chat. Its Handler serves the page, the event stream and the message posts.
type Chat struct {
	opts    Options
	log     *slog.Logger
	now     func() time.Time
	engine  *delivery.Engine
	handler struct {
		sync.RWMutex
		h adapters.Handler
	}

	mu      sync.Mutex
	secrets map[string]*conversation // by cookie value
	ids     map[string]*conversation // by public chat id
	closed  bool                     // Close has begun: no turn starts any more

	ctx    context.Context // ends every turn on Close
	cancel context.CancelFunc
	turns  sync.WaitGroup
	mux    http.Handler
}

// New builds the web chat.
func New(opts Options) (*Chat, error) {
	if opts.UserName == "" {
		opts.UserName = "web"
	}
	c := &Chat{
		opts:    opts,
		log:     opts.Logger,
		now:     opts.Now,
		secrets: map[string]*conversation{},
		ids:     map[string]*conversation{},
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.opts.SecureCookies == nil {
		c.opts.SecureCookies = func(r *http.Request) bool { return r.TLS != nil }
	}
	c.handler.h = opts.Handler
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if opts.Delivery.Logger == nil {
		opts.Delivery.Logger = c.log
	}
	c.engine = delivery.New(messenger{chat: c}, Limits, opts.Delivery)

	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, fmt.Errorf("web chat: assets: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /chat", c.page)
	mux.HandleFunc("GET /chat/{$}", c.page)
	mux.HandleFunc("POST /chat/session", c.session)
	mux.HandleFunc("GET /chat/events", c.events)
	mux.HandleFunc("POST /chat/send", c.send)
	mux.HandleFunc("GET /chat/files/{msg}/{n}", c.file)
	mux.Handle("GET /chat/static/", http.StripPrefix("/chat/static/", staticFiles(static)))
	c.mux = http.NewCrossOriginProtection().Handler(mux)
	return c, nil
}

// Handler serves /chat (the page), /chat/session (starts a conversation), /chat/events (the
// event stream), /chat/send (posts) and /chat/static/ and /chat/files/. Mount it at "/chat" and "/chat/" behind the login.
func (c *Chat) Handler() http.Handler { return c.mux }

// SetHandler sets the Handler that receives the browsers' messages (the pipeline).
func (c *Chat) SetHandler(h adapters.Handler) {
	c.handler.Lock()
	c.handler.h = h
	c.handler.Unlock()
}

// Messenger returns the web chat's adapters.Messenger, for callers that deliver to web chats
// themselves.
func (c *Chat) Messenger() adapters.Messenger { return messenger{chat: c} }

// Close cancels the turns in flight, waits for them to return and stops the delivery engine.
func (c *Chat) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.turns.Wait()
	c.engine.Close()
	return nil
}

func staticFiles(fsys fs.FS) http.Handler {
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") || strings.HasSuffix(r.URL.Path, ".html") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

func randomString(n int) string {
	b := make([]byte, n)
	rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// byID returns the conversation with the public chat id.
func (c *Chat) byID(id string) *conversation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids[id]
}

// conversationOf returns the browser's conversation, or nil when it has none.
func (c *Chat) conversationOf(r *http.Request) *conversation {
	ck, err := r.Cookie(chatCookie)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	conv := c.secrets[ck.Value]
	if conv != nil {
		conv.used = c.now()
	}
	return conv
}

// errChatsFull is newConversation's answer when every conversation has its page open.
var errChatsFull = errors.New("every web chat slot has an open page")

// newConversation starts a conversation and sets the browser's cookie. At the cap it drops the
// least recently used conversation whose page is closed; it never drops one with an open page.
func (c *Chat) newConversation(w http.ResponseWriter, r *http.Request) (*conversation, error) {
	idBytes := make([]byte, 8)
	rand.Read(idBytes)
	conv := &conversation{
		id:       hex.EncodeToString(idBytes),
		secret:   randomString(32),
		csrf:     randomString(32),
		used:     c.now(),
		watchers: map[chan struct{}]struct{}{},
	}
	c.mu.Lock()
	if len(c.secrets) >= maxConversations {
		var oldest *conversation
		for _, cv := range c.secrets {
			cv.mu.Lock()
			open := len(cv.watchers) > 0
			cv.mu.Unlock()
			if !open && (oldest == nil || cv.used.Before(oldest.used)) {
				oldest = cv
			}
		}
		if oldest == nil {
			c.mu.Unlock()
			return nil, errChatsFull
		}
		delete(c.secrets, oldest.secret)
		delete(c.ids, oldest.id)
	}
	c.secrets[conv.secret] = conv
	c.ids[conv.id] = conv
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{
		Name:     chatCookie,
		Value:    conv.secret,
		Path:     "/chat",
		HttpOnly: true,
		Secure:   c.opts.SecureCookies(r),
		SameSite: http.SameSiteStrictMode,
	})
	return conv, nil
}

// session starts a conversation for a browser that has none (the page's script posts here when
// it finds no cookie). Being a POST, it goes through the cross-origin check: another site's page
// cannot start conversations, and so cannot push real ones out.
func (c *Chat) session(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if c.conversationOf(r) != nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if _, err := c.newConversation(w, r); err != nil {
		http.Error(w, fmt.Sprintf("cannot start a chat: %d chats are open; close one and reload", maxConversations), http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func setPageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

// page serves the chat page. A browser without a conversation gets a small page whose script
// starts one with a same-origin POST and reloads; the GET itself changes nothing.
func (c *Chat) page(w http.ResponseWriter, r *http.Request) {
	setPageHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	conv := c.conversationOf(r)
	if conv == nil {
		if err := startTemplate.Execute(w, nil); err != nil {
			c.log.Warn("web chat: render start page", "err", err)
		}
		return
	}
	data := struct{ CSRF, ChatID string }{conv.csrf, conv.id}
	if err := pageTemplate.Execute(w, data); err != nil {
		c.log.Warn("web chat: render page", "err", err)
	}
}

// eventMessage is a message as the browser receives it.
type eventMessage struct {
	ID    string      `json:"id"`
	Role  string      `json:"role"`
	Text  string      `json:"text"`
	HTML  string      `json:"html,omitempty"` // sanitised rendering of a bot message's Markdown
	Files []eventFile `json:"files,omitempty"`
	// Stop: the reply still streams; the page shows a Stop button that posts /stop.
	Stop bool `json:"stop,omitempty"`
}

type eventFile struct {
	Name  string `json:"name"`
	URL   string `json:"url"`
	Image bool   `json:"image"`
}

// events streams the conversation: every message (again) on connect, then each change as it
// happens. Changes that pile up while the browser is slow coalesce: each event carries the
// whole text of a message, so nothing is lost.
func (c *Chat) events(w http.ResponseWriter, r *http.Request) {
	conv := c.conversationOf(r)
	if conv == nil {
		http.Error(w, "no chat session: open /chat first", http.StatusUnauthorized)
		return
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	wake := make(chan struct{}, 1)
	conv.mu.Lock()
	conv.watchers[wake] = struct{}{}
	conv.mu.Unlock()
	defer func() {
		conv.mu.Lock()
		delete(conv.watchers, wake)
		conv.mu.Unlock()
	}()

	var seen uint64
	typingTimer := time.NewTimer(time.Hour)
	defer typingTimer.Stop()
	keepAlive := time.NewTicker(25 * time.Second)
	defer keepAlive.Stop()
	for {
		conv.mu.Lock()
		var out []eventMessage
		for _, m := range conv.msgs {
			if m.rev > seen {
				out = append(out, toEvent(m))
			}
		}
		typingChanged := conv.typingRv > seen
		typingUntil := conv.typing
		seen = conv.rev
		conv.mu.Unlock()

		for _, m := range out {
			if err := writeEvent(w, "msg", m); err != nil {
				return
			}
		}
		if typingChanged {
			left := typingUntil.Sub(c.now())
			if left > 0 {
				if err := writeEvent(w, "typing", map[string]int64{"ms": left.Milliseconds()}); err != nil {
					return
				}
				typingTimer.Reset(left)
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-c.ctx.Done():
			return
		case <-wake:
		case <-typingTimer.C:
			if err := writeEvent(w, "typing", map[string]int64{"ms": 0}); err != nil {
				return
			}
		case <-keepAlive.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		}
	}
}

func toEvent(m *message) eventMessage {
	e := eventMessage{ID: m.ID, Role: m.Role, Text: m.Text, HTML: m.HTML, Stop: m.Stop}
	for i, f := range m.Files {
		e.Files = append(e.Files, eventFile{
			Name:  f.Name,
			URL:   "/chat/files/" + m.ID + "/" + strconv.Itoa(i),
			Image: f.IsImage(),
		})
	}
	return e
}

func writeEvent(w http.ResponseWriter, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", name, err)
	}
	_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
	return err
}

// send takes a message from the browser and hands it to the Handler on its own goroutine.
func (c *Chat) send(w http.ResponseWriter, r *http.Request) {
	conv := c.conversationOf(r)
	if conv == nil {
		http.Error(w, "no chat session: reload /chat", http.StatusUnauthorized)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxInput+4096)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	token := r.Header.Get("X-CSRF-Token")
	if token == "" {
		token = r.PostForm.Get("csrf")
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(conv.csrf)) != 1 {
		http.Error(w, "missing or wrong CSRF token: reload /chat", http.StatusForbidden)
		return
	}
	text := strings.TrimSpace(r.PostForm.Get("text"))
	switch {
	case text == "":
		http.Error(w, "empty message", http.StatusBadRequest)
		return
	case len(text) > maxInput:
		http.Error(w, fmt.Sprintf("message too long (%d bytes, at most %d)", len(text), maxInput), http.StatusRequestEntityTooLarge)
		return
	case !utf8.ValidString(text):
		http.Error(w, "message is not valid UTF-8", http.StatusBadRequest)
		return
	}
	c.handler.RLock()
	h := c.handler.h
	c.handler.RUnlock()
	if h == nil {
		http.Error(w, "the bot is not ready yet: try again in a moment", http.StatusServiceUnavailable)
		return
	}
	// A turn counts for Close from here; once Close has begun, none starts (and none is
	// added to the WaitGroup Close waits on).
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.turns.Add(1)
	}
	c.mu.Unlock()
	if closed {
		http.Error(w, "the bot is shutting down: try again later", http.StatusServiceUnavailable)
		return
	}

	conv.mu.Lock()
	userMsg := conv.addLocked("user", text, nil)
	conv.mu.Unlock()

	in := adapters.Inbound{
		Chat:      adapters.ChatRef{Platform: adapters.Web, ChatID: conv.id},
		Kind:      adapters.Private,
		MessageID: userMsg.ID,
		UserID:    conv.id,
		UserName:  c.opts.UserName,
		Text:      text,
		Time:      c.now(),
	}
	if cmd, ok := adapters.ParseCommand(text); ok {
		if !cmd.For("") {
			// "/reset@otherbot" names a bot, and the web chat's bot has no name: not ours to run.
			c.turns.Done()
			w.WriteHeader(http.StatusAccepted)
			return
		}
		in.Command, in.Args = cmd.Name, cmd.Args
	}
	go func() {
		defer c.turns.Done()
		// The browser shows every edit as it arrives: replies always stream.
		h.Handle(c.ctx, in, c.engine.Responder(in.Chat, adapters.SendOptions{ReplyTo: in.MessageID, Stoppable: true}, true))
	}()
	w.WriteHeader(http.StatusAccepted)
}

// file serves a file the bot sent.
func (c *Chat) file(w http.ResponseWriter, r *http.Request) {
	conv := c.conversationOf(r)
	if conv == nil {
		http.NotFound(w, r)
		return
	}
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	conv.mu.Lock()
	m := conv.find(r.PathValue("msg"))
	var f adapters.File
	found := m != nil && n >= 0 && n < len(m.Files)
	if found {
		f = m.Files[n]
	}
	conv.mu.Unlock()
	if !found {
		http.NotFound(w, r)
		return
	}
	mime := f.MIME
	if mime == "" {
		mime = "application/octet-stream"
	}
	h := w.Header()
	h.Set("Content-Type", mime)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	disposition := "attachment"
	if f.IsImage() && mime != "image/svg+xml" {
		disposition = "inline"
	}
	h.Set("Content-Disposition", disposition+"; filename="+strconv.Quote(f.Name))
	_, _ = w.Write(f.Data)
}
