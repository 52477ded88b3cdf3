package telegram

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
)

// Button is one inline keyboard button that sends a callback query.
type Button struct {
	Text         string
	CallbackData string
	// URL is set on a link button (which has no callback data).
	URL string
}

// Draft is a message draft a bot streamed into a private chat with sendMessageDraft: an
// ephemeral preview that disappears when the bot sends a message (or after about 30 s, which
// the server does not model) unless the bot persists it with sendMessage.
type Draft struct {
	ChatID   int64
	ThreadID int
	ID       int64 // draft_id
	Text     string
	Entities []Entity
	// Rich is set for a rich draft (sendRichMessageDraft); Text then holds its text.
	Rich *RichMessage
	// CanStop shows the user a Stop button; pressing it (PressDraftStop) sends the bot a
	// stopped_message_generation update. KeepOnStop keeps the draft shown when pressed.
	CanStop, KeepOnStop bool
	Time                time.Time
}

// draftsUnavailable is the refusal of a draft where the bot may not stream drafts.
const draftsUnavailable = "sendMessageDraft is not available for this bot"

// Drafts returns every draft the bot showed in a chat, in order.
func (s *Server) Drafts(chatID int64) []Draft {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Draft
	for _, d := range s.draftLog {
		if d.ChatID == chatID {
			out = append(out, d)
		}
	}
	return out
}

// CurrentDraft returns the draft the chat shows now, if any.
func (s *Server) CurrentDraft(chatID int64) (Draft, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.drafts[chatID]
	if !ok {
		return Draft{}, false
	}
	return *d, true
}

// draftLocked answers sendMessageDraft the way the Bot API documents it: private chats only
// (live drafts can only be sent to users), draft_id non-zero, text of 0 to 4096 characters
// after entities parsing (empty, or only spaces, shows a "Thinking..." placeholder and takes no
// entities), can_stop and keep_on_stop optional. Each draft shown is kept with its time, as
// messages are.
func (s *Server) draftLocked(c *chatState, p map[string]string) (any, *apiError) {
	if s.opts.RefuseDrafts {
		return nil, badRequest(draftsUnavailable)
	}
	if c.chat.Type != "private" {
		return nil, badRequest("chat must be a private chat")
	}
	id, err := strconv.ParseInt(p["draft_id"], 10, 64)
	if err != nil || id == 0 {
		return nil, badRequest("draft_id must be non-zero")
	}
	text := p["text"]
	var ents []Entity
	if strings.TrimSpace(text) == "" {
		if e := p["entities"]; e != "" && e != "[]" {
			return nil, badRequest("can't parse entities: the text is empty")
		}
		text = ""
	} else {
		var aerr *apiError
		if ents, aerr = s.checkText(text, p["entities"], p["parse_mode"]); aerr != nil {
			return nil, aerr
		}
	}
	d := Draft{
		ChatID: c.chat.ID, ThreadID: atoi(p["message_thread_id"]), ID: id, Text: text, Entities: ents,
		CanStop: p["can_stop"] == "true", KeepOnStop: p["keep_on_stop"] == "true", Time: time.Now(),
	}
	s.drafts[c.chat.ID] = &d
	s.draftLog = append(s.draftLog, d)
	return true, nil
}

// PressDraftStop presses the Stop button of the draft the chat shows, as its user would: the
// bot gets a stopped_message_generation update naming the draft. It reports false when the
// chat shows no draft with a Stop button. Without keep_on_stop the draft disappears.
func (s *Server) PressDraftStop(chatID int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.drafts[chatID]
	c := s.chats[chatID]
	if !ok || !d.CanStop || c == nil {
		return false
	}
	obj := map[string]any{"chat": c.chat, "draft_id": d.ID}
	if d.ThreadID != 0 {
		obj["message_thread_id"] = d.ThreadID
	}
	if !d.KeepOnStop {
		delete(s.drafts, chatID)
	}
	s.pushUpdateLocked("stopped_message_generation", obj)
	return true
}

// PressButton presses an inline button of a bot message as user from would: the bot gets a
// callback_query update with the button's data. It returns the callback query's id, or an
// error when the message has no such button.
func (s *Server) PressButton(chatID int64, messageID int, from User, data string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.findLocked(chatID, messageID)
	if m == nil || m.Deleted {
		return "", fmt.Errorf("telegram testkit: message %d in chat %d not found", messageID, chatID)
	}
	found := false
	for _, b := range m.Buttons {
		found = found || b.CallbackData == data
	}
	if !found {
		return "", fmt.Errorf("telegram testkit: message %d shows no button with data %q", messageID, data)
	}
	s.cbSeq++
	id := "cb" + strconv.Itoa(s.cbSeq)
	s.pushUpdateLocked("callback_query", map[string]any{
		"id": id, "from": from, "message": s.messageJSONLocked(m),
		"chat_instance": strconv.FormatInt(chatID, 10), "data": data,
	})
	return id, nil
}

// CallbackAnswered reports whether the bot answered the callback query id
// (answerCallbackQuery), and the text it showed.
func (s *Server) CallbackAnswered(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	text, ok := s.answered[id]
	return text, ok
}

func (s *Server) answerCallbackLocked(p map[string]string) (any, *apiError) {
	id := p["callback_query_id"]
	if !strings.HasPrefix(id, "cb") {
		return nil, badRequest("query is too old and response timeout expired or query ID is invalid")
	}
	if _, done := s.answered[id]; done {
		return nil, badRequest("query is too old and response timeout expired or query ID is invalid")
	}
	if len(utf16.Encode([]rune(p["text"]))) > 200 {
		return nil, badRequest("text is too long")
	}
	s.answered[id] = p["text"]
	if s.cb.answers == nil {
		s.cb.answers = map[string]CallbackAnswer{}
	}
	s.cb.answers[id] = CallbackAnswer{Text: p["text"], ShowAlert: p["show_alert"] == "true"}
	return true, nil
}

// parseKeyboard reads an inline keyboard from reply_markup; empty means none. Callback data
// is limited to 64 bytes, as on Telegram.
func parseKeyboard(raw string) ([]Button, *apiError) {
	if raw == "" {
		return nil, nil
	}
	var mk struct {
		InlineKeyboard [][]struct {
			Text         string  `json:"text"`
			CallbackData *string `json:"callback_data"`
			URL          *string `json:"url"`
		} `json:"inline_keyboard"`
	}
	if err := json.Unmarshal([]byte(raw), &mk); err != nil {
		return nil, badRequest("can't parse reply keyboard markup JSON object")
	}
	var out []Button
	for _, row := range mk.InlineKeyboard {
		for _, b := range row {
			// A button is exactly one kind: a callback button or a link (url) button, as on
			// Telegram.
			if b.Text == "" || (b.CallbackData == nil) == (b.URL == nil) {
				return nil, badRequest("text buttons are unallowed in the inline keyboard")
			}
			if b.URL != nil {
				if u, err := url.Parse(*b.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "tg") || u.Host == "" {
					return nil, badRequest("BUTTON_URL_INVALID")
				}
				out = append(out, Button{Text: b.Text, URL: *b.URL})
				continue
			}
			if len(*b.CallbackData) < 1 || len(*b.CallbackData) > 64 {
				return nil, badRequest("BUTTON_DATA_INVALID")
			}
			out = append(out, Button{Text: b.Text, CallbackData: *b.CallbackData})
		}
	}
	return out, nil
}

func keyboardJSON(bs []Button) map[string]any {
	row := make([]map[string]any, len(bs))
	for i, b := range bs {
		row[i] = map[string]any{"text": b.Text, "callback_data": b.CallbackData}
		if b.URL != "" {
			row[i] = map[string]any{"text": b.Text, "url": b.URL}
		}
	}
	return map[string]any{"inline_keyboard": [][]map[string]any{row}}
}
