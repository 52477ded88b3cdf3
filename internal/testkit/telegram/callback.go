package telegram

import (
	"encoding/json"
	"strconv"
)

// callbackState holds the button presses (callback queries) the server handed out, their
// answers, and who administers which chat (getChatMember).
type callbackState struct {
	answers map[string]CallbackAnswer
	admins  map[int64]map[int64]bool // chat → users with status "administrator"
}

// CallbackAnswer is the bot's answerCallbackQuery for one press.
type CallbackAnswer struct {
	Text      string
	ShowAlert bool
}

// Press injects a press of an inline keyboard button of bot message messageID in chat, by from,
// carrying data; it returns the callback query id.
func (s *Server) Press(chat Chat, from User, messageID int, data string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chatLocked(chat)
	s.cbSeq++
	id := "cb" + strconv.Itoa(s.cbSeq)
	q := map[string]any{"id": id, "from": from, "chat_instance": strconv.FormatInt(c.chat.ID, 10), "data": data}
	if m := s.findLocked(c.chat.ID, messageID); m != nil {
		q["message"] = s.messageJSONLocked(m)
	}
	s.lastUpd++
	raw, _ := json.Marshal(map[string]any{"update_id": s.lastUpd, "callback_query": q})
	s.updates = append(s.updates, raw)
	s.updateID = append(s.updateID, s.lastUpd)
	close(s.newUpd)
	s.newUpd = make(chan struct{})
	select {
	case s.hookWake <- struct{}{}:
	default:
	}
	return id
}

// Answer returns the bot's answer to press id, and false while there is none.
func (s *Server) Answer(id string) (CallbackAnswer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.cb.answers[id]
	return a, ok
}

// SetChatAdmin makes user an administrator of chat, as getChatMember reports it.
func (s *Server) SetChatAdmin(chat, user int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cb.admins == nil {
		s.cb.admins = map[int64]map[int64]bool{}
	}
	if s.cb.admins[chat] == nil {
		s.cb.admins[chat] = map[int64]bool{}
	}
	s.cb.admins[chat][user] = true
}

func (s *Server) chatMemberLocked(chatID int64, p map[string]string) (any, *apiError) {
	user, err := strconv.ParseInt(p["user_id"], 10, 64)
	if err != nil {
		return nil, badRequest("invalid user_id specified")
	}
	status := "member"
	if s.cb.admins[chatID][user] {
		status = "administrator"
	}
	return map[string]any{"status": status, "user": map[string]any{"id": user, "is_bot": false, "first_name": "u"}}, nil
}
