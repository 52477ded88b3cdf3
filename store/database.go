package store

import (
	"context"
	"fmt"
)

// Database is the bot's database: one query type per table or tight group of tables, as
// mautrix-go's bridgev2/database has it. A consumer takes the query type it needs (through an
// interface of its own), never the whole Database; cmd/bot hands each one over. It is safe for
// concurrent use.
//
// The query types use GORM for what it can say; plain SQL stays where GORM cannot say it (upserts
// and conditional updates with RETURNING, dialect-specific aggregates) or where the turn's writes
// are a measured hot path (the group commit, the prepared statements of the turn start and the
// model calls), each place saying which in a line.
type Database struct {
	*conn
	// Conversations keeps the conversations of each chat: their model, system prompt and summary.
	Conversations *ConversationQuery
	// Turns keeps the turns: their start, end, status and the recovery of turns cut short.
	Turns *TurnQuery
	// Messages reads the messages of the turns: history, rounds, one turn's messages.
	Messages *MessageQuery
	// ModelCalls keeps the model calls of turns, the ledger the quotas reserve against.
	ModelCalls *ModelCallQuery
	// ToolCalls keeps the tool-call audit log (audit.Log).
	ToolCalls *ToolCallQuery
	// Consents keeps the "always allow" answers to approval questions (audit.Consents).
	Consents *ConsentQuery
	// OAuth keeps the MCP servers' sealed OAuth tokens and the logins under way.
	OAuth *OAuthQuery
	// MCPTools keeps the tool names each MCP server listed last (mcp.ToolMemory).
	MCPTools *MCPToolQuery
	// MCPTasks keeps the MCP tasks of calls in flight, for the next process to cancel the ones a
	// stopped one left (mcp.TaskBook).
	MCPTasks *MCPTaskQuery
	// AdminSessions keeps the admin pages' login sessions.
	AdminSessions *AdminSessionQuery
	// WebChat keeps the web chat's sessions and reads the conversations it shows.
	WebChat *WebChatQuery
	// Retention deletes what is older than the configured retention.
	Retention *RetentionQuery
	// Usage sums the tokens of model calls.
	Usage *UsageQuery
	// Timelines reads one turn's events in order for the admin pages.
	Timelines *TimelineQuery
	// Transcripts reads conversations across chats as their members saw them, and searches
	// their messages' text.
	Transcripts *TranscriptQuery
	// Tasks keeps the reminders and scheduled tasks, their runs and the people's time zones.
	Tasks *TaskQuery
}

// ConversationQuery reads and writes the conversations table.
type ConversationQuery struct{ *conn }

// TurnQuery reads and writes the turns table (and a turn's first message, written with it).
type TurnQuery struct{ *conn }

// MessageQuery reads the messages table.
type MessageQuery struct{ *conn }

// ModelCallQuery reads and writes the llm_calls table.
type ModelCallQuery struct{ *conn }

// ToolCallQuery reads and writes the tool_calls table, the audit log.
type ToolCallQuery struct{ *conn }

// ConsentQuery reads and writes the tool_consents table.
type ConsentQuery struct{ *conn }

// OAuthQuery reads and writes the mcp_oauth_tokens and mcp_oauth_states tables.
type OAuthQuery struct{ *conn }

// MCPToolQuery reads and writes the mcp_server_tools table.
type MCPToolQuery struct{ *conn }

// MCPTaskQuery reads and writes the mcp_tasks_in_flight table.
type MCPTaskQuery struct{ *conn }

// AdminSessionQuery reads and writes the admin_sessions table.
type AdminSessionQuery struct{ *conn }

// WebChatQuery reads and writes the web_sessions table and reads the conversations and messages
// of the web chats.
type WebChatQuery struct{ *conn }

// RetentionQuery deletes old turns, messages, model and tool calls.
type RetentionQuery struct{ *conn }

// UsageQuery sums the llm_calls table, and the admin overview of turns, model and tool calls.
type UsageQuery struct{ *conn }

// TimelineQuery reads one turn's model calls, tool calls and deliveries.
type TimelineQuery struct{ *conn }

// scanner is a row of a plain query (*sql.Row, *sql.Rows): a row type's scan reads its columns
// in the order its query names them.
type scanner interface {
	Scan(dest ...any) error
}

func newDatabase(c *conn) *Database {
	return &Database{
		conn:          c,
		Conversations: &ConversationQuery{c},
		Turns:         &TurnQuery{c},
		Messages:      &MessageQuery{c},
		ModelCalls:    &ModelCallQuery{c},
		ToolCalls:     &ToolCallQuery{c},
		Consents:      &ConsentQuery{c},
		OAuth:         &OAuthQuery{c},
		MCPTools:      &MCPToolQuery{c},
		MCPTasks:      &MCPTaskQuery{c},
		AdminSessions: &AdminSessionQuery{c},
		WebChat:       &WebChatQuery{c},
		Retention:     &RetentionQuery{c},
		Usage:         &UsageQuery{c},
		Timelines:     &TimelineQuery{c},
		Tasks:         &TaskQuery{c},
		Transcripts:   &TranscriptQuery{c},
	}
}

// Ping checks that the database answers (the readers' pool; on SQLite the writer's connection
// is busy with the writes and answers with them).
func (d *Database) Ping(ctx context.Context) error {
	if err := d.rsql.PingContext(ctx); err != nil {
		return fmt.Errorf("store: ping %s: %w", d.driver, err)
	}
	return nil
}
