package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"gorm.io/gorm"
)

// Forgotten is what replaces the words of a forgotten memory in the audit log and the history.
const Forgotten = "[forgotten]"

// ForgottenCalls names the tool calls that carried a person's forgotten facts: the person's
// calls of Carriers in Turns (the turns that wrote the facts), and the person's calls of Finders
// whose result names one of the facts ("id N:").
//
// On the web chat, where the bot keeps what the page showed (web_messages) and a person's chat is
// their id, Texts (the facts' words, in every form they were shown) are replaced by Forgotten in
// the bot's messages of that transcript: the /memory list and any answer that quoted a fact word
// for word. The person's own messages stay, as in the history.
type ForgottenCalls struct {
	Platform, UserID string
	Carriers         []string
	Turns            []int64
	Finders          []string
	FactIDs          []int64
	Texts            []string
}

// ForgetCalls replaces the arguments, result, error and progress of the calls f names with
// Forgotten, keeping each row (its tool, status and times: the trail that something was
// remembered and forgotten), and the arguments of the same calls in the turns' saved assistant
// messages and the finders' results in the saved tool messages. It returns how many audit rows it redacted.
func (s *ToolCallQuery) ForgetCalls(ctx context.Context, f ForgottenCalls) (int64, error) {
	var n int64
	err := s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, turn := range f.Turns {
			for _, tool := range f.Carriers {
				res := tx.Exec(`UPDATE tool_calls SET arguments = ?, result = ?, error = '', progress = ''
					WHERE turn_id = ? AND platform = ? AND user_id = ? AND tool_name = ?`,
					`{"forgotten":true}`, Forgotten, turn, f.Platform, f.UserID, tool)
				if res.Error != nil {
					return res.Error
				}
				n += res.RowsAffected
				if err := forgetInMessages(tx, turn, tool); err != nil {
					return err
				}
			}
		}
		for _, id := range f.FactIDs {
			for _, tool := range f.Finders {
				res := tx.Exec(`UPDATE tool_calls SET result = ?, error = '', progress = ''
					WHERE platform = ? AND user_id = ? AND tool_name = ? AND result LIKE ?`,
					Forgotten, f.Platform, f.UserID, tool, fmt.Sprintf("%%id %d:%%", id))
				if res.Error != nil {
					return res.Error
				}
				n += res.RowsAffected
				err := tx.Exec(`UPDATE messages SET content = ? WHERE role = 'tool' AND content LIKE ? AND EXISTS (
					SELECT 1 FROM tool_calls t WHERE t.turn_id = messages.turn_id AND t.tool_call_id = messages.tool_call_id
					AND t.platform = ? AND t.user_id = ? AND t.tool_name = ?)`,
					Forgotten, fmt.Sprintf("%%id %d:%%", id), f.Platform, f.UserID, tool).Error
				if err != nil {
					return err
				}
			}
		}
		return forgetInWebChat(tx, f)
	})
	if err != nil {
		return 0, fmt.Errorf("store: redact the calls of forgotten facts: %w", err)
	}
	return n, nil
}

// VacuumForgotten, on PostgreSQL, vacuums the tables ForgetCalls rewrites (tool_calls, messages,
// web_messages): the rows' old versions, which still held the forgotten words, leave the tables'
// pages and indexes instead of waiting for autovacuum. On SQLite it does nothing: the store opens
// it with secure_delete, which zeroes what an update frees.
func (s *ToolCallQuery) VacuumForgotten(ctx context.Context) error {
	if s.driver != DriverPostgres {
		return nil
	}
	if _, err := s.wsql.ExecContext(ctx, `VACUUM tool_calls, messages, web_messages`); err != nil {
		return fmt.Errorf("store: vacuum the redacted tables: %w", err)
	}
	return nil
}

// forgetInWebChat replaces f's texts in the bot's messages of the person's web chat transcript.
func forgetInWebChat(tx *gorm.DB, f ForgottenCalls) error {
	if f.Platform != "web" {
		return nil
	}
	for _, text := range f.Texts {
		if strings.TrimSpace(text) == "" {
			continue
		}
		err := tx.Exec(`UPDATE web_messages SET text = REPLACE(text, ?, ?)
			WHERE chat_id = ? AND role <> ? AND REPLACE(text, ?, '') <> text`,
			text, Forgotten, f.UserID, webRoleUser, text).Error
		if err != nil {
			return err
		}
	}
	return nil
}

// forgetInMessages replaces the arguments of turn's saved calls of tool with Forgotten's.
func forgetInMessages(tx *gorm.DB, turn int64, tool string) error {
	rows, err := tx.Raw(`SELECT id, tool_calls FROM messages WHERE turn_id = ? AND tool_calls <> ''`, turn).Rows()
	if err != nil {
		return err
	}
	type saved struct {
		id    int64
		calls string
	}
	var all []saved
	for rows.Next() {
		var s saved
		if err := rows.Scan(&s.id, &s.calls); err != nil {
			rows.Close()
			return err
		}
		all = append(all, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, s := range all {
		var calls []toolCallJSON
		if json.Unmarshal([]byte(s.calls), &calls) != nil || !strings.Contains(s.calls, tool) {
			continue
		}
		changed := false
		for i := range calls {
			if calls[i].Name == tool {
				calls[i].Arguments, calls[i].Extra, changed = `{"forgotten":true}`, "", true
			}
		}
		if !changed {
			continue
		}
		b, err := json.Marshal(calls)
		if err != nil {
			return err
		}
		if err := tx.Exec(`UPDATE messages SET tool_calls = ? WHERE id = ?`, string(b), s.id).Error; err != nil {
			return err
		}
	}
	return nil
}
