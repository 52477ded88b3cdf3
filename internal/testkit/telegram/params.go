package telegram

import "slices"

// documentedParams are the parameters the Bot API documents for the methods the server checks
// strictly, with the legacy ones it still takes (disable_web_page_preview). A call carrying any
// other is refused, as a strict emulator refuses it: allow_paid_broadcast, which only the
// methods that send a message take, is not a parameter of editMessageText or sendMessageDraft.
var documentedParams = map[string][]string{
	"editMessageText": {"business_connection_id", "chat_id", "message_id", "inline_message_id", "text", "parse_mode",
		"entities", "link_preview_options", "reply_markup", "rich_message", "disable_web_page_preview"},
	"editMessageReplyMarkup": {"business_connection_id", "chat_id", "message_id", "inline_message_id", "reply_markup"},
	"sendMessageDraft":       {"chat_id", "message_thread_id", "draft_id", "text", "parse_mode", "entities", "can_stop", "keep_on_stop"},
}

// undocumentedParam refuses a call of a strictly checked method that carries a parameter the
// Bot API does not document for it (nil when there is none, or the method is not checked).
func undocumentedParam(method string, p map[string]string) *apiError {
	known, ok := documentedParams[method]
	if !ok {
		return nil
	}
	for k := range p {
		if !slices.Contains(known, k) {
			return badRequest("unknown parameter " + k + " of " + method)
		}
	}
	return nil
}
