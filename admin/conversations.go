package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/internal/ellipsis"
	"relaybot/store"
	"relaybot/tools"
)

// Transcripts reads conversations across chats as their members saw them, and searches what
// they asked and the bot answered (*store.TranscriptQuery).
type Transcripts interface {
	Conversations(ctx context.Context, f store.ConversationFilter, p store.Paging) (store.Page[store.ListedConversation], error)
	SearchMessages(ctx context.Context, q string, f store.ConversationFilter, p store.Paging) (store.Page[store.MessageHit], error)
	Transcript(ctx context.Context, id int64, p store.Paging) (store.Transcript, error)
	TurnFile(ctx context.Context, turnID int64, seq int) (store.TurnFile, error)
}

// conversationParams are the query parameters of the conversations list, its search and API.
var conversationParams = []string{"q", "platform", "chat", "person", "status", "since", "until", "limit", "before", "after"}

// Cuts of what a list shows of a message.
const (
	openingRunes = 120 // a conversation's first message in the list
	hitRunes     = 240 // a found message's excerpt
)

// conversationsQuery is a parsed conversations request: the words searched for (none: the
// list), the filter and the page.
type conversationsQuery struct {
	text   string
	filter store.ConversationFilter
	page   store.Paging
}

// parseConversations reads the conversations filter: q (words to search for), platform, chat
// (a chat as the pages print it, chat.ParseRef's form, or a bare id beside platform), person (a
// platform user id or a name), status (answered, stopped or failed), since and until (as the
// audit filter), limit, and before or after (the key the page continues from).
func parseConversations(q url.Values, now time.Time) (conversationsQuery, error) {
	var c conversationsQuery
	for key := range q {
		if !slices.Contains(conversationParams, key) {
			return c, fmt.Errorf("unknown parameter %q (want one of %s)", key, strings.Join(conversationParams, ", "))
		}
	}
	c.text = strings.TrimSpace(q.Get("q"))
	if c.text != "" && len(store.SearchWords(c.text)) == 0 {
		return c, fmt.Errorf("q: %w", store.ErrNoSearchWords)
	}
	ref, err := chat.FilterRef(q.Get("platform"), q.Get("chat"))
	if err != nil {
		return c, fmt.Errorf("chat: %w", err)
	}
	c.filter.Chat = ref
	c.filter.Person = strings.TrimSpace(q.Get("person"))
	if v := store.Outcome(strings.TrimSpace(q.Get("status"))); v != "" {
		if !v.Valid() {
			return c, fmt.Errorf("status %q is not one of %s", v, joinValues(store.Outcomes))
		}
		c.filter.Outcome = v
	}
	if c.filter.Since, err = audit.ParseSince(q.Get("since"), now); err != nil {
		return c, fmt.Errorf("since: %w", err)
	}
	if c.filter.Until, err = audit.ParseSince(q.Get("until"), now); err != nil {
		return c, fmt.Errorf("until: %w", err)
	}
	if !c.filter.Since.IsZero() && !c.filter.Until.IsZero() && !c.filter.Since.Before(c.filter.Until) {
		return c, fmt.Errorf("since %s is not before until %s", c.filter.Since.Format(time.RFC3339), c.filter.Until.Format(time.RFC3339))
	}
	c.page, err = parsePaging(q)
	return c, err
}

// parsePaging reads limit, before, after and from (a conversation's page starting at a turn).
func parsePaging(q url.Values) (store.Paging, error) {
	var p store.Paging
	if v := strings.TrimSpace(q.Get("limit")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > store.MaxTranscriptPage {
			return p, fmt.Errorf("limit %q is not a number from 1 to %d", v, store.MaxTranscriptPage)
		}
		p.Limit = n
	}
	for _, e := range []struct {
		name string
		to   *int64
	}{{"before", &p.Before}, {"after", &p.After}, {"from", &p.From}} {
		if v := strings.TrimSpace(q.Get(e.name)); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return p, fmt.Errorf("%s %q is not an id from a page link (a positive number)", e.name, v)
			}
			*e.to = n
		}
	}
	if (p.Before > 0 && p.After > 0) || (p.From > 0 && p.Before+p.After > 0) {
		return p, errors.New("before, after and from: a page continues one way only")
	}
	return p, nil
}

// conversationJSON is a listed conversation in the API's answer.
type conversationJSON struct {
	ID          int64     `json:"id"`
	Chat        string    `json:"chat"`
	Platform    string    `json:"platform"`
	ChatID      string    `json:"chat_id"`
	ThreadID    string    `json:"thread_id"`
	UserID      string    `json:"user_id"`
	Active      bool      `json:"active"`
	CreatedAt   time.Time `json:"created_at"`
	LastAt      time.Time `json:"last_at"`
	Turns       int       `json:"turns"`
	Answered    int       `json:"answered"`
	Stopped     int       `json:"stopped"`
	Failed      int       `json:"failed"`
	FirstTurnID int64     `json:"first_turn_id"`
	LastTurnID  int64     `json:"last_turn_id"`
	People      []string  `json:"people"`
	// Opening is the first member message, redacted and cut.
	Opening string `json:"opening"`
	URL     string `json:"url"`
}

func toConversationJSON(c store.ListedConversation) conversationJSON {
	people := c.People
	if people == nil {
		people = []string{}
	}
	return conversationJSON{ID: c.ID, Chat: c.Chat.String(), Platform: string(c.Chat.Platform), ChatID: c.Chat.ChatID,
		ThreadID: c.Chat.ThreadID, UserID: c.UserID, Active: c.Active, CreatedAt: c.CreatedAt, LastAt: c.LastAt,
		Turns: c.Turns, Answered: c.Answered, Stopped: c.Stopped, Failed: c.Failed, FirstTurnID: c.FirstTurnID,
		LastTurnID: c.LastTurnID, People: people, Opening: openingOf(c.Opening), URL: conversationURL(c.ID)}
}

// hitJSON is a found message in the API's answer.
type hitJSON struct {
	MessageID      int64       `json:"message_id"`
	TurnID         int64       `json:"turn_id"`
	ConversationID int64       `json:"conversation_id"`
	Chat           string      `json:"chat"`
	Role           chat.Role   `json:"role"`
	UserID         string      `json:"user_id"`
	UserName       string      `json:"user_name"`
	At             time.Time   `json:"at"`
	TurnStatus     chat.Status `json:"turn_status"`
	// Text is an excerpt around the first word found, redacted.
	Text string `json:"text"`
	URL  string `json:"url"`
}

func toHitJSON(h store.MessageHit, words []string) hitJSON {
	return hitJSON{MessageID: h.ID, TurnID: h.TurnID, ConversationID: h.ConversationID, Chat: h.Chat.String(),
		Role: h.Role, UserID: h.UserID, UserName: h.UserName, At: h.At, TurnStatus: h.TurnStatus,
		Text: excerpt(tools.RedactText(h.Text), words, hitRunes), URL: hitURL(h)}
}

// conversationURL is the page of one conversation.
func conversationURL(id int64) string { return "/admin/conversations/" + strconv.FormatInt(id, 10) }

// hitURL is the conversation page at a found message: the page of turns starting with its turn
// (from), scrolled to the message.
func hitURL(h store.MessageHit) string {
	return conversationURL(h.ConversationID) + "?" + url.Values{"from": {strconv.FormatInt(h.TurnID, 10)}}.Encode() +
		"#m" + strconv.FormatInt(h.ID, 10)
}

// openingOf is a conversation's first message as a list shows it: redacted, on one line, cut.
func openingOf(text string) string {
	q, _ := splitAttachments(tools.RedactText(text))
	return ellipsis.Cut(strings.Join(strings.Fields(q), " "), openingRunes)
}

// pageKeys are the before and after values of the pages beside p, as strings ("" when none).
func pageKeys[T any](p store.Page[T]) (older, newer string) {
	if p.Older > 0 {
		older = strconv.FormatInt(p.Older, 10)
	}
	if p.Newer > 0 {
		newer = strconv.FormatInt(p.Newer, 10)
	}
	return older, newer
}

// apiConversations answers GET /api/v1/conversations: conversations across chats, the one spoken
// in last first, filtered as the page is; older and newer are the before and after values of
// the pages beside this one, empty when there is none.
func (s *Server) apiConversations(w http.ResponseWriter, r *http.Request) {
	q, err := parseConversations(r.URL.Query(), s.now())
	if err == nil && q.text != "" {
		err = errors.New("q: search at /api/v1/conversations/search")
	}
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, err.Error())
		return
	}
	page, err := s.opts.Store.Transcripts.Conversations(r.Context(), q.filter, q.page)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	items := make([]conversationJSON, len(page.Items))
	for i, c := range page.Items {
		items[i] = toConversationJSON(c)
	}
	older, newer := pageKeys(page)
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "older": older, "newer": newer})
}

// apiSearchConversations answers GET /api/v1/conversations/search?q=: the messages members
// wrote and the bot answered holding every word of q, newest first, filtered as the list is.
func (s *Server) apiSearchConversations(w http.ResponseWriter, r *http.Request) {
	q, err := parseConversations(r.URL.Query(), s.now())
	if err == nil && q.text == "" {
		err = errors.New("q: give the words to search for")
	}
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, err.Error())
		return
	}
	page, err := s.opts.Store.Transcripts.SearchMessages(r.Context(), q.text, q.filter, q.page)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	words := store.SearchWords(q.text)
	items := make([]hitJSON, len(page.Items))
	for i, h := range page.Items {
		items[i] = toHitJSON(h, words)
	}
	older, newer := pageKeys(page)
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "older": older, "newer": newer, "words": words})
}
