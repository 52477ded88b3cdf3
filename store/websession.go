package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"relaybot/chat"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

type webSessionRow struct {
	SecretHash string `gorm:"primaryKey"`
	ChatID     string
}

func (webSessionRow) TableName() string { return "web_sessions" }

// SaveWebSession records that the web chat session whose cookie hashes to secretHash keeps its
// conversations under chatID. Saving a known session again changes nothing.
func (s *WebChatQuery) SaveWebSession(ctx context.Context, secretHash, chatID string) error {
	err := s.w.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).
		Create(&webSessionRow{SecretHash: secretHash, ChatID: chatID}).Error
	if err != nil {
		return fmt.Errorf("store: save web session: %w", err)
	}
	return nil
}

// WebSession returns the chat id of the web chat session whose cookie hashes to secretHash, and
// false when there is none.
func (s *WebChatQuery) WebSession(ctx context.Context, secretHash string) (string, bool, error) {
	var row webSessionRow
	err := s.r.WithContext(ctx).Where("secret_hash = ?", secretHash).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("store: web session: %w", err)
	}
	return row.ChatID, true, nil
}

// previewChars is the length of a chat.Summary's Preview.
const previewChars = 80

// ChatConversations returns the conversations of the chat of ref (every thread and user), newest
// first, at most limit of them (limit <= 0: 100).
func (s *WebChatQuery) ChatConversations(ctx context.Context, ref chat.Ref, limit int) ([]chat.Summary, error) {
	if limit <= 0 {
		limit = 100
	}
	// One query: a list of earlier conversations must not cost two queries per conversation.
	// Plain SQL: GORM has no way to say the two correlated subqueries in the select list.
	var rows []struct {
		ID        int64
		Active    bool
		CreatedAt time.Time
		Turns     int
		Preview   string
	}
	err := s.r.WithContext(ctx).Raw(`SELECT c.id, c.active, c.created_at,
		(SELECT COUNT(*) FROM turns t WHERE t.conversation_id = c.id) AS turns,
		COALESCE((SELECT m.content FROM messages m WHERE m.conversation_id = c.id AND m.role = ?
			ORDER BY m.id LIMIT 1), '') AS preview
		FROM conversations c WHERE c.platform = ? AND c.chat_id = ? ORDER BY c.id DESC LIMIT ?`,
		RoleUser, string(ref.Platform), ref.ChatID, limit).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: conversations of %s: %w", ref.Chat(), err)
	}
	out := make([]chat.Summary, 0, len(rows))
	for _, r := range rows {
		cc := chat.Summary{ID: r.ID, Active: r.Active, CreatedAt: r.CreatedAt.UTC(), Turns: r.Turns, Preview: r.Preview}
		if p := []rune(cc.Preview); len(p) > previewChars {
			cc.Preview = string(p[:previewChars]) + "…"
		}
		out = append(out, cc)
	}
	return out, nil
}

// Transcript returns what the user of a conversation saw of its newest limit rounds, oldest
// first: their messages and the answers shown (assistant text without tool calls). A message the
// model did not answer is there: it left the model's history, not the user's screen.
func (s *WebChatQuery) Transcript(ctx context.Context, conversationID int64, limit int) ([]chat.Line, error) {
	rounds, err := (&MessageQuery{s.conn}).rounds(ctx, conversationID, 0, limit, shownTurnsQuery)
	if err != nil {
		return nil, err
	}
	var out []chat.Line
	for _, r := range rounds {
		for _, m := range r.Messages {
			switch {
			case m.Role == RoleUser:
				out = append(out, chat.Line{FromUser: true, Text: m.Content})
			case m.Role == RoleAssistant && len(m.ToolCalls) == 0 && strings.TrimSpace(m.Content) != "":
				out = append(out, chat.Line{Text: m.Content})
			}
		}
	}
	return out, nil
}

// webMessageRow is one message the web chat showed, as it last showed it.
type webMessageRow struct {
	ChatID string `gorm:"primaryKey"`
	ID     string `gorm:"primaryKey"`
	Pos    int64
	Role   string
	Text   string
	State  string
	Files  string
}

func (webMessageRow) TableName() string { return "web_messages" }

// The roles and states of web_messages rows.
const (
	webRoleUser      = "user"
	webRoleBot       = "bot"
	webStateQuestion = "question"
	webStateAsking   = "asking"
)

// keptFile is a file of a web chat message in the files column (JSON; Data in base64).
type keptFile struct {
	Name string `json:"name"`
	MIME string `json:"mime,omitempty"`
	Data []byte `json:"data,omitempty"`
}

// KeepWebMessages keeps the lines of the web chat chatID as they are shown now, each whole: a
// line kept before (by its ID) is replaced, its place (Pos) too.
func (s *WebChatQuery) KeepWebMessages(ctx context.Context, chatID string, lines []chat.Line) error {
	if len(lines) == 0 {
		return nil
	}
	rows := make([]webMessageRow, 0, len(lines))
	for _, l := range lines {
		row := webMessageRow{ChatID: chatID, ID: l.ID, Pos: l.Pos, Role: webRoleBot, Text: l.Text}
		if l.FromUser {
			row.Role = webRoleUser
		}
		switch {
		case l.Asking:
			row.State = webStateAsking
		case l.Question:
			row.State = webStateQuestion
		}
		if len(l.Files) > 0 {
			files := make([]keptFile, len(l.Files))
			for i, f := range l.Files {
				files[i] = keptFile{Name: f.Name, MIME: f.MIME, Data: f.Data}
			}
			b, err := json.Marshal(files)
			if err != nil {
				return fmt.Errorf("store: keep web chat %s messages: %w", chatID, err)
			}
			row.Files = string(b)
		}
		rows = append(rows, row)
	}
	err := s.w.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "chat_id"}, {Name: "id"}},
		DoUpdates: clause.AssignmentColumns([]string{"pos", "role", "text", "state", "files"}),
	}).Create(&rows).Error
	if err != nil {
		return fmt.Errorf("store: keep web chat %s messages: %w", chatID, err)
	}
	return nil
}

// WebMessages returns the newest limit messages the web chat chatID showed, oldest first, as
// KeepWebMessages kept them (limit <= 0: 200); none when it kept none.
func (s *WebChatQuery) WebMessages(ctx context.Context, chatID string, limit int) ([]chat.Line, error) {
	if limit <= 0 {
		limit = 200
	}
	var rows []webMessageRow
	err := s.r.WithContext(ctx).Where("chat_id = ?", chatID).Order("pos DESC").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: web chat %s messages: %w", chatID, err)
	}
	out := make([]chat.Line, 0, len(rows))
	for i := len(rows) - 1; i >= 0; i-- {
		l, err := rows[i].line()
		if err != nil {
			return nil, fmt.Errorf("store: web chat %s: %w", chatID, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// line is the kept message r.
func (r webMessageRow) line() (chat.Line, error) {
	l := chat.Line{ID: r.ID, Pos: r.Pos, FromUser: r.Role == webRoleUser, Text: r.Text,
		Question: r.State != "", Asking: r.State == webStateAsking}
	if r.Files != "" {
		var files []keptFile
		if err := json.Unmarshal([]byte(r.Files), &files); err != nil {
			return chat.Line{}, fmt.Errorf("message %s: files: %w", r.ID, err)
		}
		for _, f := range files {
			l.Files = append(l.Files, chat.File{Name: f.Name, MIME: f.MIME, Data: f.Data})
		}
	}
	return l, nil
}

// WebConversationMessages returns what the web chat chatID showed of its conversation
// conversationID, oldest first, at most limit messages (limit <= 0: 200): the kept messages from
// the user's message that started the conversation's first turn up to the one that started the
// first turn of a later conversation of the chat. None when nothing of it was kept (its turns
// are older than the keeping).
func (s *WebChatQuery) WebConversationMessages(ctx context.Context, chatID string, conversationID int64, limit int) ([]chat.Line, error) {
	if limit <= 0 {
		limit = 200
	}
	db := s.r.WithContext(ctx)
	startOf := func(conversations *gorm.DB) (int64, bool, error) {
		var start *int64
		err := db.Model(&webMessageRow{}).Select("MIN(pos)").
			Where("chat_id = ? AND id IN (?)", chatID, db.Model(&turnRow{}).Select("inbound_message_id").Where("conversation_id IN (?)", conversations)).
			Scan(&start).Error
		return ptrValue(start), start != nil, err
	}
	start, ok, err := startOf(db.Model(&conversationRow{}).Select("id").Where("id = ?", conversationID))
	if err != nil || !ok {
		return nil, wrapWebConversation(chatID, conversationID, err)
	}
	next, bounded, err := startOf(db.Model(&conversationRow{}).Select("id").
		Where("platform = ? AND chat_id = ? AND id > ?", string(chat.Web), chatID, conversationID))
	if err != nil {
		return nil, wrapWebConversation(chatID, conversationID, err)
	}
	q := db.Where("chat_id = ? AND pos >= ?", chatID, start)
	if bounded {
		q = q.Where("pos < ?", next)
	}
	var rows []webMessageRow
	if err := q.Order("pos").Limit(limit).Find(&rows).Error; err != nil {
		return nil, wrapWebConversation(chatID, conversationID, err)
	}
	out := make([]chat.Line, 0, len(rows))
	for _, r := range rows {
		l, err := r.line()
		if err != nil {
			return nil, wrapWebConversation(chatID, conversationID, err)
		}
		out = append(out, l)
	}
	return out, nil
}

func wrapWebConversation(chatID string, conversationID int64, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("store: web chat %s conversation %d: %w", chatID, conversationID, err)
}

func ptrValue(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
