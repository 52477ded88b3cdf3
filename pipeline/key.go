package pipeline

import (
	"relaybot/adapters"
)

// Scope says who shares a conversation in a group chat.
type Scope string

// Conversation scopes.
const (
	// ScopeChat: all members of a group chat (or of one forum topic or thread) share one conversation.
	ScopeChat Scope = "chat"
	// ScopeUser: each member of a group chat has a conversation of their own there.
	ScopeUser Scope = "user"
)

// ConversationKey names the conversation a message belongs to, and the fields it is made of.
type ConversationKey struct {
	Platform string
	ChatID   string
	ThreadID string // forum topic or thread; empty when none
	// UserID is set when the conversation is one user's: a private chat, or a group chat with
	// ScopeUser. Empty when the conversation is shared by a chat's members.
	UserID string
}

// String renders the key as one stable string, used to serialise turns of one conversation.
// "telegram:42", "telegram:-100#7", "discord:9/u:5".
func (k ConversationKey) String() string {
	s := k.Platform + ":" + k.ChatID
	if k.ThreadID != "" {
		s += "#" + k.ThreadID
	}
	if k.UserID != "" {
		s += "/u:" + k.UserID
	}
	return s
}

// KeyOf returns the conversation of a message: a private chat is its user's; a group chat (or a
// forum topic or thread inside one, each its own) is shared by its members, or with ScopeUser is
// one per member.
func KeyOf(in adapters.Inbound, scope Scope) ConversationKey {
	k := ConversationKey{Platform: string(in.Chat.Platform), ChatID: in.Chat.ChatID, ThreadID: in.Chat.ThreadID}
	if in.Kind == adapters.Private || scope == ScopeUser {
		k.UserID = in.UserID
	}
	return k
}
