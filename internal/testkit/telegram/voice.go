package telegram

import (
	"slices"

	"relaybot/internal/testkit/files"
)

// voiceParams are the parameters of sendVoice the Bot API documents, and the legacy reply
// parameters it still takes.
var voiceParams = []string{"business_connection_id", "chat_id", "message_thread_id", "direct_messages_topic_id",
	"voice", "caption", "parse_mode", "caption_entities", "duration", "disable_notification", "protect_content",
	"allow_paid_broadcast", "message_effect_id", "suggested_post_parameters", "reply_parameters", "reply_markup",
	"reply_to_message_id", "allow_sending_without_reply"}

// voiceLocked answers sendVoice: an uploaded OGG/Opus file (the server checks its pages) under
// the field "voice", and only documented parameters.
func (s *Server) voiceLocked(c *chatState, thread int, p map[string]string, uploads map[string]upload) (any, *apiError) {
	for k := range p {
		if !slices.Contains(voiceParams, k) {
			return nil, badRequest("unknown parameter " + k)
		}
	}
	for k := range uploads {
		if k != "voice" {
			return nil, badRequest("unexpected file " + k)
		}
	}
	up, ok := uploads["voice"]
	if !ok {
		return nil, badRequest("there is no voice in the request")
	}
	if err := files.CheckOgg(up.data); err != nil {
		return nil, badRequest("voice must be an OGG file encoded with OPUS: " + err.Error())
	}
	m := s.newBotMessageLocked(c, thread, atoi(p["reply_to_message_id"]))
	m.Kind, m.FileName, m.Data, m.Caption = "voice", up.name, up.data, p["caption"]
	return s.messageJSONLocked(m), nil
}
