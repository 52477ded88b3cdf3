package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"relaybot/audit"
	"relaybot/chat"
)

// TranscriptQuery reads conversations as their members saw them, across platforms and chats: the
// list, full-text search over what members asked and the bot answered, and one conversation's
// turns with their messages and tool calls (decision 053). It only reads; the index it searches
// is kept in step with the messages table by the database itself (migration 00037).
type TranscriptQuery struct{ *conn }

// Outcome is how a conversation's turn ended, as the conversations list filters it.
type Outcome string

// The outcomes a filter takes.
const (
	// OutcomeAnswered is a turn that ended ok.
	OutcomeAnswered Outcome = "answered"
	// OutcomeStopped is a turn stopped before its end (/stop, a newer message that interrupts).
	OutcomeStopped Outcome = "stopped"
	// OutcomeFailed is a turn that ended in an error (the model's failure included) or was cut
	// off by the process ending.
	OutcomeFailed Outcome = "failed"
)

// Outcomes lists every outcome.
var Outcomes = []Outcome{OutcomeAnswered, OutcomeStopped, OutcomeFailed}

// Valid reports whether o is one of Outcomes.
func (o Outcome) Valid() bool { return slices.Contains(Outcomes, o) }

// statuses are the turn statuses an outcome stands for.
func (o Outcome) statuses() []chat.Status {
	switch o {
	case OutcomeAnswered:
		return []chat.Status{chat.StatusOK}
	case OutcomeStopped:
		return []chat.Status{chat.StatusCancelled}
	case OutcomeFailed:
		return []chat.Status{chat.StatusError, chat.StatusInterrupted}
	}
	return nil
}

// OutcomeOf is the outcome of a turn that ended with status; "" for a running or retried one.
func OutcomeOf(status chat.Status) Outcome {
	for _, o := range Outcomes {
		if slices.Contains(o.statuses(), status) {
			return o
		}
	}
	return ""
}

// ConversationFilter selects conversations by their chat and by their turns: a conversation
// matches when one of its turns does. Zero fields do not filter.
type ConversationFilter struct {
	// Chat keeps one platform, chat or thread (as TurnFilter.Chat).
	Chat chat.Ref
	// Person keeps the turns of one person: their platform user id or the name they had.
	Person string
	// Since and Until bound when the turn started.
	Since, Until time.Time
	// Outcome keeps the turns that ended so.
	Outcome Outcome
}

func (f ConversationFilter) validate() error {
	if f.Outcome != "" && !f.Outcome.Valid() {
		return fmt.Errorf("unknown outcome %q (want answered, stopped or failed)", f.Outcome)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return fmt.Errorf("since %s is not before until %s", f.Since.Format(time.RFC3339), f.Until.Format(time.RFC3339))
	}
	return nil
}

// where adds f's conditions on the turns aliased t to db.
func (f ConversationFilter) where(db *gorm.DB) *gorm.DB {
	if !f.Since.IsZero() {
		db = db.Where("t.started_at >= ?", dbTime(f.Since))
	}
	if !f.Until.IsZero() {
		db = db.Where("t.started_at < ?", dbTime(f.Until))
	}
	if f.Outcome != "" {
		db = db.Where("t.status IN ?", f.Outcome.statuses())
	}
	if p := strings.TrimSpace(f.Person); p != "" {
		db = db.Where("(t.user_id = ? OR t.user_name = ?)", p, p)
	}
	if f.Chat != (chat.Ref{}) {
		convs := db.Session(&gorm.Session{NewDB: true}).Table("conversations").Select("id")
		for _, e := range []struct{ col, v string }{{"platform", string(f.Chat.Platform)},
			{"chat_id", f.Chat.ChatID}, {"thread_id", f.Chat.ThreadID}} {
			if e.v != "" {
				convs = convs.Where(e.col+" = ?", e.v)
			}
		}
		db = db.Where("t.conversation_id IN (?)", convs)
	}
	return db
}

// Limits of one page of conversations, search hits or a conversation's turns.
const (
	DefaultTranscriptPage = 50
	MaxTranscriptPage     = 200
)

// Paging is a page of a list ordered newest first by a key (a turn or message id): Before keeps
// keys below it (an older page), After keys above it and From keys from it on (a newer page; the
// page is still newest first). Limit is DefaultTranscriptPage when not positive,
// MaxTranscriptPage at most.
type Paging struct {
	Before, After, From int64
	Limit               int
}

// forward reports whether the page is read upwards from its cursor (After or From).
func (p Paging) forward() bool { return p.After > 0 || p.From > 0 }

func (p Paging) limit() int {
	if p.Limit <= 0 {
		return DefaultTranscriptPage
	}
	return min(p.Limit, MaxTranscriptPage)
}

// page orders db by key newest first within p, asking one row more than the page holds (so
// the caller knows whether the page has a further one).
func (p Paging) page(db *gorm.DB, key string, having bool) *gorm.DB {
	cond := db.Where
	if having {
		cond = db.Having
	}
	switch {
	case p.From > 0:
		return cond(key+" >= ?", p.From).Order(key + " ASC").Limit(p.limit() + 1)
	case p.After > 0:
		return cond(key+" > ?", p.After).Order(key + " ASC").Limit(p.limit() + 1)
	case p.Before > 0:
		return cond(key+" < ?", p.Before).Order(key + " DESC").Limit(p.limit() + 1)
	}
	return db.Order(key + " DESC").Limit(p.limit() + 1)
}

// trim cuts rows (read by page) to the page, newest first, and says whether there are rows
// beyond it in the direction it was read.
func trim[T any](rows []T, p Paging) ([]T, bool) {
	more := len(rows) > p.limit()
	if more {
		rows = rows[:p.limit()]
	}
	if p.forward() {
		slices.Reverse(rows)
	}
	return rows, more
}

// Page is one page of a list newest first: Older and Newer are the Before and After of the
// pages beside it, 0 when there is none.
type Page[T any] struct {
	Items        []T
	Older, Newer int64
}

// pageOf makes the page of rows read with p, key giving each row's key. exists probes whether a
// row's key compares with k as op ("<" or ">") says: a newer page than one read with Before, an
// older one than one read with From (a page read with After has one: the row its cursor came
// from).
func pageOf[T any](rows []T, p Paging, key func(T) int64, exists func(op string, k int64) (bool, error)) (Page[T], error) {
	rows, more := trim(rows, p)
	out := Page[T]{Items: rows}
	if len(rows) == 0 {
		return out, nil
	}
	first, last := key(rows[0]), key(rows[len(rows)-1])
	switch {
	case p.forward():
		if more {
			out.Newer = first
		}
		out.Older = last
		if p.From > 0 {
			ok, err := exists("<", last)
			if err != nil {
				return Page[T]{}, err
			}
			if !ok {
				out.Older = 0
			}
		}
	default:
		if more {
			out.Older = last
		}
		if p.Before > 0 {
			ok, err := exists(">", first)
			if err != nil {
				return Page[T]{}, err
			}
			if ok {
				out.Newer = first
			}
		}
	}
	return out, nil
}

// TranscriptMessage is one saved message of a turn, with its id (a search hit's anchor).
type TranscriptMessage struct {
	ID int64
	chat.Message
}

// TranscriptTurn is one turn of a conversation: the turn, its saved messages in order (the
// member's message first) and its tool calls as the audit log keeps them (redacted when written,
// and a forgotten memory's words gone).
type TranscriptTurn struct {
	Turn
	Messages []TranscriptMessage
	Calls    []audit.Record
	// Files are what the member sent and the bot sent in the turn (without their bytes:
	// TranscriptQuery.TurnFile reads them).
	Files []TurnFile
}

// Transcript is one conversation and a page of its turns, oldest first.
type Transcript struct {
	Conversation ListedConversation
	Turns        []TranscriptTurn
	// Earlier and Later are the Before and After of the pages of turns beside this one, 0 when
	// there is none.
	Earlier, Later int64
}

// Transcript reads conversation id and a page of its turns: by default the newest ones; with
// p.Before those before that turn, with p.After those after it. It returns ErrNotFound
// (wrapped) when the conversation does not exist.
func (s *TranscriptQuery) Transcript(ctx context.Context, id int64, p Paging) (Transcript, error) {
	byID, err := s.describe(ctx, []int64{id})
	if err != nil {
		return Transcript{}, fmt.Errorf("store: conversation %d: %w", id, err)
	}
	conv, ok := byID[id]
	if !ok {
		return Transcript{}, fmt.Errorf("store: conversation %d: %w", id, ErrNotFound)
	}
	db := s.r.WithContext(ctx)
	var rows []turnRow
	q := db.Model(&turnRow{}).Select(tracedTurnColumns).Where("conversation_id = ?", id)
	if err := p.page(q, "id", false).Find(&rows).Error; err != nil {
		return Transcript{}, fmt.Errorf("store: conversation %d: %w", id, err)
	}
	page, err := pageOf(rows, p, func(r turnRow) int64 { return r.ID }, func(op string, k int64) (bool, error) {
		var n int64
		err := db.Model(&turnRow{}).Where("conversation_id = ? AND id "+op+" ?", id, k).Limit(1).Count(&n).Error
		return n > 0, err
	})
	if err != nil {
		return Transcript{}, fmt.Errorf("store: conversation %d: %w", id, err)
	}
	slices.Reverse(page.Items) // read newest first, shown oldest first
	out := Transcript{Conversation: conv, Earlier: page.Older, Later: page.Newer}
	if err := s.fillTurns(ctx, &out, page.Items); err != nil {
		return Transcript{}, fmt.Errorf("store: conversation %d: %w", id, err)
	}
	return out, nil
}

// fillTurns adds turns to t with their messages and tool calls.
func (s *TranscriptQuery) fillTurns(ctx context.Context, t *Transcript, turns []turnRow) error {
	if len(turns) == 0 {
		return nil
	}
	ids := make([]int64, len(turns))
	at := map[int64]int{}
	for i, r := range turns {
		ids[i], at[r.ID] = r.ID, i
		t.Turns = append(t.Turns, TranscriptTurn{Turn: r.public()})
	}
	db := s.r.WithContext(ctx)
	var msgs []messageRow
	if err := db.Where("turn_id IN ?", ids).Order("turn_id, seq").Find(&msgs).Error; err != nil {
		return err
	}
	for _, m := range msgs {
		pm, err := m.public()
		if err != nil {
			return err
		}
		tt := &t.Turns[at[m.TurnID]]
		tt.Messages = append(tt.Messages, TranscriptMessage{ID: m.ID, Message: pm})
	}
	var calls []toolCallModel
	if err := db.Where("turn_id IN ?", ids).Order("id").Find(&calls).Error; err != nil {
		return err
	}
	for _, c := range calls {
		tt := &t.Turns[at[c.TurnID]]
		tt.Calls = append(tt.Calls, c.record())
	}
	files, err := s.filesOf(ctx, ids)
	if err != nil {
		return err
	}
	for id, fs := range files {
		t.Turns[at[id]].Files = fs
	}
	return nil
}
