package telegram

import (
	"fmt"
	"slices"
	"unicode/utf8"
)

// maxTopicName is the longest forum topic name the Bot API takes, in characters.
const maxTopicName = 128

// notAForum is Telegram's refusal of a topic in a chat without topics: a group that is no
// forum, or a private chat with a bot that has no topics there.
const notAForum = "the chat is not a forum"

// Topics returns the names of the topics a bot opened in a chat, by thread id; topics users
// wrote in without the bot opening them are not listed.
func (s *Server) Topics(chatID int64) map[int]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]string{}
	if c := s.chats[chatID]; c != nil {
		for id, name := range c.topicNames {
			out[id] = name
		}
	}
	return out
}

// PrivateTopics reports whether the bot has topics in private chats now (getMe's
// has_topics_enabled): Options.PrivateTopics, or turned on by setMySettings.
func (s *Server) PrivateTopics() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.privateTopics
}

// topicsLocked reports whether chat c has topics: a forum supergroup, or a private chat with a
// bot that has topics in private chats.
func (s *Server) topicsLocked(c *chatState) bool {
	return c.chat.IsForum || c.chat.Type == "private" && s.privateTopics
}

// topicName checks a topic name as the Bot API does: 1-128 characters (0 on edits keeps it).
func topicName(name string, edit bool) *apiError {
	n := utf8.RuneCountInString(name)
	if n > maxTopicName || n == 0 && !edit {
		return badRequest(fmt.Sprintf("TOPIC_NAME_INVALID: the name must be 1-%d characters, got %d", maxTopicName, n))
	}
	return nil
}

// topicMethodLocked answers createForumTopic and editForumTopic (ok false for other methods):
// a topic only in a chat with topics, named 1-128 characters; its id is a message id of the
// chat, as the topic's first (service) message has on Telegram.
func (s *Server) topicMethodLocked(method string, c *chatState, p map[string]string) (res any, aerr *apiError, ok bool) {
	switch method {
	case "createForumTopic":
		if !s.topicsLocked(c) {
			return nil, badRequest(notAForum), true
		}
		if aerr := topicName(p["name"], false); aerr != nil {
			return nil, aerr, true
		}
		s.nextMsg[c.chat.ID]++
		id := s.nextMsg[c.chat.ID]
		if c.topics == nil {
			c.topics = map[int]bool{}
		}
		if c.topicNames == nil {
			c.topicNames = map[int]string{}
		}
		c.topics[id], c.topicNames[id] = true, p["name"]
		return map[string]any{"message_thread_id": id, "name": p["name"], "icon_color": 7322096}, nil, true
	case "editForumTopic":
		if !s.topicsLocked(c) {
			return nil, badRequest(notAForum), true
		}
		id := atoi(p["message_thread_id"])
		if !c.topics[id] {
			return nil, badRequest("TOPIC_ID_INVALID"), true
		}
		if aerr := topicName(p["name"], true); aerr != nil {
			return nil, aerr, true
		}
		if p["name"] != "" {
			if c.topicNames == nil {
				c.topicNames = map[int]string{}
			}
			c.topicNames[id] = p["name"]
		}
		return true, nil, true
	}
	return nil, nil, false
}

// settingsParams are setMySettings' parameters (Bot API 10.5).
var settingsParams = []string{"supports_inline_queries", "inline_query_placeholder", "needs_inline_query_location",
	"inline_feedback_share_denominator", "can_join_groups", "can_read_all_group_messages", "can_connect_to_business",
	"can_manage_bots", "supports_guest_queries", "supports_join_request_queries", "has_topics_enabled",
	"allows_users_to_create_topics", "has_topic_sidebar", "can_communicate_with_bots", "callback_query_mode"}

// setMySettingsLocked answers setMySettings: has_topics_enabled turns topics in private chats on
// or off; the other settings are taken and not kept. A server older than Bot API 10.5
// (Options.WithoutSettings) answers 404 Not Found.
func (s *Server) setMySettingsLocked(p map[string]string) (any, *apiError) {
	if s.opts.WithoutSettings {
		return nil, &apiError{code: 404, desc: "Not Found"}
	}
	for k := range p {
		if !slices.Contains(settingsParams, k) {
			return nil, badRequest("unknown parameter " + k + " of setMySettings")
		}
	}
	switch p["has_topics_enabled"] {
	case "true":
		s.privateTopics = true
	case "false":
		s.privateTopics = false
	case "":
	default:
		return nil, badRequest("has_topics_enabled must be a Boolean")
	}
	return true, nil
}

// SetPrivateTopics turns the bot's topics in private chats on or off, as its owner does in
// BotFather.
func (s *Server) SetPrivateTopics(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.privateTopics = on
}
