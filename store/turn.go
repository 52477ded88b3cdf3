package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"relaybot/audit"
	"relaybot/chat"
	"sync"
	"time"

	"gorm.io/gorm"
)

// Roles of messages: chat.Roles, named here for the store's callers.
const (
	RoleSystem    = chat.RoleSystem
	RoleUser      = chat.RoleUser
	RoleAssistant = chat.RoleAssistant
	RoleTool      = chat.RoleTool
)

// Turn statuses: chat.Statuses, named here for the store's callers.
const (
	TurnRunning     = chat.StatusRunning
	TurnOK          = chat.StatusOK
	TurnError       = chat.StatusError
	TurnCancelled   = chat.StatusCancelled
	TurnInterrupted = chat.StatusInterrupted
	// TurnRetried: the turn was answered again (/retry); it stays in the audit trail but leaves
	// the history.
	TurnRetried = chat.StatusRetried
)

// toolCallJSON is a tool call as the messages.tool_calls column keeps it (a JSON list).
type toolCallJSON struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	// Extra is the provider's JSON object of the call, kept as a string in the column.
	Extra string `json:"extra,omitempty"`
}

// TurnStart opens a turn.
type TurnStart struct {
	// ID is the turn's id when NewTurnID gave it one before its row is written; 0 lets the
	// database choose.
	ID               int64
	ConversationID   int64
	UserID           string
	UserName         string
	InboundMessageID string
	// UserMessage is saved at once, so a crash never loses what the user said.
	UserMessage chat.Message
	// StartedAt is when the turn began; zero means when it is written.
	StartedAt time.Time
}

// TurnEnd closes a turn.
type TurnEnd struct {
	TurnID int64
	// QuotaChatID is the chat whose chat quota the turn's calls count against, when it is not
	// the conversation's own (a Discord thread's parent channel).
	QuotaChatID string
	// Status is TurnOK, TurnError, TurnCancelled or TurnInterrupted.
	Status    chat.Status
	Model     string
	Rounds    int
	TokensIn  int
	TokensOut int
	Error     string
	// Failure is why a failed turn got no answer from the model (a TurnError only); a turn with
	// one leaves the conversation's history (Rounds) but stays in the audit trail.
	Failure chat.Failure
	// Messages are what the turn added after the user message, in order: assistant messages with
	// their tool calls, tool results, the final answer.
	Messages []chat.Message
	// LLMCalls are the model calls of the turn, fallbacks included, in order.
	LLMCalls []chat.ModelCall
	// Settle are the ends of calls StartLLMCall opened that are not settled yet (the turn's
	// last call, usually): they are written in the turn's transaction, not in one of their own.
	Settle []LLMCallSettle
	// TraceID is the turn's OpenTelemetry trace id (32 hex digits); empty when not traced.
	TraceID string
	// Deliveries are the platform requests of the turn's reply, in order (at most
	// MaxDeliveries are kept).
	Deliveries []Delivery
	// Files are the files the member sent with the turn's message and those the bot sent with
	// its answer, in order (named and sized; the bytes kept only of a picture the bot sent).
	Files []TurnFile
}

// MaxDeliveries is the most deliveries a turn row keeps (chat.MaxDeliveries).
const MaxDeliveries = chat.MaxDeliveries

// Delivery is one platform request of a turn's reply (chat.Delivery).
type Delivery = chat.Delivery

// Turn is one turn row.
type Turn struct {
	ID               int64
	ConversationID   int64
	UserID           string
	UserName         string
	InboundMessageID string
	Model            string
	Status           chat.Status
	Rounds           int
	TokensIn         int
	TokensOut        int
	Error            string
	// Failure is why the turn got no answer from the model, as its user was told; empty for a
	// turn that was answered or ended otherwise. Such a turn is not in later turns' history.
	Failure    chat.Failure
	StartedAt  time.Time
	FinishedAt time.Time // zero while running
	TraceID    string    // empty when the turn was not traced
}

type turnRow struct {
	ID               int64 `gorm:"primaryKey"`
	ConversationID   int64
	UserID           string
	UserName         string
	InboundMessageID string
	Model            string
	Status           chat.Status
	Rounds           int
	TokensIn         int
	TokensOut        int
	Error            string
	Failure          chat.Failure
	StartedAt        time.Time
	FinishedAt       *time.Time
	InstanceID       string
	TraceID          string
	Deliveries       string // JSON list of Delivery
}

func (turnRow) TableName() string { return "turns" }

// turnColumns are the columns a turn is read with. Named rather than "*": on PostgreSQL a
// prepared "SELECT *" fails ("cached plan must not change result type") once another replica's
// migration adds a column, so a replica running the older binary would stop reading turns.
const turnColumns = "id, conversation_id, user_id, user_name, inbound_message_id, model, status, " +
	"rounds, tokens_in, tokens_out, error, started_at, finished_at"

// tracedTurnColumns add the trace id (migration 16) and the failure (migration 26) to
// turnColumns, for the readers of one turn and of a chat's turns.
const tracedTurnColumns = turnColumns + ", trace_id, failure"

type messageRow struct {
	ID             int64 `gorm:"primaryKey"`
	ConversationID int64
	TurnID         int64
	Seq            int
	Role           chat.Role
	Content        string
	Name           string
	Reasoning      string
	ToolCalls      string
	ToolCallID     string
	Images         int
	Extra          string
	ReasoningField string
	CreatedAt      time.Time
}

func (messageRow) TableName() string { return "messages" }

type llmCallRow struct {
	ID int64 `gorm:"primaryKey"`
	// TurnID is nil for a call outside a turn (/compact).
	TurnID         *int64
	Seq            int
	Round          int
	Model          string
	Candidate      int
	FallbackReason string
	Status         chat.Status
	TTFTMs         int64 `gorm:"column:ttft_ms"`
	DurationMs     int64 `gorm:"column:duration_ms"`
	TokensIn       int
	TokensOut      int
	// CachedIn and CacheWriteIn are the parts of TokensIn the provider read from and wrote to
	// its prompt cache.
	CachedIn     int `gorm:"column:cached_in"`
	CacheWriteIn int `gorm:"column:cache_write_in"`
	Error        string
	StartedAt    time.Time
	// Platform, ChatID and UserID are whom the call is counted against.
	Platform   string
	ChatID     string
	UserID     string
	Estimated  bool
	InstanceID string
	AudioMs    int64 `gorm:"column:audio_ms"`
	// Images is how many images an image call delivered (reserved while it runs).
	Images int `gorm:"column:images"`
	// QuotaChatID is the chat whose chat quota the call counts against (a Discord thread's
	// parent channel; else ChatID).
	QuotaChatID string
}

func (llmCallRow) TableName() string { return "llm_calls" }

// newMessageRow is the row of m: its images are kept as their number, not their bytes.
func newMessageRow(conversationID, turnID int64, seq int, m chat.Message, at time.Time) (messageRow, error) {
	row := messageRow{ConversationID: conversationID, TurnID: turnID, Seq: seq, Role: m.Role,
		Content: m.Content, Name: m.Name, Reasoning: m.Reasoning, ToolCallID: m.ToolCallID,
		Images: len(m.Images), Extra: string(m.Extra), ReasoningField: m.ReasoningField, CreatedAt: at}
	if len(m.ToolCalls) > 0 {
		// JSON carries a NUL as the escape \u0000, which the connection pool does not see as a
		// NUL: clean the values first, so a call's id still matches its result's ToolCallID.
		calls := make([]toolCallJSON, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			calls[i] = toolCallJSON{ID: validText(c.ID), Name: validText(c.Name), Arguments: validText(c.Arguments), Extra: validText(string(c.Extra))}
		}
		b, err := json.Marshal(calls)
		if err != nil {
			return messageRow{}, fmt.Errorf("encode tool calls of message %d: %w", seq, err)
		}
		row.ToolCalls = string(b)
	}
	switch m.Role {
	case RoleUser, RoleAssistant, RoleTool, RoleSystem:
	default:
		return messageRow{}, fmt.Errorf("message %d has unknown role %q", seq, m.Role)
	}
	return row, nil
}

// public is the message of the row: its images, whose bytes are not kept, come back without
// Data.
func (r messageRow) public() (chat.Message, error) {
	m := chat.Message{Role: r.Role, Content: r.Content, Name: r.Name, ToolCallID: r.ToolCallID,
		Reasoning: r.Reasoning, Extra: rawOrNil(r.Extra), ReasoningField: r.ReasoningField}
	if r.Images > 0 {
		m.Images = make([]chat.Image, r.Images)
	}
	if r.ToolCalls != "" {
		var calls []toolCallJSON
		if err := json.Unmarshal([]byte(r.ToolCalls), &calls); err != nil {
			return chat.Message{}, fmt.Errorf("decode tool calls of message %d: %w", r.ID, err)
		}
		m.ToolCalls = make([]chat.ToolCall, len(calls))
		for i, c := range calls {
			m.ToolCalls[i] = chat.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments, Extra: rawOrNil(c.Extra)}
		}
	}
	return m, nil
}

// rawOrNil is a stored JSON text as raw JSON, nil when none was stored.
func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// StartTurn opens a running turn in a conversation and saves the user's message with it.
func (s *TurnQuery) StartTurn(ctx context.Context, t TurnStart) (int64, error) {
	row, msg, err := s.turnStartRows(t)
	if err != nil {
		return 0, fmt.Errorf("store: start turn in conversation %d: %w", t.ConversationID, err)
	}
	err = s.turns.do(ctx, func(tx *gorm.DB) error { return writeTurnStart(tx, &row, msg) })
	if err != nil && t.ID != 0 && errors.Is(err, gorm.ErrDuplicatedKey) && s.startedAs(ctx, t) {
		// The start of a turn given its id ahead landed already, by a write whose answer was
		// lost (the model call that carried it): it is there once, as it should be.
		err = nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: start turn in conversation %d: %w", t.ConversationID, err)
	}
	s.started.add(row.ID, t.ConversationID)
	return row.ID, nil
}

// startedAs reports whether the turn of id t.ID is t's: its conversation, sender and message.
func (s *conn) startedAs(ctx context.Context, t TurnStart) bool {
	var row turnRow
	err := s.w.WithContext(ctx).Select("conversation_id, user_id, inbound_message_id").Where("id = ?", t.ID).Take(&row).Error
	return err == nil && row.ConversationID == t.ConversationID && row.UserID == t.UserID && row.InboundMessageID == t.InboundMessageID
}

// turnStartRows are the rows of a turn's start: the turn (running) and the user's message.
func (s *conn) turnStartRows(t TurnStart) (turnRow, messageRow, error) {
	if t.ConversationID <= 0 {
		return turnRow{}, messageRow{}, fmt.Errorf("no conversation id")
	}
	if t.UserMessage.Role == "" {
		t.UserMessage.Role = RoleUser
	}
	at := now()
	if !t.StartedAt.IsZero() {
		at = dbTime(t.StartedAt)
	}
	row := turnRow{ID: t.ID, ConversationID: t.ConversationID, UserID: t.UserID, UserName: t.UserName,
		InboundMessageID: t.InboundMessageID, Status: TurnRunning, StartedAt: at, InstanceID: s.instance}
	msg, err := newMessageRow(t.ConversationID, 0, 0, t.UserMessage, at)
	return row, msg, err
}

// writeTurnStart writes a turn's start in tx and sets row.ID when the database chose it.
func writeTurnStart(tx *gorm.DB, row *turnRow, msg messageRow) error {
	if row.ID != 0 {
		if err := tx.Exec(insertTurnWithID, row.ID, row.ConversationID, row.UserID, row.UserName,
			row.InboundMessageID, row.Status, row.StartedAt, row.InstanceID).Error; err != nil {
			return err
		}
	} else if err := tx.Raw(insertTurn, row.ConversationID, row.UserID, row.UserName, row.InboundMessageID,
		row.Status, row.StartedAt, row.InstanceID).Row().Scan(&row.ID); err != nil {
		return err
	}
	msg.TurnID = row.ID
	return insertMessage(tx, msg)
}

// insertTurn and insertMessageRow write the rows of every turn as plain statements: GORM
// building them from the structs (reflection, a cloned statement, its clauses) cost more CPU
// and allocations than SQLite running them. The columns not named keep their defaults, as
// GORM's inserts left them.
const (
	insertTurn = `INSERT INTO turns (conversation_id, user_id, user_name, inbound_message_id, model, status,
	rounds, tokens_in, tokens_out, error, started_at, instance_id, trace_id, deliveries)
	VALUES (?, ?, ?, ?, '', ?, 0, 0, 0, '', ?, ?, '', '') RETURNING id`
	insertTurnWithID = `INSERT INTO turns (id, conversation_id, user_id, user_name, inbound_message_id, model,
	status, rounds, tokens_in, tokens_out, error, started_at, instance_id, trace_id, deliveries)
	VALUES (?, ?, ?, ?, ?, '', ?, 0, 0, 0, '', ?, ?, '', '')`
	insertMessageRow = `INSERT INTO messages (conversation_id, turn_id, seq, role, content, name, reasoning,
	tool_calls, tool_call_id, images, extra, reasoning_field, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// insertMessage writes one message row.
func insertMessage(tx *gorm.DB, m messageRow) error {
	return tx.Exec(insertMessageRow, m.ConversationID, m.TurnID, m.Seq, m.Role, m.Content, m.Name, m.Reasoning,
		m.ToolCalls, m.ToolCallID, m.Images, m.Extra, m.ReasoningField, m.CreatedAt).Error
}

// startedTurns remembers the conversation of each turn this Database started and has not
// finished, so FinishTurn need not read the turn back: a turn's only message before it
// finishes is the user's, seq 0.
type startedTurns struct {
	mu    sync.Mutex
	convs map[int64]int64 // turn id → conversation id
}

func (st *startedTurns) add(turnID, conversationID int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.convs == nil {
		st.convs = map[int64]int64{}
	}
	st.convs[turnID] = conversationID
}

// take forgets turnID and returns its conversation; false for a turn this Database did not start.
func (st *startedTurns) take(turnID int64) (int64, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	conv, ok := st.convs[turnID]
	delete(st.convs, turnID)
	return conv, ok
}

// FinishTurn closes a turn and saves everything it produced, in one transaction.
func (s *TurnQuery) FinishTurn(ctx context.Context, e TurnEnd) error {
	switch e.Status {
	case TurnOK, TurnError, TurnCancelled, TurnInterrupted:
	default:
		return fmt.Errorf("store: finish turn %d: bad status %q", e.TurnID, e.Status)
	}
	at := now()
	llm := make([]llmCallRow, 0, len(e.LLMCalls))
	for i, c := range e.LLMCalls {
		started := c.StartedAt
		if started.IsZero() {
			started = at
		}
		row := newLLMCallRow(c)
		row.TurnID, row.Seq, row.StartedAt, row.InstanceID = &e.TurnID, i, dbTime(started), s.instance
		llm = append(llm, row)
	}
	times := replyTimesOf(e.Deliveries)
	deliveries, err := deliveriesJSON(e.Deliveries)
	if err != nil {
		return fmt.Errorf("store: finish turn %d: %w", e.TurnID, err)
	}
	conv, started := s.started.take(e.TurnID)
	err = s.turns.do(ctx, func(tx *gorm.DB) error {
		if err := closeTurn(tx, e, at, deliveries, times); err != nil {
			return err
		}
		if err := settleLLMCalls(tx, e.Settle); err != nil {
			return err
		}
		next := 1 // after the user's message
		if !started {
			var err error
			if conv, next, err = turnTail(tx, e.TurnID); err != nil {
				return err
			}
		}
		if err := addTurnMessages(tx, conv, e.TurnID, next, e.Messages, at); err != nil {
			return err
		}
		if err := addTurnFiles(tx, e.TurnID, e.Files); err != nil {
			return err
		}
		return addTurnCalls(tx, e, llm)
	})
	if err != nil {
		return fmt.Errorf("store: finish turn %d: %w", e.TurnID, err)
	}
	return nil
}

// closeTurn ends a running turn. Closing the turn first, only while it runs, is the check that
// it still runs (a replica's Recover may have ended it) without reading it; on any error the
// savepoint rolls the close back with the rest of the turn's write.
func closeTurn(tx *gorm.DB, e TurnEnd, at time.Time, deliveries string, rt replyTimes) error {
	res := tx.Exec(closeTurnRow, e.Status, e.Model, e.Rounds, e.TokensIn, e.TokensOut, e.Error, string(e.Failure), at,
		e.TraceID, deliveries, rt.firstText, rt.final, rt.waits, rt.waitedMS, e.TurnID, TurnRunning)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		var turn turnRow
		if err := tx.Select("id", "status").Take(&turn, e.TurnID).Error; err != nil {
			return err
		}
		return fmt.Errorf("turn is already %s", turn.Status)
	}
	return nil
}

// closeTurnRow is closeTurn's statement, plain for the reason insertTurn is.
const closeTurnRow = `UPDATE turns SET status = ?, model = ?, rounds = ?, tokens_in = ?, tokens_out = ?,
	error = ?, failure = ?, finished_at = ?, trace_id = ?, deliveries = ?, first_text_at = ?, final_at = ?,
	waits_429 = ?, waited_429_ms = ? WHERE id = ? AND status = ?`

// turnTail reads the conversation of a turn another Database (replica) started and the seq its next
// message takes.
func turnTail(tx *gorm.DB, turnID int64) (conv int64, next int, err error) {
	var turn turnRow
	if err := tx.Select("id", "conversation_id").Take(&turn, turnID).Error; err != nil {
		return 0, 0, err
	}
	var last struct{ N int }
	if err := tx.Model(&messageRow{}).Select("COALESCE(MAX(seq), -1) AS n").
		Where("turn_id = ?", turnID).Scan(&last).Error; err != nil {
		return 0, 0, err
	}
	return turn.ConversationID, last.N + 1, nil
}

// addTurnMessages saves a turn's messages from seq next on, one statement each (a turn adds a
// few: the kept statement runs cheaper than GORM building one multi-row insert).
func addTurnMessages(tx *gorm.DB, conv, turnID int64, next int, ms []chat.Message, at time.Time) error {
	if len(ms) == 0 {
		return nil
	}
	for i, m := range ms {
		row, err := newMessageRow(conv, turnID, next+i, m, at)
		if err != nil {
			return err
		}
		if err := insertMessage(tx, row); err != nil {
			return err
		}
	}
	return nil
}

// addTurnCalls saves the calls a turn carries itself (those the ledger did not take), counted
// against the turn's chat and user.
func addTurnCalls(tx *gorm.DB, e TurnEnd, llm []llmCallRow) error {
	if len(llm) == 0 {
		return nil
	}
	var who struct{ Platform, ChatID, UserID string }
	if err := tx.Table("turns t").Select("c.platform AS platform, c.chat_id AS chat_id, t.user_id AS user_id").
		Joins("JOIN conversations c ON c.id = t.conversation_id").Where("t.id = ?", e.TurnID).
		Take(&who).Error; err != nil {
		return err
	}
	for i := range llm {
		llm[i].Platform, llm[i].ChatID, llm[i].UserID = who.Platform, who.ChatID, who.UserID
		llm[i].QuotaChatID = cmp.Or(e.QuotaChatID, who.ChatID)
	}
	return tx.CreateInBatches(&llm, 100).Error
}

// Turn returns one turn.
func (s *TurnQuery) Turn(ctx context.Context, id int64) (Turn, error) {
	var row turnRow
	err := s.r.WithContext(ctx).Select(tracedTurnColumns).Take(&row, id).Error
	if err == gorm.ErrRecordNotFound {
		return Turn{}, fmt.Errorf("store: turn %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Turn{}, fmt.Errorf("store: turn %d: %w", id, err)
	}
	return row.public(), nil
}

func (row turnRow) public() Turn {
	t := Turn{ID: row.ID, ConversationID: row.ConversationID, UserID: row.UserID,
		UserName: row.UserName, InboundMessageID: row.InboundMessageID, Model: row.Model,
		Status: row.Status, Rounds: row.Rounds, TokensIn: row.TokensIn, TokensOut: row.TokensOut,
		Error: row.Error, Failure: row.Failure, StartedAt: row.StartedAt.UTC(), TraceID: row.TraceID}
	if row.FinishedAt != nil {
		t.FinishedAt = row.FinishedAt.UTC()
	}
	return t
}

// Recover marks interrupted the turns left running by a replica that is gone, the audit rows
// left running by them, and their model calls (which keep the tokens they reserved, as an
// estimate). A replica is gone when its row in the instances table has expired (on SQLite) or
// was removed (at a clean shutdown, or by the survivor that took its work over); turns of a live
// replica (this one included) are left alone, so a
// second replica starting up never ends the first one's turns. A single process registers no
// instance, so every running turn it finds at start is a crash's leftover. Call it at start,
// after Migrate and before the first turn; it is safe to call again at any time.
func (s *TurnQuery) Recover(ctx context.Context) (turns, calls int, err error) {
	at := now()
	live := s.w.Table("instances").Select("id").Where("expires_at > ?", at)
	if s.driver == DriverPostgres {
		// On PostgreSQL a replica whose lease expired is not gone yet: it may be paused, or have
		// shared an outage, and renew. Its work is taken over, with its row deleted, only by a
		// survivor that has been back for a grace period (coord.TakeOver); what is left here is
		// the work of replicas whose row is gone (taken over, or left).
		live = s.w.Table("instances").Select("id")
	}
	err = s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&turnRow{}).Where("status = ? AND instance_id NOT IN (?)", TurnRunning, live).
			Updates(map[string]any{
				"status": TurnInterrupted, "finished_at": at,
				"error": interruptedError,
			})
		if res.Error != nil {
			return res.Error
		}
		turns = int(res.RowsAffected)
		// A call still running belongs to a turn still running, on a live replica; any other is
		// a leftover of a replica that is gone (a call outside a turn, turn id 0, among them).
		res = tx.Model(&toolCallModel{}).
			Where("status = ? AND turn_id NOT IN (?)", audit.StatusRunning, tx.Model(&turnRow{}).Select("id").Where("status = ?", TurnRunning)).
			Updates(map[string]any{"status": audit.StatusInterrupted, "finished_at": at,
				"error": gorm.Expr("CASE WHEN error = '' THEN ? ELSE error END", "the bot stopped before the call finished")})
		if res.Error != nil {
			return res.Error
		}
		calls = int(res.RowsAffected)
		// A model call keeps the tokens it reserved (its prompt's estimate and the most it could
		// answer): what the provider billed for it is not known.
		return tx.Model(&llmCallRow{}).Where("status = ? AND instance_id NOT IN (?)", LLMCallRunning, live).
			Updates(map[string]any{"status": LLMCallInterrupted, "estimated": true,
				"error": "the bot stopped before the call finished"}).Error
	})
	if err != nil {
		return 0, 0, fmt.Errorf("store: recover running turns and calls: %w", err)
	}
	return turns, calls, nil
}

// TurnByInbound returns the newest turn started by message inboundMessageID of the chat of ref,
// in any of its threads and conversations (those a reset ended included), and false when there
// is none. A message handed over again after a crash is answered again only when this turn never
// ended.
func (s *TurnQuery) TurnByInbound(ctx context.Context, ref chat.Ref, inboundMessageID string) (Turn, bool, error) {
	if ref.Platform == "" || ref.ChatID == "" || inboundMessageID == "" {
		return Turn{}, false, fmt.Errorf("store: turn of inbound message: need a platform, chat id and message id, got %q, %q, %q",
			ref.Platform, ref.ChatID, inboundMessageID)
	}
	var rows []turnRow
	if err := s.turnByInboundQuery(ctx, ref, inboundMessageID).Find(&rows).Error; err != nil {
		return Turn{}, false, fmt.Errorf("store: turn of message %s of %s: %w", inboundMessageID, ref.Chat(), err)
	}
	if len(rows) == 0 {
		return Turn{}, false, nil
	}
	return rows[0].public(), true, nil
}

// turnByInboundQuery selects the newest turn of a message: idx_conversations_chat finds the
// chat's conversations (a reset adds one), idx_turns_inbound each one's turns of the message (a
// handful to sort). The subquery, rather than a join, keeps SQLite from starting at the message
// id, which repeats across chats, when its tables have no statistics.
func (s *conn) turnByInboundQuery(ctx context.Context, ref chat.Ref, inboundMessageID string) *gorm.DB {
	convs := s.r.WithContext(ctx).Table("conversations").Select("id").
		Where("platform = ? AND chat_id = ?", string(ref.Platform), ref.ChatID)
	return s.r.WithContext(ctx).Table("turns").Select(turnColumns).
		Where("inbound_message_id = ? AND conversation_id IN (?)", inboundMessageID, convs).
		Order("id DESC").Limit(1)
}
