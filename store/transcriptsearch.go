package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"gorm.io/gorm"

	"relaybot/chat"
)

// Limits of a search's words.
const (
	// MaxSearchWords is the most words of a search that are looked for; the others are dropped.
	MaxSearchWords = 12
	// maxSearchWordBytes drops longer words: nobody types them, and they only cost.
	maxSearchWordBytes = 64
	// minPrefixRunes is the shortest word looked for as a prefix ("deploy" finds "deployment");
	// a shorter one must be a whole word, so "a" does not match every word starting with a.
	minPrefixRunes = 3
)

// ErrNoSearchWords is returned for a search with no word in it (only punctuation, or nothing).
var ErrNoSearchWords = errors.New("the search has no word to look for (letters or digits)")

// SearchWords are the words a search looks for: runs of letters and digits, lower-cased, at most
// MaxSearchWords of them, duplicates dropped. The user's text is never passed to the database's
// query syntax: a message matches when it holds every word (a word of three letters or more as
// the start of a word).
func SearchWords(q string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if len(w) > maxSearchWordBytes || slices.Contains(out, w) {
			continue
		}
		out = append(out, w)
		if len(out) == MaxSearchWords {
			break
		}
	}
	return out
}

// ftsQuery is words as an FTS4 MATCH expression (every word; lower case, so never an operator).
func ftsQuery(words []string) string {
	parts := make([]string, len(words))
	for i, w := range words {
		parts[i] = w
		if len([]rune(w)) >= minPrefixRunes {
			parts[i] += "*"
		}
	}
	return strings.Join(parts, " ")
}

// tsQuery is words as a to_tsquery text for the 'simple' configuration (every word).
func tsQuery(words []string) string {
	parts := make([]string, len(words))
	for i, w := range words {
		parts[i] = w
		if len([]rune(w)) >= minPrefixRunes {
			parts[i] += ":*"
		}
	}
	return strings.Join(parts, " & ")
}

// hitRow is a found message as the search reads it; K is its id.
type hitRow struct {
	K, TurnID, ConversationID int64
	Role                      chat.Role
	Content                   string
	CreatedAt                 time.Time
	UserID, UserName          string
	Status                    chat.Status
}

// MessageHit is one message a search found, with where it was said.
type MessageHit struct {
	ID, TurnID, ConversationID int64
	Chat                       chat.Ref
	// Role is user (a member's message) or assistant (the bot's answer).
	Role chat.Role
	// UserID and UserName are the member whose turn it is.
	UserID, UserName string
	// Text is the message's text as saved; the caller redacts and cuts it.
	Text       string
	At         time.Time
	TurnStatus chat.Status
}

// SearchMessages finds the member messages and the bot's answers holding every word of q
// (SearchWords), in conversations and turns matching f, newest first, paged by message id. It
// returns ErrNoSearchWords (wrapped) when q has no word.
func (s *TranscriptQuery) SearchMessages(ctx context.Context, q string, f ConversationFilter, p Paging) (Page[MessageHit], error) {
	words := SearchWords(q)
	if len(words) == 0 {
		return Page[MessageHit]{}, fmt.Errorf("store: search messages: %w", ErrNoSearchWords)
	}
	if err := f.validate(); err != nil {
		return Page[MessageHit]{}, fmt.Errorf("store: search messages: %w", err)
	}
	base := func() *gorm.DB {
		db := f.where(s.r.WithContext(ctx).Table("messages m").Joins("JOIN turns t ON t.id = m.turn_id"))
		if s.driver == DriverPostgres {
			// The expression and the role condition are the index's (migration 00037), so the
			// planner can use it; OFFSET 0 keeps the subquery apart, so the hits come from the
			// index instead of a walk down the messages newest first testing each row's text (a
			// rare word took 3.8 s at 50,000 messages that way).
			return db.Where(`m.id IN (SELECT id FROM messages WHERE role IN ('user', 'assistant')
				AND to_tsvector('simple', content) @@ to_tsquery('simple', ?) OFFSET 0)`, tsQuery(words))
		}
		return db.Where("m.id IN (SELECT docid FROM messages_fts WHERE messages_fts MATCH ?)", ftsQuery(words))
	}
	var rows []hitRow
	q2 := base().Select("m.id AS k, m.turn_id, m.conversation_id, m.role, m.content, m.created_at, t.user_id, t.user_name, t.status")
	if err := p.page(q2, "m.id", false).Scan(&rows).Error; err != nil {
		return Page[MessageHit]{}, fmt.Errorf("store: search messages: %w", err)
	}
	page, err := pageOf(rows, p, func(r hitRow) int64 { return r.K }, func(op string, k int64) (bool, error) {
		var n int64
		err := base().Where("m.id "+op+" ?", k).Limit(1).Count(&n).Error
		return n > 0, err
	})
	if err != nil {
		return Page[MessageHit]{}, fmt.Errorf("store: search messages: %w", err)
	}
	convs := make([]int64, len(page.Items))
	for i, r := range page.Items {
		convs[i] = r.ConversationID
	}
	chats, err := (&TurnQuery{s.conn}).ConversationChats(ctx, convs)
	if err != nil {
		return Page[MessageHit]{}, fmt.Errorf("store: search messages: %w", err)
	}
	out := Page[MessageHit]{Older: page.Older, Newer: page.Newer, Items: make([]MessageHit, len(page.Items))}
	for i, r := range page.Items {
		out.Items[i] = MessageHit{ID: r.K, TurnID: r.TurnID, ConversationID: r.ConversationID, Chat: chats[r.ConversationID],
			Role: r.Role, UserID: r.UserID, UserName: r.UserName, Text: r.Content, At: r.CreatedAt.UTC(), TurnStatus: r.Status}
	}
	return out, nil
}
