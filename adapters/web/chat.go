// Package web is the local web chat: a page at /chat where a browser talks to the bot, with the
// reply streaming in over server-sent events through the same delivery engine as Telegram and
// Discord. It is how a newcomer tries the bot with only a model endpoint.
//
// The handler does no login of its own: mount it behind the admin server's login. Each browser
// gets its own conversation, selected by an HttpOnly, SameSite=Strict cookie; its public chat id
// (random, not the cookie secret) is the chat.Ref.ChatID the pipeline and the audit log see.
//
// A conversation is started only by a same-origin POST to /chat/session, which the page's own
// script sends when it finds no cookie: a GET, which any web page can make with an <img> tag,
// never starts one. A conversation whose page is open (its event stream is connected) is never
// dropped to make room for a new one.
//
// With Options.Sessions the chat outlives the process: the session (the cookie's SHA-256, never
// the cookie) maps to the chat id its conversations are stored under, and every message the page
// showed is kept as it was last shown (the user's as they typed it, the bot's as rendered), so
// after a restart the browser finds its chat again with the same transcript, and can read its
// earlier conversations (those /reset or the idle reset closed) at /chat/conversations.
package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
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
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/delivery"
	"relaybot/adapters/markdown"
	"relaybot/chat"
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
	// Sessions keeps the browsers' chats across restarts; nil keeps them in memory only.
	Sessions Sessions
	// Relay shows every open page of a chat what happens in it on other replicas (several
	// replicas on PostgreSQL); nil: all of a chat's pages are in this process.
	Relay Relay
	// Questions, with several replicas, records the questions of this process's turns, so that
	// a press or form submitted through a page on another replica is carried to the turn that
	// asked, and its verdict back; nil answers only the questions asked here.
	Questions adapters.QuestionBook
	// MaxUploadBytes is the largest file a browser may send with a message (media.max_bytes);
	// 0 means DefaultMaxUpload.
	MaxUploadBytes int64
	// Logger receives failures that have nowhere else to go; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Sessions keeps web chat sessions and reads their stored conversations (*store.WebChatQuery). Its
// methods are called from HTTP handlers with the request's context.
type Sessions interface {
	// SaveWebSession records the chat id of a session (by the SHA-256 of its cookie).
	SaveWebSession(ctx context.Context, secretHash, chatID string) error
	// WebSession returns the chat id of a session, and false when it is unknown.
	WebSession(ctx context.Context, secretHash string) (chatID string, ok bool, err error)
	// ChatConversations lists a chat's conversations, newest first.
	ChatConversations(ctx context.Context, ref chat.Ref, limit int) ([]chat.Summary, error)
	// Transcript returns what the user saw of a conversation's newest limit rounds, oldest first,
	// read back from the conversation's messages (for chats with no kept messages).
	Transcript(ctx context.Context, conversationID int64, limit int) ([]chat.Line, error)
	// KeepWebMessages keeps messages of a chat as the page shows them now, each whole, replacing
	// the ones kept before under the same ID.
	KeepWebMessages(ctx context.Context, chatID string, lines []chat.Line) error
	// WebMessages returns the newest limit messages kept of a chat, oldest first.
	WebMessages(ctx context.Context, chatID string, limit int) ([]chat.Line, error)
	// WebConversationMessages returns the messages kept of one conversation of a chat, oldest
	// first; none when none were kept.
	WebConversationMessages(ctx context.Context, chatID string, conversationID int64, limit int) ([]chat.Line, error)
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

	// With a Relay: out publishes the conversations' changes, tag is part of this process's
	// message ids, listening ends with ctx.
	out       *outbox
	tag       string
	listening sync.WaitGroup
	// keep, with Sessions, writes the conversations' changed messages to the store.
	keep *outbox
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
	c.engine = delivery.New(messenger{chat: c}, Limits(), opts.Delivery)
	if opts.Sessions != nil {
		c.keep = newOutbox()
		go c.keepChanges(context.WithoutCancel(c.ctx))
	}
	if opts.Relay != nil {
		c.out = newOutbox()
		c.tag = randomString(4) + "-"
		go c.publishChanges(context.WithoutCancel(c.ctx))
		c.listening.Go(func() {
			if err := opts.Relay.Listen(c.ctx, c.fromRelay); err != nil {
				c.log.Warn("web chat: events of other replicas not received", "err", err)
			}
		})
	}

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
	mux.HandleFunc("POST /chat/stop", c.stopTurn)
	mux.HandleFunc("POST /chat/answer", c.answer)
	mux.HandleFunc("GET /chat/files/{msg}/{n}", c.file)
	mux.HandleFunc("GET /chat/conversations", c.conversations)
	mux.HandleFunc("GET /chat/conversations/{id}", c.transcript)
	mux.Handle("GET /chat/static/", http.StripPrefix("/chat/static/", staticFiles(static)))
	c.mux = http.NewCrossOriginProtection().Handler(mux)
	return c, nil
}

// Handler serves /chat (the page), /chat/session (starts a conversation), /chat/events (the
// event stream), /chat/send (posts), /chat/stop (the Stop button) and /chat/static/ and
// /chat/files/. Mount it at "/chat" and "/chat/" behind the login.
func (c *Chat) Handler() http.Handler { return c.mux }

// SetHandler sets the Handler that receives the browsers' messages (the pipeline).
func (c *Chat) SetHandler(h adapters.Handler) {
	c.handler.Lock()
	c.handler.h = h
	c.handler.Unlock()
}

// Name is "web", the platform's name in logs and conversation keys.
func (c *Chat) Name() string { return "web" }

// Limits returns the web chat's limits (the package's Limits), which replies are paced by.
func (c *Chat) Limits() adapters.Limits { return Limits() }

// Run hands the browsers' messages to h until ctx ends (the page itself is served by Handler,
// on the admin listener). Then it takes no new message, waits for the turns in flight to return
// (they are not cancelled: the pipeline's shutdown decides how long they may take) and stops the
// delivery engine. It returns nil.
func (c *Chat) Run(ctx context.Context, h adapters.Handler) error {
	c.SetHandler(h)
	<-ctx.Done()
	c.stop(false)
	return nil
}

// Close cancels the turns in flight, waits for them to return and stops the delivery engine.
func (c *Chat) Close() error {
	c.stop(true)
	return nil
}

// stop refuses new turns, cancels the running ones when cancelTurns is set, waits for them and
// stops the delivery engine.
func (c *Chat) stop(cancelTurns bool) {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	if cancelTurns {
		c.cancel()
	}
	c.turns.Wait()
	c.cancel() // no turn runs any more: release the turns' context
	c.engine.Close()
	for _, o := range []*outbox{c.out, c.keep} {
		if o == nil {
			continue
		}
		c.mu.Lock()
		select {
		case <-o.quit:
		default:
			close(o.quit)
		}
		c.mu.Unlock()
		<-o.done
	}
	c.listening.Wait()
}

// newConv is a conversation of this process with chat id id, selected by the cookie secret.
func (c *Chat) newConv(id, secret string) *conversation {
	return &conversation{
		id:       id,
		secret:   secret,
		csrf:     csrfOf(secret),
		used:     c.now(),
		watchers: map[chan struct{}]struct{}{},
		tag:      c.tag,
		out:      c.out,
		keep:     c.keep,
		now:      c.now,
	}
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

// conversationOf returns the browser's conversation, or nil when it has none. A session this
// process does not know is looked up in Sessions (the server restarted, or dropped it for room).
func (c *Chat) conversationOf(r *http.Request) *conversation {
	ck, err := r.Cookie(chatCookie)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	conv := c.secrets[ck.Value]
	if conv != nil {
		conv.used = c.now()
	}
	c.mu.Unlock()
	if conv != nil || c.opts.Sessions == nil {
		return conv
	}
	return c.restore(r.Context(), ck.Value)
}

// hashSecret is what Sessions keeps of a cookie.
func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// csrfOf is the token a session's page sends with every post: an HMAC of the session's cookie, so
// that every replica (and a restarted process) derives the same token for a page another one
// served, while a page of another site, which cannot read the cookie, cannot make it.
func csrfOf(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("relaybot web chat csrf"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// restore brings back a stored session: its chat id, and the messages of its active
// conversation. It returns nil when the session is unknown or the chats are full.
func (c *Chat) restore(ctx context.Context, secret string) *conversation {
	chatID, ok, err := c.opts.Sessions.WebSession(ctx, hashSecret(secret))
	if err != nil {
		c.log.Warn("web chat: stored session not read", "err", err)
		return nil
	}
	if !ok {
		return nil
	}
	conv := c.newConv(chatID, secret)
	// Message ids of this process must not repeat those of the stored turns.
	conv.nextID = int(c.now().UnixMilli())
	if err := c.loadMessages(ctx, conv); err != nil {
		c.log.Warn("web chat: earlier messages not shown", "chat", chatID, "err", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if known := c.secrets[secret]; known != nil {
		return known // restored by a request at the same moment
	}
	if !c.admitLocked(conv) {
		return nil
	}
	return conv
}

// storedMark is how far the store has a chat: its active conversation and that one's turns.
// A change means turns ran (or /reset closed the conversation) outside this process.
type storedMark struct {
	conversation int64
	turns        int
}

// storedMarkOf reads how far the store has the chat of conv.
func (c *Chat) storedMarkOf(ctx context.Context, conv *conversation) (storedMark, error) {
	list, err := c.opts.Sessions.ChatConversations(ctx, chat.Ref{Platform: chat.Web, ChatID: conv.id}, 1)
	if err != nil || len(list) == 0 || !list[0].Active {
		return storedMark{}, err
	}
	return storedMark{conversation: list[0].ID, turns: list[0].Turns}, nil
}

// loadMessages fills conv with what the user saw of its chat: the messages kept as the page
// showed them, or, for a chat that has none kept (its messages are older than the keeping),
// the user's messages and the bot's answers of its active stored conversation.
func (c *Chat) loadMessages(ctx context.Context, conv *conversation) error {
	mark, err := c.storedMarkOf(ctx, conv)
	if err != nil {
		return err
	}
	lines, err := c.opts.Sessions.WebMessages(ctx, conv.id, maxMessages)
	if err != nil {
		return err
	}
	var msgs []eventMessage
	if len(lines) == 0 && mark.conversation != 0 {
		if msgs, err = c.storedMessages(ctx, mark.conversation); err != nil {
			return err
		}
	}
	conv.mu.Lock()
	defer conv.mu.Unlock()
	conv.msgs, conv.aliases = nil, nil
	for _, l := range lines {
		m := restoredMessage(l)
		conv.rev++
		// The other replicas' pages show these already, or load them as well; the store has them.
		m.rev, m.pub, m.kept = conv.rev, conv.rev, conv.rev
		conv.appendLocked(m)
		conv.lastPos = max(conv.lastPos, m.Pos)
	}
	for _, m := range msgs {
		added := conv.addLocked(m.Role, m.Text, nil)
		// Read back from the conversation: kept from now on as the page shows it.
		added.HTML, added.pub, added.stored = m.HTML, added.rev, true
	}
	conv.notifyLocked()
	conv.stored = mark
	return nil
}

// refresh reloads conv's messages from the store when its chat moved on elsewhere: a turn ran on
// another replica (the browser's message landed there) or the conversation was reset. Only a
// conversation with no page open and no turn running here is reloaded, so nothing a page shows
// is taken from under it, and the files of this process's answers stay while nothing changed.
func (c *Chat) refresh(ctx context.Context, conv *conversation) {
	if c.opts.Sessions == nil || !conv.idle() {
		return
	}
	mark, err := c.storedMarkOf(ctx, conv)
	if err != nil {
		c.log.Warn("web chat: stored conversation not read", "chat", conv.id, "err", err)
		return
	}
	conv.mu.Lock()
	same := mark == conv.stored
	conv.mu.Unlock()
	if same || !conv.idle() {
		return
	}
	if err := c.loadMessages(ctx, conv); err != nil {
		c.log.Warn("web chat: stored conversation not read", "chat", conv.id, "err", err)
	}
}

// conversationMessages returns what the page showed of a conversation of the chat chatID, oldest
// first: its kept messages, or, when none were kept, what the conversation's messages say.
func (c *Chat) conversationMessages(ctx context.Context, chatID string, conversationID int64) ([]eventMessage, error) {
	lines, err := c.opts.Sessions.WebConversationMessages(ctx, chatID, conversationID, maxMessages)
	if err != nil || len(lines) == 0 {
		if err == nil {
			return c.storedMessages(ctx, conversationID)
		}
		return nil, err
	}
	out := make([]eventMessage, 0, len(lines))
	for _, l := range lines {
		m := restoredMessage(l)
		out = append(out, eventMessage{ID: m.ID, Role: m.Role, Text: m.Text, HTML: m.HTML, Pos: m.Pos})
	}
	return out, nil
}

// storedMessages returns what the user saw of a stored conversation, oldest first.
func (c *Chat) storedMessages(ctx context.Context, conversationID int64) ([]eventMessage, error) {
	lines, err := c.opts.Sessions.Transcript(ctx, conversationID, maxMessages)
	if err != nil {
		return nil, err
	}
	out := make([]eventMessage, 0, len(lines))
	for _, l := range lines {
		if l.FromUser {
			out = append(out, eventMessage{Role: "user", Text: l.Text})
		} else {
			out = append(out, eventMessage{Role: "bot", Text: l.Text, HTML: markdown.HTML(l.Text)})
		}
	}
	return out, nil
}

// errChatsFull is newConversation's answer when every conversation has its page open.
var errChatsFull = errors.New("every web chat slot has an open page")

// admitLocked adds conv to the chats in memory. At the cap it drops the least recently used
// conversation whose page is closed (Sessions brings it back when its browser returns); it never
// drops one with an open page, and reports false when all are open. c.mu must be held.
func (c *Chat) admitLocked(conv *conversation) bool {
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
			return false
		}
		delete(c.secrets, oldest.secret)
		delete(c.ids, oldest.id)
	}
	c.secrets[conv.secret] = conv
	c.ids[conv.id] = conv
	return true
}

// newConversation starts a conversation and sets the browser's cookie (see admitLocked for the
// cap). With Sessions the session is stored, so that it outlives the process.
func (c *Chat) newConversation(w http.ResponseWriter, r *http.Request) (*conversation, error) {
	idBytes := make([]byte, 8)
	rand.Read(idBytes)
	secret := randomString(32)
	conv := c.newConv(hex.EncodeToString(idBytes), secret)
	c.mu.Lock()
	ok := c.admitLocked(conv)
	c.mu.Unlock()
	if !ok {
		return nil, errChatsFull
	}
	if c.opts.Sessions != nil {
		if err := c.opts.Sessions.SaveWebSession(r.Context(), hashSecret(conv.secret), conv.id); err != nil {
			// The chat works; it only will not survive a restart.
			c.log.Warn("web chat: session not stored", "chat", conv.id, "err", err)
		}
	}
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

// earlierConversation is one conversation of the browser's chat, as /chat/conversations lists it.
type earlierConversation struct {
	ID        int64     `json:"id"`
	Active    bool      `json:"active"`
	CreatedAt time.Time `json:"created_at"`
	Preview   string    `json:"preview"`
	Turns     int       `json:"turns"`
}

// maxEarlier is how many conversations /chat/conversations lists.
const maxEarlier = 50

// conversations lists the conversations of the browser's chat, newest first (empty without
// Sessions).
func (c *Chat) conversations(w http.ResponseWriter, r *http.Request) {
	conv := c.conversationOf(r)
	if conv == nil {
		http.Error(w, "no chat session: open /chat first", http.StatusUnauthorized)
		return
	}
	out := []earlierConversation{}
	if c.opts.Sessions != nil {
		list, err := c.opts.Sessions.ChatConversations(r.Context(), chat.Ref{Platform: chat.Web, ChatID: conv.id}, maxEarlier)
		if err != nil {
			c.log.Warn("web chat: conversations not listed", "chat", conv.id, "err", err)
			http.Error(w, "the conversations cannot be read now", http.StatusServiceUnavailable)
			return
		}
		for _, e := range list {
			out = append(out, earlierConversation{ID: e.ID, Active: e.Active, CreatedAt: e.CreatedAt, Preview: e.Preview, Turns: e.Turns})
		}
	}
	writeJSON(w, out)
}

// transcript returns the messages of one conversation of the browser's chat.
func (c *Chat) transcript(w http.ResponseWriter, r *http.Request) {
	conv := c.conversationOf(r)
	if conv == nil {
		http.Error(w, "no chat session: open /chat first", http.StatusUnauthorized)
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || c.opts.Sessions == nil {
		http.NotFound(w, r)
		return
	}
	list, err := c.opts.Sessions.ChatConversations(r.Context(), chat.Ref{Platform: chat.Web, ChatID: conv.id}, maxEarlier)
	if err != nil {
		c.log.Warn("web chat: conversations not listed", "chat", conv.id, "err", err)
		http.Error(w, "the conversation cannot be read now", http.StatusServiceUnavailable)
		return
	}
	if !slices.ContainsFunc(list, func(e chat.Summary) bool { return e.ID == id }) {
		// Another browser's conversation, or none: the same answer either way.
		http.NotFound(w, r)
		return
	}
	msgs, err := c.conversationMessages(r.Context(), conv.id, id)
	if err != nil {
		c.log.Warn("web chat: conversation not read", "chat", conv.id, "conversation", id, "err", err)
		http.Error(w, "the conversation cannot be read now", http.StatusServiceUnavailable)
		return
	}
	if msgs == nil {
		msgs = []eventMessage{}
	}
	writeJSON(w, msgs)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
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
	// Pos orders the chat's messages: the page shows them by it.
	Pos int64 `json:"pos,omitempty"`
	// Stop: the reply still streams; the page shows a Stop button that posts /stop.
	Stop bool `json:"stop,omitempty"`
	// Question and Choices are an open approval question's id and buttons.
	Question string        `json:"question,omitempty"`
	Choices  []eventChoice `json:"choices,omitempty"`
	// Form is an open form's fields, shown with Submit and Decline.
	Form []eventField `json:"form,omitempty"`
}

// eventField is one field of an open form as the page renders it.
type eventField struct {
	Name        string        `json:"name"`
	Label       string        `json:"label"`
	Description string        `json:"description,omitempty"`
	Kind        string        `json:"kind"`
	Required    bool          `json:"required,omitempty"`
	Options     []eventChoice `json:"options,omitempty"`
	Min         *float64      `json:"min,omitempty"`
	Max         *float64      `json:"max,omitempty"`
	MinLength   int           `json:"minlength,omitempty"`
	MaxLength   int           `json:"maxlength,omitempty"`
	Format      string        `json:"format,omitempty"`
	MinItems    int           `json:"minitems,omitempty"`
	MaxItems    int           `json:"maxitems,omitempty"`
	Default     []string      `json:"default,omitempty"`
}

type eventChoice struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	URL   string `json:"url,omitempty"`
}

type eventFile struct {
	Name  string `json:"name"`
	URL   string `json:"url"`
	Image bool   `json:"image"`
	Audio bool   `json:"audio,omitempty"`
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
	if c.opts.Relay != nil {
		// Before the page reads the stored conversation: from here on, a replica running a turn
		// of the chat sends this page its changes.
		unwatch, err := c.opts.Relay.Watch(r.Context(), conv.id)
		if err != nil {
			c.log.Warn("web chat: the page will not see turns other replicas run", "chat", conv.id, "err", err)
		} else {
			defer unwatch()
		}
	}
	c.refresh(r.Context(), conv)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	wake, unwatch := conv.watch()
	defer unwatch()
	c.streamChanges(w, r, conv, wake)
}

// watch registers a wake channel that is signalled when the conversation changes; unwatch
// removes it.
func (conv *conversation) watch() (wake chan struct{}, unwatch func()) {
	wake = make(chan struct{}, 1)
	conv.mu.Lock()
	conv.watchers[wake] = struct{}{}
	conv.mu.Unlock()
	return wake, func() {
		conv.mu.Lock()
		delete(conv.watchers, wake)
		conv.mu.Unlock()
	}
}

// streamChanges writes conv's changes to the page, each as it wakes on wake, until the page or
// the chat goes away; it ends the typing indicator when it runs out and keeps the stream alive
// through proxies that close idle connections.
func (c *Chat) streamChanges(w http.ResponseWriter, r *http.Request, conv *conversation, wake <-chan struct{}) {
	rc := http.NewResponseController(w)
	var seen uint64
	typingTimer := time.NewTimer(time.Hour)
	defer typingTimer.Stop()
	keepAlive := time.NewTicker(25 * time.Second)
	defer keepAlive.Stop()
	for {
		var ch pageChanges
		ch, seen = conv.changesSince(seen)
		for _, m := range ch.msgs {
			if err := writeEvent(w, "msg", m); err != nil {
				return
			}
		}
		if ch.typingChanged {
			left := ch.typingUntil.Sub(c.now())
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

// pageChanges is what changed in a conversation since a page last looked.
type pageChanges struct {
	msgs          []eventMessage // the messages changed, each whole
	typingChanged bool
	typingUntil   time.Time
}

// changesSince returns what changed after revision seen, and the revision it brings the page to.
func (conv *conversation) changesSince(seen uint64) (pageChanges, uint64) {
	conv.mu.Lock()
	defer conv.mu.Unlock()
	var ch pageChanges
	for _, m := range conv.msgs {
		if m.rev > seen {
			ch.msgs = append(ch.msgs, toEvent(m))
		}
	}
	ch.typingChanged = conv.typingRv > seen
	ch.typingUntil = conv.typing
	return ch, conv.rev
}

func toEvent(m *message) eventMessage {
	e := eventMessage{ID: m.ID, Role: m.Role, Text: m.Text, HTML: m.HTML, Question: m.Question, Stop: m.Stop, Pos: m.Pos}
	for _, ch := range m.Choices {
		e.Choices = append(e.Choices, eventChoice{ID: ch.ID, Label: ch.Label, URL: ch.URL})
	}
	if m.Form != nil {
		for _, f := range m.Form.Fields {
			ef := eventField{Name: f.Name, Label: f.Title, Description: f.Description, Kind: string(f.Kind), Required: f.Required,
				Min: f.Min, Max: f.Max, MinLength: f.MinLength, MaxLength: f.MaxLength, Format: f.Format,
				MinItems: f.MinItems, MaxItems: f.MaxItems, Default: f.Default}
			if ef.Label == "" {
				ef.Label = f.Name
			}
			for _, o := range f.Options {
				ef.Options = append(ef.Options, eventChoice{ID: o.ID, Label: o.Label})
			}
			e.Form = append(e.Form, ef)
		}
	}
	for i, f := range m.Files {
		e.Files = append(e.Files, eventFile{
			Name:  f.Name,
			URL:   "/chat/files/" + m.ID + "/" + strconv.Itoa(i),
			Image: f.IsImage(),
			Audio: strings.HasPrefix(f.MIME, "audio/"),
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

// send takes a message from the browser and hands it to the Handler on its own goroutine; with
// a Relay it answers once the message has its place in its conversation's order across the
// replicas (adapters.Inbound.Placed), at most adapters.PlaceWait.
func (c *Chat) send(w http.ResponseWriter, r *http.Request) {
	conv := c.conversationOf(r)
	if conv == nil {
		http.Error(w, "no chat session: reload /chat", http.StatusUnauthorized)
		return
	}
	text, atts, status, err := c.readSend(w, r, conv)
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	h, ok := c.begin(w)
	if !ok {
		return
	}
	in := c.inbound(conv, text, atts)
	if cmd, ok := adapters.ParseCommand(text); ok && len(atts) == 0 {
		if !cmd.For("") {
			// "/reset@otherbot" names a bot, and the web chat's bot has no name: not ours to run.
			conv.mu.Lock()
			conv.running--
			conv.mu.Unlock()
			c.turns.Done()
			w.WriteHeader(http.StatusAccepted)
			return
		}
		in.Command, in.Args = cmd.Name, cmd.Args
	}
	// The page sends the chat's next message once this one is answered, and with several
	// replicas it may reach another one: this one is answered once it has its place in the
	// deployment's turn queue, so the next queues behind it.
	var pl *adapters.Placement
	if c.opts.Relay != nil {
		pl = adapters.NewPlacement()
		in.Placed = pl.Placed
	}
	go func() {
		defer c.turns.Done()
		if pl != nil {
			defer pl.Placed() // a handler that never said
		}
		// The browser shows every edit as it arrives: replies always stream.
		resp := c.engine.Responder(in.Chat, adapters.SendOptions{ReplyTo: in.MessageID, Stoppable: true}, true)
		h.Handle(c.ctx, in, askResponder{Responder: resp, chat: c, chatID: conv.id})
		c.ranHere(conv)
	}()
	if pl != nil && !pl.Wait(r.Context(), adapters.PlaceWait) {
		c.log.Warn("web chat: message answered before it had its place in the turn queue; the chat's next message may run first",
			"chat", conv.id, "request_ended", r.Context().Err() != nil)
	}
	w.WriteHeader(http.StatusAccepted)
}

// begin returns the Handler and counts a turn for Close, which waits for it to end (c.turns.Done),
// or answers why none can start and returns false.
func (c *Chat) begin(w http.ResponseWriter) (adapters.Handler, bool) {
	c.handler.RLock()
	h := c.handler.h
	c.handler.RUnlock()
	if h == nil {
		http.Error(w, "the bot is not ready yet: try again in a moment", http.StatusServiceUnavailable)
		return nil, false
	}
	// Once Close has begun, no turn starts (and none is added to the WaitGroup Close waits on).
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.turns.Add(1)
	}
	c.mu.Unlock()
	if closed {
		http.Error(w, "the bot is shutting down: try again later", http.StatusServiceUnavailable)
		return nil, false
	}
	return h, true
}

// stopTurn takes a press of the Stop button: the chat's /stop, as a control rather than a
// message. The page shows no message of the user's for it and the chat keeps none; what the
// pipeline answers (nothing to stop, not theirs to stop) shows as the bot's message.
func (c *Chat) stopTurn(w http.ResponseWriter, r *http.Request) {
	conv := c.conversationOf(r)
	if conv == nil {
		http.Error(w, "no chat session: reload /chat", http.StatusUnauthorized)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxAnswerBytes)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !csrfOK(r, conv) {
		http.Error(w, "missing or wrong CSRF token: reload /chat", http.StatusForbidden)
		return
	}
	h, ok := c.begin(w)
	if !ok {
		return
	}
	in := adapters.Inbound{
		Chat:      chat.Ref{Platform: chat.Web, ChatID: conv.id},
		Kind:      adapters.Private,
		MessageID: "stop-" + randomString(6),
		UserID:    conv.id,
		UserName:  c.opts.UserName,
		Command:   "stop",
		Time:      c.now(),
	}
	go func() {
		defer c.turns.Done()
		resp := c.engine.Responder(in.Chat, adapters.SendOptions{}, true)
		h.Handle(c.ctx, in, askResponder{Responder: resp, chat: c, chatID: conv.id})
	}()
	w.WriteHeader(http.StatusAccepted)
}

// csrfOK reports whether a post carries the page's CSRF token (header or form field).
func csrfOK(r *http.Request, conv *conversation) bool {
	token := r.Header.Get("X-CSRF-Token")
	if token == "" {
		token = r.PostForm.Get("csrf")
	}
	return subtle.ConstantTimeCompare([]byte(token), []byte(conv.csrf)) == 1
}

// inbound shows the user's message in conv (its attachments by name), counts a turn running
// there, and returns the message for the Handler.
func (c *Chat) inbound(conv *conversation, text string, atts []adapters.Attachment) adapters.Inbound {
	shown := text
	for _, a := range atts {
		icon := "📎 "
		if a.Kind == adapters.Voice {
			icon = "🎤 "
		}
		shown = strings.TrimSpace(shown + "\n" + icon + a.Name)
	}
	conv.mu.Lock()
	userMsg := conv.addLocked("user", shown, nil)
	conv.running++
	conv.mu.Unlock()
	return adapters.Inbound{
		Chat:        chat.Ref{Platform: chat.Web, ChatID: conv.id},
		Kind:        adapters.Private,
		MessageID:   userMsg.ID,
		UserID:      conv.id,
		UserName:    c.opts.UserName,
		Text:        text,
		Attachments: atts,
		Time:        c.now(),
	}
}

// ranHere notes that a turn of conv ended in this process: what the store now has of the chat
// is what conv shows, so the next page load keeps conv's messages (and their files).
func (c *Chat) ranHere(conv *conversation) {
	var mark storedMark
	var err error
	if c.opts.Sessions != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 10*time.Second)
		mark, err = c.storedMarkOf(ctx, conv)
		cancel()
		if err != nil {
			c.log.Warn("web chat: stored conversation not read", "chat", conv.id, "err", err)
		}
	}
	conv.mu.Lock()
	defer conv.mu.Unlock()
	conv.running--
	if err == nil && conv.running == 0 {
		conv.stored = mark
	}
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
	var f chat.File
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
	if f.IsImage() && mime != "image/svg+xml" || strings.HasPrefix(mime, "audio/") {
		disposition = "inline"
	}
	h.Set("Content-Disposition", disposition+"; filename="+strconv.Quote(f.Name))
	_, _ = w.Write(f.Data)
}
