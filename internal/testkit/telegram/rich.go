package telegram

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// Rich message limits, as the Bot API documents them ("Rich Message Limits").
const (
	RichMaxChars   = 32768 // characters of text, markup not counted
	RichMaxBlocks  = 500   // blocks, nested ones, list items and table rows included
	RichMaxDepth   = 16    // nesting of blocks and formatting
	RichMaxColumns = 20    // cells in a table row
)

// richUnavailable is the refusal of a rich message where the bot may not send one.
const richUnavailable = "rich messages are not available in this chat"

// richTags are the tags of the Bot API's rich HTML ("Rich HTML style"); the server refuses any
// other. tg-thinking is accepted in drafts only (sendRichMessageDraft), as documented.
var richTags = map[string]bool{
	"b": true, "strong": true, "i": true, "em": true, "u": true, "ins": true, "s": true, "strike": true, "del": true,
	"code": true, "mark": true, "sub": true, "sup": true, "tg-spoiler": true, "tg-emoji": true, "tg-time": true,
	"tg-math": true, "a": true, "tg-reference": true,
	"h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true, "p": true, "pre": true, "footer": true,
	"hr": true, "ul": true, "ol": true, "li": true, "input": true, "blockquote": true, "aside": true,
	"details": true, "summary": true, "table": true, "caption": true, "tr": true, "th": true, "td": true,
	"tg-map": true, "tg-collage": true, "tg-slideshow": true, "tg-math-block": true,
	"img": true, "video": true, "audio": true, "figure": true, "figcaption": true, "cite": true,
}

var richBlocks = map[string]bool{"p": true, "h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true,
	"pre": true, "footer": true, "hr": true, "ul": true, "ol": true, "li": true, "blockquote": true, "aside": true,
	"details": true, "table": true, "tr": true, "tg-map": true, "tg-collage": true, "tg-slideshow": true,
	"tg-math-block": true, "img": true, "video": true, "audio": true, "figure": true, "tg-thinking": true}

var richVoid = map[string]bool{"hr": true, "input": true, "img": true}

// RichMessage is what a rich message shows: its HTML as sent and its text without markup.
type RichMessage struct {
	HTML string
	Text string
}

// Has reports whether the rich message holds an element named tag.
func (r RichMessage) Has(tag string) bool {
	return strings.Contains(r.HTML, "<"+tag+">") || strings.Contains(r.HTML, "<"+tag+" ")
}

// parseRich reads the rich_message parameter (InputRichMessage) the way the Bot API documents
// it: exactly one of html, markdown or blocks; this server takes html only and answers 400 for
// the others. The HTML must use the documented tags, close what it opens, and stay within the
// limits; thinking blocks are for drafts.
func parseRich(raw string, draft bool) (RichMessage, *apiError) {
	var in struct {
		HTML     *string          `json:"html"`
		Markdown *string          `json:"markdown"`
		Blocks   *json.RawMessage `json:"blocks"`
	}
	if raw == "" {
		return RichMessage{}, badRequest("rich_message is empty")
	}
	if err := json.Unmarshal([]byte(raw), &in); err != nil {
		return RichMessage{}, badRequest("can't parse InputRichMessage JSON object")
	}
	n := 0
	for _, set := range []bool{in.HTML != nil, in.Markdown != nil, in.Blocks != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return RichMessage{}, badRequest("exactly one of html, markdown or blocks must be specified")
	}
	if in.HTML == nil {
		return RichMessage{}, badRequest("rich message markdown and blocks are not supported by this test server")
	}
	text, aerr := checkRichHTML(*in.HTML, draft)
	if aerr != nil {
		return RichMessage{}, aerr
	}
	return RichMessage{HTML: *in.HTML, Text: text}, nil
}

// checkRichHTML validates h and returns its text.
func checkRichHTML(h string, draft bool) (string, *apiError) {
	z := html.NewTokenizer(strings.NewReader(h))
	var text strings.Builder
	var stack []string
	blocks, depth, cells := 0, 0, 0
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			if z.Err() != io.EOF {
				return "", badRequest("can't parse rich message: " + z.Err().Error())
			}
			if len(stack) > 0 {
				return "", badRequest("can't parse rich message: unclosed tag <" + stack[len(stack)-1] + ">")
			}
			t := strings.TrimSpace(text.String())
			switch {
			case t == "":
				return "", badRequest("rich message is empty")
			case utf8.RuneCountInString(t) > RichMaxChars:
				return "", badRequest("rich message text is too long")
			case blocks > RichMaxBlocks:
				return "", badRequest("can't parse rich message: too many blocks")
			case depth > RichMaxDepth:
				return "", badRequest("can't parse rich message: nesting is too deep")
			}
			return t, nil
		case html.TextToken:
			text.Write(z.Text())
		case html.StartTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			tag := string(name)
			if tag == "tg-thinking" && !draft {
				return "", badRequest("can't parse rich message: thinking blocks are allowed in drafts only")
			}
			if !richTags[tag] && tag != "tg-thinking" {
				return "", badRequest("can't parse rich message: unsupported start tag \"" + tag + "\"")
			}
			if richBlocks[tag] {
				blocks++
			}
			switch tag {
			case "tr":
				cells = 0
			case "th", "td":
				if cells++; cells > RichMaxColumns {
					return "", badRequest("can't parse rich message: too many table columns")
				}
			}
			if richBlocks[tag] && text.Len() > 0 && !strings.HasSuffix(text.String(), "\n") {
				text.WriteString("\n")
			}
			if tt == html.SelfClosingTagToken || richVoid[tag] {
				depth = max(depth, len(stack)+1)
				continue
			}
			stack = append(stack, tag)
			depth = max(depth, len(stack))
		case html.EndTagToken:
			name, _ := z.TagName()
			if len(stack) == 0 || stack[len(stack)-1] != string(name) {
				return "", badRequest("can't parse rich message: unexpected end tag \"" + string(name) + "\"")
			}
			stack = stack[:len(stack)-1]
		}
	}
}

// richSendLocked answers sendRichMessage: a new message showing the rich message; a message
// from the bot ends the chat's draft.
func (s *Server) richSendLocked(c *chatState, p map[string]string) (any, *apiError) {
	if s.opts.RefuseRich {
		return nil, badRequest(richUnavailable)
	}
	rich, aerr := parseRich(p["rich_message"], false)
	if aerr != nil {
		return nil, aerr
	}
	buttons, aerr := parseKeyboard(p["reply_markup"])
	if aerr != nil {
		return nil, aerr
	}
	replyTo := 0
	if rp := p["reply_parameters"]; rp != "" {
		var r struct {
			MessageID int `json:"message_id"`
		}
		if err := json.Unmarshal([]byte(rp), &r); err != nil {
			return nil, badRequest("can't parse reply parameters JSON object")
		}
		replyTo = r.MessageID
	}
	m := s.newBotMessageLocked(c, atoi(p["message_thread_id"]), replyTo)
	m.Rich = &rich
	m.Text, m.Buttons, m.ReplyMarkup = rich.Text, buttons, p["reply_markup"]
	delete(s.drafts, c.chat.ID)
	return s.messageJSONLocked(m), nil
}

// richEditLocked answers editMessageText with rich_message: the message shows the rich
// message from then on.
func (s *Server) richEditLocked(m *Message, p map[string]string) (any, *apiError) {
	if s.opts.RefuseRich {
		return nil, badRequest(richUnavailable)
	}
	if p["text"] != "" {
		return nil, badRequest("exactly one of text and rich_message must be specified")
	}
	rich, aerr := parseRich(p["rich_message"], false)
	if aerr != nil {
		return nil, aerr
	}
	buttons, aerr := parseKeyboard(p["reply_markup"])
	if aerr != nil {
		return nil, aerr
	}
	if m.Rich != nil && m.Rich.HTML == rich.HTML && p["reply_markup"] == m.ReplyMarkup {
		return nil, badRequest("message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")
	}
	m.Rich = &rich
	m.Text, m.Entities, m.Buttons, m.ReplyMarkup = rich.Text, nil, buttons, p["reply_markup"]
	m.Edits++
	return s.messageJSONLocked(m), nil
}

// richDraftLocked answers sendRichMessageDraft as sendMessageDraft, with a rich message
// (thinking blocks allowed) instead of text.
func (s *Server) richDraftLocked(c *chatState, p map[string]string) (any, *apiError) {
	if s.opts.RefuseRich {
		return nil, badRequest(richUnavailable)
	}
	if c.chat.Type != "private" {
		return nil, badRequest("chat must be a private chat")
	}
	id, err := strconv.ParseInt(p["draft_id"], 10, 64)
	if err != nil || id == 0 {
		return nil, badRequest("draft_id must be non-zero")
	}
	rich, aerr := parseRich(p["rich_message"], true)
	if aerr != nil {
		return nil, aerr
	}
	d := Draft{
		ChatID: c.chat.ID, ThreadID: atoi(p["message_thread_id"]), ID: id, Text: rich.Text, Rich: &rich,
		CanStop: p["can_stop"] == "true", KeepOnStop: p["keep_on_stop"] == "true", Time: time.Now(),
	}
	s.drafts[c.chat.ID] = &d
	s.draftLog = append(s.draftLog, d)
	return true, nil
}
