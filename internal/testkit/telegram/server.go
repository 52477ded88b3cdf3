// Package telegram is a Telegram Bot API server on loopback for tests, benchmarks and the load
// tool. It speaks the real HTTP format (form, multipart or JSON requests under /bot<token>/<method>,
// {"ok":...} answers, files under /file/bot<token>/<path>), keeps every chat's messages so a test
// can read what a user would see, enforces Telegram's pacing with real 429 answers, records
// every call with its time, and injects faults on demand.
package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // image.DecodeConfig reads the sizes of uploaded photos
	_ "image/png"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf16"

	"relaybot/internal/testkit/memnet"
)

// Options configure a Server. The zero value gives Telegram's limits and a fixed token.
type Options struct {
	Token       string // default "123456:TEST-token"
	BotID       int64  // default 1000
	BotUsername string // default "relay_test_bot"
	// Limits on sends and edits (sendChatAction, deleteMessage and reads are free).
	PerChatBurst    int           // per chat: a bucket of this many, refilled one per PerChatInterval; default 3
	PerChatInterval time.Duration // default 1s
	GroupPerMinute  int           // per group chat (negative id): at most this many per minute; default 20
	GlobalPerSecond int           // across all chats: at most this many per second; default 30
	// Drafts (sendMessageDraft, sendRichMessageDraft) draw on a bucket of their own per chat,
	// not on PerChatBurst: Telegram publishes no budget for drafts, and bots that update them
	// every 300 ms (Memoh) or by round trip (AstrBot) report no flood errors. A bucket of
	// DraftBurst refilled one per DraftInterval; default 5 and 200ms (5 a second). They still
	// count in the global window.
	DraftBurst    int
	DraftInterval time.Duration
	// PaidPerSecond replaces GlobalPerSecond for sends and edits that carry
	// allow_paid_broadcast=true (Telegram's paid broadcast); default 1000.
	PaidPerSecond int
	NoLimits      bool // disable pacing entirely
	// RetryAfterUnit is how long one second of retry_after lasts on this server; default 1s.
	// Tests shorten it (with the client's matching option) to keep 429 storms quick.
	RetryAfterUnit time.Duration
	MaxTextLen     int // UTF-16 units; default 4096
	// RefuseDrafts makes sendMessageDraft fail with 400 as for a bot that may not stream
	// drafts (Telegram answers so where the feature is unavailable).
	RefuseDrafts bool
	// RefuseRich makes sendRichMessage, sendRichMessageDraft and editMessageText with
	// rich_message fail with 400, as where the bot may not send rich messages.
	RefuseRich bool
	// WithoutRich answers sendRichMessage and sendRichMessageDraft with 404 Not Found and takes
	// no rich_message on edits, as a Bot API server older than 10.1 does.
	WithoutRich bool
	// PrivateTopics gives the bot topics in private chats from the start (getMe's
	// has_topics_enabled); setMySettings turns them on or off.
	PrivateTopics bool
	// WithoutSettings answers setMySettings with 404 Not Found, as a Bot API server older than
	// 10.5 does.
	WithoutSettings bool
	// OnCall, when set, hears of every call (getUpdates included) right after its answer was
	// written, on the request's goroutine; it may be called concurrently. The load tool times
	// deliveries with it instead of polling Calls.
	OnCall func(Call)
	// InMemory serves on a memnet listener instead of a loopback port, for tests in a
	// testing/synctest bubble (make the server inside it): clients dial it with Dial, and every
	// wait, the server's rate limits included, is on the bubble's clock.
	InMemory bool
	// WebhookDial, when set, opens the connections the server posts webhook updates over (to a
	// bot serving its webhook in memory); nil dials the network.
	WebhookDial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (o *Options) defaults() {
	if o.Token == "" {
		o.Token = "123456:TEST-token"
	}
	if o.BotID == 0 {
		o.BotID = 1000
	}
	if o.BotUsername == "" {
		o.BotUsername = "relay_test_bot"
	}
	if o.PerChatBurst <= 0 {
		o.PerChatBurst = 3
	}
	if o.PerChatInterval <= 0 {
		o.PerChatInterval = time.Second
	}
	if o.DraftBurst <= 0 {
		o.DraftBurst = 5
	}
	if o.DraftInterval <= 0 {
		o.DraftInterval = 200 * time.Millisecond
	}
	if o.GroupPerMinute <= 0 {
		o.GroupPerMinute = 20
	}
	if o.GlobalPerSecond <= 0 {
		o.GlobalPerSecond = 30
	}
	if o.PaidPerSecond <= 0 {
		o.PaidPerSecond = 1000
	}
	if o.RetryAfterUnit <= 0 {
		o.RetryAfterUnit = time.Second
	}
	if o.MaxTextLen <= 0 {
		o.MaxTextLen = 4096
	}
}

// Chat is a Telegram chat. Group chats have negative ids.
type Chat struct {
	ID      int64  `json:"id"`
	Type    string `json:"type"` // "private", "group", "supergroup"
	Title   string `json:"title,omitempty"`
	IsForum bool   `json:"is_forum,omitempty"`
}

// User is a Telegram user.
type User struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	Username  string `json:"username,omitempty"`
}

// Entity is a Telegram message entity; offsets and lengths are in UTF-16 units.
type Entity struct {
	Type     string `json:"type"`
	Offset   int    `json:"offset"`
	Length   int    `json:"length"`
	URL      string `json:"url,omitempty"`
	Language string `json:"language,omitempty"`
}

// Message is one message of a chat, as the server keeps it.
type Message struct {
	ID       int
	Chat     Chat
	ThreadID int
	From     User
	FromBot  bool
	Text     string
	Entities []Entity
	Caption  string
	Kind     string // "text", "photo", "document"
	FileName string
	Data     []byte
	ReplyTo  int
	Edits    int
	Date     time.Time
	Deleted  bool
	// GeneralTopic: the message is in a forum's General topic; its ThreadID is a reply
	// chain's, not a topic's.
	GeneralTopic bool
	// ReplyMarkup is the bot message's reply_markup as sent (an inline keyboard); an edit
	// without one removes it, as Telegram does.
	ReplyMarkup string
	// Rich is set when the message is a rich message (sendRichMessage, or an edit with
	// rich_message); Text then holds its text without markup.
	Rich *RichMessage
	// Buttons is the message's inline keyboard, row after row flattened; an edit without
	// reply_markup takes it off, as Telegram does.
	Buttons []Button
}

// Call is one request the server answered.
type Call struct {
	Method      string
	ChatID      int64
	ThreadID    int
	MessageID   int
	Time        time.Time
	Code        int // 200, 400, 429, 500, ...
	Description string
	Params      map[string]string
}

// FaultKind is a failure the server can inject.
type FaultKind int

// Faults.
const (
	Fault429              FaultKind = iota // 429 with Fault.RetryAfter; the chat stays blocked that long
	Fault5xx                               // 502 Bad Gateway
	FaultAppliedThen5xx                    // the request takes effect, then the answer is a 502
	FaultNotModified                       // edits: "message is not modified" (the edit is applied)
	FaultMessageGone                       // edits: "message to edit not found" (the message is deleted)
	FaultEntitiesRejected                  // requests with entities or parse_mode: "can't parse entities"
	FaultTooLong                           // sendMessage/editMessageText: "message is too long"
	FaultDraftRefused                      // sendMessageDraft: 400, as where drafts are unavailable
	FaultRichRefused                       // sendRichMessage, rich edits and drafts: 400, as where rich messages are unavailable
)

// Fault is an injected failure for the next Times matching calls.
type Fault struct {
	Kind       FaultKind
	Method     string // "" matches every counted method
	ChatID     int64  // 0 matches every chat
	RetryAfter int    // seconds (in RetryAfterUnit) for Fault429
	Times      int    // default 1
}

// Server is a Telegram Bot API server on loopback.
type Server struct {
	opts Options
	ln   net.Listener
	srv  *http.Server

	mu       sync.Mutex
	chats    map[int64]*chatState
	nextMsg  map[int64]int
	updates  []json.RawMessage
	updateID []int64
	lastUpd  int64
	newUpd   chan struct{} // closed and replaced when an update arrives
	// polling is closed when another getUpdates call starts: as on Telegram, a second poller
	// terminates the first one's request with 409 Conflict.
	polling chan struct{}
	calls   []Call
	// myCommands is the command menu of the default scope (setMyCommands).
	myCommands []BotCommand
	faults     []*Fault
	migrated   map[int64]int64 // group chat id → the supergroup it was upgraded to
	global     []time.Time
	paid       []time.Time // sends and edits with allow_paid_broadcast
	files      map[string][]byte
	// fileSizes are the sizes getFile reports, where they differ from the data held.
	fileSizes map[string]int64
	fileSeq   int
	hook      string
	secret    string
	hookWake  chan struct{}
	cb        callbackState
	drafts    map[int64]*Draft // the draft each private chat shows now
	draftLog  []Draft          // every draft shown, in order
	cbSeq     int
	answered  map[string]string // callback query id → the text answered (may be empty)
	// privateTopics: the bot has topics in private chats (getMe's has_topics_enabled).
	privateTopics bool

	conns atomic.Int64 // connections accepted

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type chatState struct {
	chat     Chat
	msgs     []*Message
	tokens   float64
	refilled time.Time
	// The chat's draft bucket (Options.DraftBurst).
	draftTokens   float64
	draftRefilled time.Time
	groupHist     []time.Time
	blocked       time.Time
	topics        map[int]bool // forum topics (thread ids) users wrote in or the bot opened

	// topicNames are the names of the topics the bot opened (createForumTopic, editForumTopic).
	topicNames map[int]string
}

// New starts a server on 127.0.0.1 and returns it; Close stops it.
func New(opts Options) (*Server, error) {
	opts.defaults()
	var ln net.Listener = memnet.Listen("telegram.test:80")
	if !opts.InMemory {
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("telegram testkit: listen: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts:      opts,
		ln:        ln,
		chats:     map[int64]*chatState{},
		nextMsg:   map[int64]int{},
		newUpd:    make(chan struct{}),
		files:     map[string][]byte{},
		fileSizes: map[string]int64{},
		migrated:  map[int64]int64{},
		hookWake:  make(chan struct{}, 1),
		drafts:    map[int64]*Draft{},
		answered:  map[string]string{},
		ctx:       ctx,
		cancel:    cancel,
	}
	s.privateTopics = opts.PrivateTopics
	s.srv = &http.Server{Handler: s, BaseContext: func(net.Listener) context.Context { return ctx },
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.conns.Add(1)
			}
		}}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		_ = s.srv.Serve(ln)
	}()
	go s.webhookLoop()
	return s, nil
}

// Close stops the server and every goroutine it started.
func (s *Server) Close() {
	s.cancel()
	_ = s.srv.Close()
	s.wg.Wait()
}

// Dial connects to a server made InMemory, whatever the address; on loopback it dials the
// network. Its signature is that of http.Transport.DialContext.
func (s *Server) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if l, ok := s.ln.(*memnet.Listener); ok {
		return l.Dial(ctx, network, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// Token is the bot token the server accepts.
func (s *Server) Token() string { return s.opts.Token }

// BotUsername is the bot's username (without "@").
func (s *Server) BotUsername() string { return s.opts.BotUsername }

// BaseURL is the server's root, e.g. "http://127.0.0.1:41234".
func (s *Server) BaseURL() string { return "http://" + s.ln.Addr().String() }

// Endpoint is the API endpoint format for clients: "http://127.0.0.1:port/bot%s/%s".
func (s *Server) Endpoint() string { return s.BaseURL() + "/bot%s/%s" }

// Connections is how many connections clients have opened to the server: each is a TCP (and
// on Telegram a TLS) handshake.
func (s *Server) Connections() int { return int(s.conns.Load()) }

// Calls returns every call answered so far, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Messages returns the chat's messages that are not deleted, in order: what a user sees.
func (s *Server) Messages(chatID int64) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	if c := s.chats[chatID]; c != nil {
		for _, m := range c.msgs {
			if !m.Deleted {
				mm := *m
				mm.Entities = append([]Entity(nil), m.Entities...)
				mm.Buttons = append([]Button(nil), m.Buttons...)
				out = append(out, mm)
			}
		}
	}
	return out
}

// BotMessages returns the chat's messages sent by the bot, not deleted, in order.
func (s *Server) BotMessages(chatID int64) []Message {
	var out []Message
	for _, m := range s.Messages(chatID) {
		if m.FromBot {
			out = append(out, m)
		}
	}
	return out
}

// AddFault queues f; it applies to the next f.Times matching counted calls.
func (s *Server) AddFault(f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	s.mu.Lock()
	s.faults = append(s.faults, &f)
	s.mu.Unlock()
}

// MigrateChat upgrades the group chat from to the supergroup to, as Telegram does when a group
// grows or an admin turns on a supergroup feature: the supergroup starts empty, and from then
// on every request naming from answers 400 "group chat was upgraded to a supergroup chat" with
// parameters.migrate_to_chat_id set to to.ID.
func (s *Server) MigrateChat(from int64, to Chat) {
	if to.Type == "" {
		to.Type = "supergroup"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chatLocked(to)
	s.migrated[from] = to.ID
}

// DeleteMessage deletes a message as a user would.
func (s *Server) DeleteMessage(chatID int64, id int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.findLocked(chatID, id); m != nil {
		m.Deleted = true
		return true
	}
	return false
}

// Inbound is a user message to inject.
type Inbound struct {
	Chat     Chat
	From     User
	Text     string
	ThreadID int // forum topic
	ReplyTo  int // id of the message this one replies to
	// GeneralTopic marks a reply in a forum's General topic, which is no topic: Telegram then
	// sets message_thread_id to the id of the reply chain's first message (ThreadID), without
	// is_topic_message, and refuses sends to that thread ("message thread not found").
	GeneralTopic bool
	// Photo, when set, is sent as a photo (Text becomes the caption). The server offers it in
	// two sizes: a small thumbnail (the first 64 bytes) and the full data.
	Photo []byte
	// File, when set, is sent as a voice note, audio, video note or document (Text becomes the
	// caption), downloadable with getFile and the file URL.
	File *File
}

// File is a file a user sends.
type File struct {
	Kind     string // "voice", "audio", "video_note" or "document"
	Name     string // file_name (audio and documents)
	MIME     string // mime_type
	Data     []byte
	Duration int // seconds (voice, audio, video notes)
	// Size, when set, is the file_size reported instead of len(Data): a file larger than the
	// Bot API's 20 MB download limit need not be held in memory.
	Size int64
}

// MaxDownload is the largest file getFile lets a bot download (20 MB).
const MaxDownload = 20 << 20

// Send injects a user message as an update and returns its message id.
func (s *Server) Send(in Inbound) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chatLocked(in.Chat)
	s.nextMsg[in.Chat.ID]++
	m := &Message{
		ID: s.nextMsg[in.Chat.ID], Chat: c.chat, ThreadID: in.ThreadID, From: in.From,
		Text: in.Text, ReplyTo: in.ReplyTo, Kind: "text", Date: time.Now(), GeneralTopic: in.GeneralTopic,
	}
	if in.ThreadID != 0 && !in.GeneralTopic {
		if c.topics == nil {
			c.topics = map[int]bool{}
		}
		c.topics[in.ThreadID] = true
	}
	if in.Photo != nil {
		m.Kind, m.Text, m.Caption, m.Data = "photo", "", in.Text, in.Photo
	}
	if f := in.File; f != nil {
		m.Kind, m.Text, m.Caption, m.Data, m.FileName = f.Kind, "", in.Text, f.Data, f.Name
	}
	c.msgs = append(c.msgs, m)
	obj := s.messageJSONLocked(m)
	if f := in.File; f != nil {
		obj[f.Kind] = s.fileLocked(f)
		if in.Text != "" {
			obj["caption"] = in.Text
		}
	}
	if in.Photo != nil {
		small := in.Photo
		if len(small) > 64 {
			small = small[:64]
		}
		obj["photo"] = []map[string]any{s.photoSizeLocked(small, 90), s.photoSizeLocked(in.Photo, 1280)}
	}
	s.pushUpdateLocked("message", obj)
	return m.ID
}

// pushUpdateLocked queues an update whose one field is kind, for getUpdates and the webhook.
func (s *Server) pushUpdateLocked(kind string, obj any) {
	s.lastUpd++
	raw, _ := json.Marshal(map[string]any{"update_id": s.lastUpd, kind: obj})
	s.updates = append(s.updates, raw)
	s.updateID = append(s.updateID, s.lastUpd)
	close(s.newUpd)
	s.newUpd = make(chan struct{})
	select {
	case s.hookWake <- struct{}{}:
	default:
	}
}

// PendingUpdates is the number of updates not yet confirmed by the bot.
func (s *Server) PendingUpdates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.updates)
}

// fileLocked registers a user's file for getFile and returns its Bot API object.
func (s *Server) fileLocked(f *File) map[string]any {
	s.fileSeq++
	id := fmt.Sprintf("file-%d", s.fileSeq)
	s.files[id] = f.Data
	size := f.Size
	if size == 0 {
		size = int64(len(f.Data))
	}
	s.fileSizes[id] = size
	obj := map[string]any{"file_id": id, "file_unique_id": "u" + id, "file_size": size}
	if f.MIME != "" && f.Kind != "video_note" {
		obj["mime_type"] = f.MIME
	}
	if f.Name != "" && (f.Kind == "audio" || f.Kind == "document") {
		obj["file_name"] = f.Name
	}
	if f.Kind != "document" {
		obj["duration"] = f.Duration
	}
	if f.Kind == "video_note" {
		obj["length"] = 240
	}
	return obj
}

func (s *Server) photoSizeLocked(data []byte, width int) map[string]any {
	s.fileSeq++
	id := fmt.Sprintf("file-%d", s.fileSeq)
	s.files[id] = data
	return map[string]any{"file_id": id, "file_unique_id": "u" + id, "width": width, "height": width * 3 / 4, "file_size": len(data)}
}

func (s *Server) chatLocked(c Chat) *chatState {
	st := s.chats[c.ID]
	if st == nil {
		if c.Type == "" {
			c.Type = "private"
			if c.ID < 0 {
				c.Type = "supergroup"
			}
		}
		st = &chatState{chat: c, tokens: float64(s.opts.PerChatBurst), refilled: time.Now(),
			draftTokens: float64(s.opts.DraftBurst), draftRefilled: time.Now()}
		s.chats[c.ID] = st
	}
	return st
}

func (s *Server) findLocked(chatID int64, id int) *Message {
	c := s.chats[chatID]
	if c == nil {
		return nil
	}
	for _, m := range c.msgs {
		if m.ID == id {
			return m
		}
	}
	return nil
}

func (s *Server) messageJSONLocked(m *Message) map[string]any {
	obj := map[string]any{
		"message_id": m.ID,
		"date":       m.Date.Unix(),
		"chat":       m.Chat,
		"from":       m.From,
	}
	if m.Rich != nil {
		obj["rich_message"] = map[string]any{"blocks": []any{}}
	} else if m.Text != "" {
		obj["text"] = m.Text
	}
	if len(m.Entities) > 0 {
		obj["entities"] = m.Entities
	}
	if m.Caption != "" {
		obj["caption"] = m.Caption
	}
	if len(m.Buttons) > 0 {
		obj["reply_markup"] = keyboardJSON(m.Buttons)
	}
	if m.ThreadID != 0 {
		obj["message_thread_id"] = m.ThreadID
		if (m.Chat.IsForum || m.Chat.Type == "private") && !m.GeneralTopic {
			obj["is_topic_message"] = true
		}
	}
	if m.ReplyTo != 0 {
		if r := s.findLocked(m.Chat.ID, m.ReplyTo); r != nil {
			obj["reply_to_message"] = s.messageJSONLocked(&Message{ID: r.ID, Chat: r.Chat, From: r.From, Text: r.Text, Date: r.Date, ThreadID: r.ThreadID})
		}
	}
	if m.Kind == "document" {
		obj["document"] = map[string]any{"file_id": "doc", "file_name": m.FileName, "file_size": len(m.Data)}
	}
	if m.Kind == "photo" && m.FromBot {
		obj["photo"] = []map[string]any{{"file_id": "p", "file_unique_id": "p", "width": 1, "height": 1}}
	}
	return obj
}

// apiError is a Bot API failure answer.
type apiError struct {
	code       int
	desc       string
	retryAfter int
	migrateTo  int64
}

func badRequest(desc string) *apiError { return &apiError{code: 400, desc: "Bad Request: " + desc} }

// ServeHTTP implements the Bot API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if rest, ok := strings.CutPrefix(path, "/file/bot"); ok {
		s.serveFile(w, rest)
		return
	}
	rest, ok := strings.CutPrefix(path, "/bot")
	token, method, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		writeJSON(w, 404, map[string]any{"ok": false, "error_code": 404, "description": "Not Found"})
		return
	}
	if token != s.opts.Token {
		writeJSON(w, 401, map[string]any{"ok": false, "error_code": 401, "description": "Unauthorized"})
		return
	}
	params, files, err := readParams(r)
	if err != nil {
		writeJSON(w, 400, map[string]any{"ok": false, "error_code": 400, "description": "Bad Request: " + err.Error()})
		return
	}
	var result any
	var aerr *apiError
	if method == "getUpdates" {
		result, aerr = s.getUpdates(r.Context(), params)
	} else {
		s.mu.Lock()
		result, aerr = s.dispatchLocked(method, params, files)
		s.mu.Unlock()
	}
	call := Call{Method: method, Time: time.Now(), Code: 200, Params: params}
	call.ChatID, _ = strconv.ParseInt(params["chat_id"], 10, 64)
	call.ThreadID, _ = strconv.Atoi(params["message_thread_id"])
	call.MessageID, _ = strconv.Atoi(params["message_id"])
	if aerr != nil {
		call.Code, call.Description = aerr.code, aerr.desc
	}
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.mu.Unlock()
	if aerr != nil {
		body := map[string]any{"ok": false, "error_code": aerr.code, "description": aerr.desc}
		if aerr.retryAfter > 0 {
			body["parameters"] = map[string]any{"retry_after": aerr.retryAfter}
		}
		if aerr.migrateTo != 0 {
			body["parameters"] = map[string]any{"migrate_to_chat_id": aerr.migrateTo}
		}
		writeJSON(w, aerr.code, body)
	} else {
		writeJSON(w, 200, map[string]any{"ok": true, "result": result})
	}
	if s.opts.OnCall != nil {
		s.opts.OnCall(call)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// readParams reads form, multipart or JSON parameters; uploaded files come back by field name.
func readParams(r *http.Request) (map[string]string, map[string]upload, error) {
	params := map[string]string{}
	files := map[string]upload{}
	for k, v := range r.URL.Query() {
		params[k] = v[0]
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil && !errors.Is(err, io.EOF) {
			return nil, nil, fmt.Errorf("invalid JSON: %w", err)
		}
		for k, v := range m {
			if s, ok := v.(string); ok {
				params[k] = s
			} else {
				b, _ := json.Marshal(v)
				params[k] = string(b)
			}
		}
	case "multipart/form-data":
		if err := r.ParseMultipartForm(64 << 20); err != nil {
			return nil, nil, fmt.Errorf("invalid multipart body: %w", err)
		}
		for k, v := range r.MultipartForm.Value {
			params[k] = v[0]
		}
		for k, fhs := range r.MultipartForm.File {
			f, err := fhs[0].Open()
			if err != nil {
				return nil, nil, err
			}
			data, err := io.ReadAll(f)
			f.Close()
			if err != nil {
				return nil, nil, err
			}
			files[k] = upload{name: fhs[0].Filename, data: data}
		}
	default:
		if err := r.ParseForm(); err != nil {
			return nil, nil, fmt.Errorf("invalid form: %w", err)
		}
		for k, v := range r.PostForm {
			params[k] = v[0]
		}
	}
	return params, files, nil
}

type upload struct {
	name string
	data []byte
}

func (s *Server) serveFile(w http.ResponseWriter, rest string) {
	token, path, ok := strings.Cut(rest, "/")
	if !ok || token != s.opts.Token {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	id, ok := strings.CutPrefix(path, "files/")
	data, found := s.files[id]
	s.mu.Unlock()
	if !ok || !found {
		http.NotFound(w, nil)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
}

func (s *Server) getUpdates(ctx context.Context, p map[string]string) (any, *apiError) {
	offset, _ := strconv.ParseInt(p["offset"], 10, 64)
	timeout, _ := strconv.Atoi(p["timeout"])
	limit, _ := strconv.Atoi(p["limit"])
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	deadline := time.NewTimer(time.Duration(timeout) * time.Second)
	defer deadline.Stop()
	s.mu.Lock()
	if s.polling != nil {
		close(s.polling)
	}
	mine := make(chan struct{})
	s.polling = mine
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.polling == mine {
			s.polling = nil
		}
		s.mu.Unlock()
	}()
	for {
		s.mu.Lock()
		if s.hook != "" {
			s.mu.Unlock()
			return nil, &apiError{code: 409, desc: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"}
		}
		// Confirm (forget) every update below offset.
		i := 0
		for i < len(s.updateID) && s.updateID[i] < offset {
			i++
		}
		s.updates, s.updateID = s.updates[i:], s.updateID[i:]
		if len(s.updates) > 0 || timeout <= 0 {
			n := min(limit, len(s.updates))
			out := append([]json.RawMessage{}, s.updates[:n]...)
			s.mu.Unlock()
			return out, nil
		}
		wait := s.newUpd
		s.mu.Unlock()
		select {
		case <-wait:
		case <-deadline.C:
			return []json.RawMessage{}, nil
		case <-ctx.Done():
			return []json.RawMessage{}, nil
		case <-mine:
			return nil, &apiError{code: 409, desc: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"}
		}
	}
}

// counted methods draw on the rate budgets.
// Drafts are counted on a budget of their own per chat (Options.DraftBurst) and in the global
// window.
var counted = map[string]bool{"sendMessage": true, "editMessageText": true, "editMessageReplyMarkup": true, "sendPhoto": true, "sendDocument": true, "sendVoice": true, "sendMessageDraft": true,
	"sendRichMessage": true, "sendRichMessageDraft": true}

// dispatchLocked answers one Bot API call: the bot's own methods, then the chat's uncounted
// ones, then the sends and edits that draw on the rate budgets and may meet an injected fault.
func (s *Server) dispatchLocked(method string, p map[string]string, files map[string]upload) (any, *apiError) {
	if res, aerr, ok := s.botMethodLocked(method, p); ok {
		return res, aerr
	}
	chatID, c, aerr := s.addressedChatLocked(method, p)
	if aerr != nil {
		return nil, aerr
	}
	switch method {
	case "sendChatAction":
		return true, nil
	case "getChatMember":
		return s.chatMemberLocked(chatID, p)
	case "deleteMessage":
		return s.deleteMessageLocked(chatID, p)
	}
	if res, aerr, ok := s.topicMethodLocked(method, c, p); ok {
		return res, aerr
	}
	if !counted[method] || s.opts.WithoutRich && strings.HasPrefix(method, "sendRich") {
		return nil, &apiError{code: 404, desc: "Not Found"}
	}
	return s.countedLocked(method, chatID, c, p, files)
}

// botMethodLocked answers the methods that name no chat; ok is false for any other method.
func (s *Server) botMethodLocked(method string, p map[string]string) (res any, aerr *apiError, ok bool) {
	switch method {
	case "getMe":
		return map[string]any{"id": s.opts.BotID, "is_bot": true, "first_name": "Relay", "username": s.opts.BotUsername,
			"can_join_groups": true, "can_read_all_group_messages": false, "supports_inline_queries": false,
			"has_topics_enabled": s.privateTopics, "allows_users_to_create_topics": true}, nil, true
	case "setMySettings":
		res, aerr = s.setMySettingsLocked(p)
		return res, aerr, true
	case "setWebhook":
		s.hook, s.secret = p["url"], p["secret_token"]
		select {
		case s.hookWake <- struct{}{}:
		default:
		}
		return true, nil, true
	case "deleteWebhook":
		s.hook, s.secret = "", ""
		return true, nil, true
	case "getWebhookInfo":
		return map[string]any{"url": s.hook, "pending_update_count": len(s.updates)}, nil, true
	case "answerCallbackQuery":
		res, aerr = s.answerCallbackLocked(p)
		return res, aerr, true
	case "setMyCommands":
		res, aerr = s.setMyCommandsLocked(p)
		return res, aerr, true
	case "getFile":
		res, aerr = s.getFileLocked(p["file_id"])
		return res, aerr, true
	}
	return nil, nil, false
}

// getFileLocked answers getFile: the file's path, unless it is past what bots may download.
func (s *Server) getFileLocked(id string) (any, *apiError) {
	data, ok := s.files[id]
	if !ok {
		return nil, badRequest("invalid file_id")
	}
	size := int64(len(data))
	if n, ok := s.fileSizes[id]; ok {
		size = n
	}
	if size > MaxDownload {
		return nil, badRequest("file is too big")
	}
	return map[string]any{"file_id": id, "file_unique_id": "u" + id, "file_size": size, "file_path": "files/" + id}, nil
}

// addressedChatLocked finds the chat a call names, refusing a chat it does not know, a group
// that became a supergroup (with the new id, as Telegram does) and a forum topic that does not
// exist.
func (s *Server) addressedChatLocked(method string, p map[string]string) (int64, *chatState, *apiError) {
	chatID, err := strconv.ParseInt(p["chat_id"], 10, 64)
	if err != nil {
		return 0, nil, badRequest("chat not found")
	}
	if to, ok := s.migrated[chatID]; ok {
		return 0, nil, &apiError{code: 400, desc: "Bad Request: group chat was upgraded to a supergroup chat", migrateTo: to}
	}
	c := s.chats[chatID]
	if c == nil {
		return 0, nil, badRequest("chat not found")
	}
	if thread := atoi(p["message_thread_id"]); thread != 0 && (c.chat.IsForum || c.chat.Type == "private") && !c.topics[thread] &&
		method != "editMessageText" && method != "editForumTopic" {
		return 0, nil, badRequest("message thread not found")
	}
	return chatID, c, nil
}

// deleteMessageLocked marks a message deleted.
func (s *Server) deleteMessageLocked(chatID int64, p map[string]string) (any, *apiError) {
	m := s.findLocked(chatID, atoi(p["message_id"]))
	if m == nil || m.Deleted {
		return nil, badRequest("message to delete not found")
	}
	m.Deleted = true
	return true, nil
}

// countedLocked answers a call that draws on the rate budgets: the next matching fault, if any,
// answers before the budgets are spent (a 429), after them (refusals) or after the call was
// applied (a 502 the bot cannot tell from a lost call, or "not modified").
func (s *Server) countedLocked(method string, chatID int64, c *chatState, p map[string]string, files map[string]upload) (any, *apiError) {
	if aerr := undocumentedParam(method, p); aerr != nil {
		return nil, aerr
	}
	now := time.Now()
	fault := s.takeFaultLocked(method, chatID, p)
	if fault != nil && fault.Kind == Fault429 {
		c.blocked = now.Add(time.Duration(fault.RetryAfter) * s.opts.RetryAfterUnit)
		return nil, s.tooManyLocked(fault.RetryAfter)
	}
	if aerr := s.paceLocked(c, now, p["allow_paid_broadcast"] == "true", isDraft(method)); aerr != nil {
		return nil, aerr
	}
	if aerr := s.faultBeforeLocked(fault, chatID, p); aerr != nil {
		return nil, aerr
	}
	res, aerr := s.applyLocked(method, c, p, files)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := faultAfter(fault); aerr != nil {
		return nil, aerr
	}
	return res, nil
}

// faultBeforeLocked is the answer of a fault that refuses a call before it is applied (nil for
// none); FaultMessageGone deletes the message and lets the call meet that.
func (s *Server) faultBeforeLocked(fault *Fault, chatID int64, p map[string]string) *apiError {
	if fault == nil {
		return nil
	}
	switch fault.Kind {
	case Fault5xx:
		return &apiError{code: 502, desc: "Bad Gateway"}
	case FaultEntitiesRejected:
		return badRequest("can't parse entities: Can't find end of the entity starting at byte offset 12")
	case FaultTooLong:
		return badRequest("message is too long")
	case FaultDraftRefused:
		return badRequest(draftsUnavailable)
	case FaultRichRefused:
		return badRequest(richUnavailable)
	case FaultMessageGone:
		if m := s.findLocked(chatID, atoi(p["message_id"])); m != nil {
			m.Deleted = true
		}
	}
	return nil
}

// faultAfter is the answer of a fault that strikes once the call was applied (nil for none).
func faultAfter(fault *Fault) *apiError {
	if fault == nil {
		return nil
	}
	switch fault.Kind {
	case FaultAppliedThen5xx:
		return &apiError{code: 502, desc: "Bad Gateway"}
	case FaultNotModified:
		return badRequest(notModified)
	}
	return nil
}

// notModified is Telegram's refusal of an edit that changes nothing.
const notModified = "message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

func (s *Server) takeFaultLocked(method string, chatID int64, p map[string]string) *Fault {
	for i, f := range s.faults {
		if f.Method != "" && f.Method != method {
			continue
		}
		if f.ChatID != 0 && f.ChatID != chatID {
			continue
		}
		if (f.Kind == FaultNotModified || f.Kind == FaultMessageGone) && method != "editMessageText" ||
			f.Kind == FaultTooLong && method != "sendMessage" && method != "editMessageText" ||
			f.Kind == FaultDraftRefused && method != "sendMessageDraft" ||
			f.Kind == FaultRichRefused && method != "sendRichMessage" && method != "sendRichMessageDraft" && p["rich_message"] == "" {
			continue
		}
		if f.Kind == FaultEntitiesRejected && p["entities"] == "" && p["parse_mode"] == "" && p["caption_entities"] == "" {
			continue
		}
		if f.Kind == Fault429 {
			if c := s.chats[chatID]; c != nil && c.blocked.After(time.Now()) {
				return nil // already blocked: the natural 429 answers
			}
		}
		f.Times--
		if f.Times <= 0 {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
		}
		return f
	}
	return nil
}

func (s *Server) tooManyLocked(retryAfter int) *apiError {
	if retryAfter < 1 {
		retryAfter = 1
	}
	return &apiError{code: 429, desc: fmt.Sprintf("Too Many Requests: retry after %d", retryAfter), retryAfter: retryAfter}
}

// paceLocked applies the chat's block, the per-chat bucket, the group window and the global
// window (the paid one for a paid broadcast); a request over any of them gets a 429 saying how
// long to wait.
func (s *Server) paceLocked(c *chatState, now time.Time, paid, draft bool) *apiError {
	if c.blocked.After(now) {
		return s.tooManyLocked(s.units(c.blocked.Sub(now)))
	}
	if s.opts.NoLimits {
		return nil
	}
	// Per chat: a bucket of PerChatBurst tokens refilled one per PerChatInterval; a draft's
	// bucket of DraftBurst refilled one per DraftInterval.
	tokens, refilled, burst, every := &c.tokens, &c.refilled, s.opts.PerChatBurst, s.opts.PerChatInterval
	if draft {
		tokens, refilled, burst, every = &c.draftTokens, &c.draftRefilled, s.opts.DraftBurst, s.opts.DraftInterval
	}
	elapsed := now.Sub(*refilled)
	*tokens = math.Min(float64(burst), *tokens+float64(elapsed)/float64(every))
	*refilled = now
	if *tokens < 1 {
		wait := time.Duration((1 - *tokens) * float64(every))
		return s.tooManyLocked(s.units(wait))
	}
	// Per group: GroupPerMinute in any minute.
	if c.chat.ID < 0 {
		c.groupHist = trimWindow(c.groupHist, now, time.Minute)
		if len(c.groupHist) >= s.opts.GroupPerMinute {
			return s.tooManyLocked(s.units(c.groupHist[0].Add(time.Minute).Sub(now)))
		}
	}
	window, limit := &s.global, s.opts.GlobalPerSecond
	if paid {
		window, limit = &s.paid, s.opts.PaidPerSecond
	}
	*window = trimWindow(*window, now, time.Second)
	if len(*window) >= limit {
		return s.tooManyLocked(1)
	}
	*tokens--
	if c.chat.ID < 0 {
		c.groupHist = append(c.groupHist, now)
	}
	*window = append(*window, now)
	return nil
}

// isDraft reports whether method shows a draft, which draws on the chat's draft bucket.
func isDraft(method string) bool {
	return method == "sendMessageDraft" || method == "sendRichMessageDraft"
}

// units converts a wait into whole retry_after seconds, rounded up.
func (s *Server) units(d time.Duration) int {
	return int(math.Ceil(float64(d) / float64(s.opts.RetryAfterUnit)))
}

func trimWindow(h []time.Time, now time.Time, win time.Duration) []time.Time {
	i := 0
	for i < len(h) && now.Sub(h[i]) >= win {
		i++
	}
	return h[i:]
}

// applyLocked carries out a counted call on chat c once it passed the budgets.
func (s *Server) applyLocked(method string, c *chatState, p map[string]string, files map[string]upload) (any, *apiError) {
	thread := atoi(p["message_thread_id"])
	switch method {
	case "sendMessage":
		return s.sendTextLocked(c, thread, p)
	case "editMessageText":
		return s.editTextLocked(c, p)
	case "editMessageReplyMarkup":
		return s.editMarkupLocked(c, p)
	case "sendPhoto", "sendDocument":
		return s.sendFileLocked(method, c, thread, p, files)
	case "sendVoice":
		return s.voiceLocked(c, thread, p, files)
	case "sendMessageDraft":
		return s.draftLocked(c, p)
	case "sendRichMessage":
		return s.richSendLocked(c, p)
	case "sendRichMessageDraft":
		return s.richDraftLocked(c, p)
	}
	return nil, &apiError{code: 404, desc: "Not Found"}
}

// sendTextLocked answers sendMessage, checking its text, entities and keyboard as Telegram does.
func (s *Server) sendTextLocked(c *chatState, thread int, p map[string]string) (any, *apiError) {
	text := p["text"]
	ents, aerr := s.checkText(text, p["entities"], p["parse_mode"])
	if aerr != nil {
		return nil, aerr
	}
	buttons, aerr := parseKeyboard(p["reply_markup"])
	if aerr != nil {
		return nil, aerr
	}
	m := s.newBotMessageLocked(c, thread, atoi(p["reply_to_message_id"]))
	m.Text, m.Entities, m.Buttons, m.ReplyMarkup = text, ents, buttons, p["reply_markup"]
	// A message from the bot ends the draft the chat showed.
	delete(s.drafts, c.chat.ID)
	return s.messageJSONLocked(m), nil
}

// editTextLocked answers editMessageText: only the bot's own text messages can be edited, and an
// edit that changes nothing is refused.
func (s *Server) editTextLocked(c *chatState, p map[string]string) (any, *apiError) {
	m := s.findLocked(c.chat.ID, atoi(p["message_id"]))
	if m == nil || m.Deleted {
		return nil, badRequest("message to edit not found")
	}
	if !m.FromBot {
		return nil, badRequest("message can't be edited")
	}
	if m.Kind != "text" {
		return nil, badRequest("there is no text in the message to edit")
	}
	if p["rich_message"] != "" && !s.opts.WithoutRich {
		return s.richEditLocked(m, p)
	}
	text := p["text"]
	ents, aerr := s.checkText(text, p["entities"], p["parse_mode"])
	if aerr != nil {
		return nil, aerr
	}
	buttons, aerr := parseKeyboard(p["reply_markup"])
	if aerr != nil {
		return nil, aerr
	}
	if text == m.Text && sameEntities(ents, m.Entities) && slices.Equal(buttons, m.Buttons) && p["reply_markup"] == m.ReplyMarkup {
		return nil, badRequest(notModified)
	}
	m.Text, m.Entities, m.Buttons, m.ReplyMarkup = text, ents, buttons, p["reply_markup"]
	m.Edits++
	return s.messageJSONLocked(m), nil
}

// editMarkupLocked answers editMessageReplyMarkup: only the bot's own messages, and a keyboard
// the message already shows is refused as "message is not modified", as Telegram does. No
// reply_markup takes the keyboard off.
func (s *Server) editMarkupLocked(c *chatState, p map[string]string) (any, *apiError) {
	m := s.findLocked(c.chat.ID, atoi(p["message_id"]))
	if m == nil || m.Deleted {
		return nil, badRequest("message to edit not found")
	}
	if !m.FromBot {
		return nil, badRequest("message can't be edited")
	}
	buttons, aerr := parseKeyboard(p["reply_markup"])
	if aerr != nil {
		return nil, aerr
	}
	if slices.Equal(buttons, m.Buttons) {
		return nil, badRequest(notModified)
	}
	m.Buttons, m.ReplyMarkup = buttons, p["reply_markup"]
	m.Edits++
	return s.messageJSONLocked(m), nil
}

// sendFileLocked answers sendPhoto and sendDocument.
func (s *Server) sendFileLocked(method string, c *chatState, thread int, p map[string]string, files map[string]upload) (any, *apiError) {
	field := "photo"
	if method == "sendDocument" {
		field = "document"
	}
	up, ok := files[field]
	if !ok {
		return nil, badRequest("there is no " + field + " in the request")
	}
	// Telegram refuses photos whose sides add up to more than 10,000 pixels or whose ratio
	// exceeds 20 (they are sent as documents instead); data it cannot read as an image is
	// taken as it is.
	if field == "photo" {
		if cfg, _, err := image.DecodeConfig(bytes.NewReader(up.data)); err == nil {
			w, h := cfg.Width, cfg.Height
			if w+h > 10000 || w > 20*h || h > 20*w {
				return nil, badRequest("PHOTO_INVALID_DIMENSIONS")
			}
		}
	}
	m := s.newBotMessageLocked(c, thread, atoi(p["reply_to_message_id"]))
	m.Kind, m.FileName, m.Data, m.Caption = field, up.name, up.data, p["caption"]
	return s.messageJSONLocked(m), nil
}

func (s *Server) newBotMessageLocked(c *chatState, thread, replyTo int) *Message {
	s.nextMsg[c.chat.ID]++
	m := &Message{
		ID: s.nextMsg[c.chat.ID], Chat: c.chat, ThreadID: thread, FromBot: true, Kind: "text",
		From: User{ID: s.opts.BotID, IsBot: true, FirstName: "Relay", Username: s.opts.BotUsername},
		Date: time.Now(), ReplyTo: replyTo,
	}
	c.msgs = append(c.msgs, m)
	return m
}

// checkText validates a text and its entities the way Telegram does.
func (s *Server) checkText(text, entities, parseMode string) ([]Entity, *apiError) {
	if strings.TrimSpace(text) == "" {
		return nil, badRequest("message text is empty")
	}
	n := len(utf16.Encode([]rune(text)))
	if n > s.opts.MaxTextLen {
		return nil, badRequest("message is too long")
	}
	if parseMode != "" {
		return nil, badRequest("can't parse entities: parse_mode is not supported by this test server")
	}
	if entities == "" {
		return nil, nil
	}
	var ents []Entity
	if err := json.Unmarshal([]byte(entities), &ents); err != nil {
		return nil, badRequest("can't parse entities JSON object")
	}
	for _, e := range ents {
		if e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > n {
			return nil, badRequest(fmt.Sprintf("can't parse entities: entity %s at %d+%d is outside the text of %d units", e.Type, e.Offset, e.Length, n))
		}
		switch e.Type {
		case "bold", "italic", "underline", "strikethrough", "spoiler", "code", "pre", "text_link", "blockquote", "expandable_blockquote":
		default:
			return nil, badRequest("can't parse entities: unsupported entity type " + e.Type)
		}
		if e.Type == "text_link" && e.URL == "" {
			return nil, badRequest("can't parse entities: text_link without url")
		}
	}
	return ents, nil
}

func sameEntities(a, b []Entity) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// webhookLoop posts pending updates to the webhook, with its secret token, while one is set;
// an update is confirmed when the bot answers 2xx.
func (s *Server) webhookLoop() {
	defer s.wg.Done()
	client := &http.Client{Timeout: 10 * time.Second}
	if s.opts.WebhookDial != nil {
		tr := &http.Transport{DialContext: s.opts.WebhookDial}
		defer tr.CloseIdleConnections()
		client.Transport = tr
	}
	for {
		s.mu.Lock()
		hook, secret := s.hook, s.secret
		var next json.RawMessage
		var id int64
		if hook != "" && len(s.updates) > 0 {
			next, id = s.updates[0], s.updateID[0]
		}
		s.mu.Unlock()
		if next == nil {
			select {
			case <-s.hookWake:
				continue
			case <-s.ctx.Done():
				return
			}
		}
		req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, hook, strings.NewReader(string(next)))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			if secret != "" {
				req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
			}
			var resp *http.Response
			resp, err = client.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					err = fmt.Errorf("webhook answered %s", resp.Status)
				}
			}
		}
		if err == nil {
			s.mu.Lock()
			if len(s.updateID) > 0 && s.updateID[0] == id {
				s.updates, s.updateID = s.updates[1:], s.updateID[1:]
			}
			s.mu.Unlock()
			continue
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			return
		}
	}
}
