package history

import (
	"relaybot/adapters"
	"relaybot/chat"
)

// KeyOf returns the conversation of a message: a private chat is its user's; a group chat (or a
// forum topic or thread inside one, each its own) is shared by its members, or with perMember
// (ScopeUser) is one per member.
func KeyOf(in adapters.Inbound, perMember bool) chat.Key {
	k := chat.Key{Platform: in.Chat.Platform, ChatID: in.Chat.ChatID, ThreadID: in.Chat.ThreadID}
	if in.Kind == adapters.Private || perMember {
		k.UserID = in.UserID
	}
	return k
}
