// Package access is the pipeline's noun of who may talk to the bot and who is an admin: lists of
// "platform:id" entries, compiled for lookups. The pipeline checks every message against them;
// its parts (quota overrides, approvals) match users with the same sets.
package access

import (
	"strings"

	"relaybot/adapters"
	"relaybot/chat"
)

// Lists decide who may talk to the bot and who is an admin. Every entry is "platform:id"
// ("telegram:12345", the platform in any case) or "*:id" (any platform). A message passes when
// its sender passes AllowUsers and its chat passes AllowChats; an empty allow list allows everyone. The deny lists win over
// everything; admins pass the allow lists.
type Lists struct {
	AllowUsers []string
	DenyUsers  []string
	AllowChats []string
	DenyChats  []string
	Admins     []string
}

// IDSet matches "platform:id" values against entries that may use "*" for the platform.
type IDSet struct {
	exact map[string]bool // "platform:id"
	any   map[string]bool // "id" from "*:id"
}

// NewIDSet compiles "platform:id" and "*:id" entries.
func NewIDSet(entries []string) IDSet {
	s := IDSet{exact: map[string]bool{}, any: map[string]bool{}}
	for _, e := range entries {
		p, id, ok := strings.Cut(e, ":")
		// Platform names are matched without regard to case, and blanks around either part are
		// dropped, so "Telegram: 12345" on a deny list denies rather than silently matching no one.
		p, id = strings.ToLower(strings.TrimSpace(p)), strings.TrimSpace(id)
		if !ok || id == "" {
			continue
		}
		if p == "*" {
			s.any[id] = true
			continue
		}
		s.exact[p+":"+id] = true
	}
	return s
}

func (s IDSet) empty() bool { return len(s.exact) == 0 && len(s.any) == 0 }

// Has reports whether user (or chat) id of platform p is in the set.
func (s IDSet) Has(p chat.Platform, id string) bool {
	if id == "" {
		return false
	}
	return s.exact[strings.ToLower(string(p))+":"+id] || s.any[id]
}

// Rules are Lists compiled for lookups.
type Rules struct {
	allowUsers, denyUsers, allowChats, denyChats, admins IDSet
}

// Compile compiles l.
func Compile(l Lists) Rules {
	return Rules{
		allowUsers: NewIDSet(l.AllowUsers),
		denyUsers:  NewIDSet(l.DenyUsers),
		allowChats: NewIDSet(l.AllowChats),
		denyChats:  NewIDSet(l.DenyChats),
		admins:     NewIDSet(l.Admins),
	}
}

// IsAdmin reports whether the sender is listed as an admin.
func (r Rules) IsAdmin(in adapters.Inbound) bool {
	return r.admins.Has(in.Chat.Platform, in.UserID)
}

// Admins are the bot's admins.
func (r Rules) Admins() IDSet { return r.admins }

// hasChat reports whether any of the chats whose rules apply to the message (the thread or
// topic, its chat, a Discord thread's parent: adapters.Inbound.RuleChats) is in the set.
func (s IDSet) hasChat(in adapters.Inbound) bool {
	for _, ref := range in.RuleChats() {
		if s.Has(ref.Platform, ruleChatID(ref)) {
			return true
		}
	}
	return false
}

// ruleChatID is the id a rule names a chat by: the chat's id, with "#thread" for a thread or
// forum topic the platform keeps inside its chat ("-100#7" of "telegram:-100#7").
func ruleChatID(ref chat.Ref) string {
	return strings.TrimPrefix(ref.String(), string(ref.Platform)+":")
}

// Allowed reports whether the message may be handled, and if not, why (for the log). The chat
// lists match a thread or forum topic, its chat and a Discord thread's parent channel.
func (r Rules) Allowed(in adapters.Inbound) (bool, string) {
	p := in.Chat.Platform
	switch {
	case r.denyUsers.Has(p, in.UserID):
		return false, "user is on the deny list"
	case r.denyChats.hasChat(in):
		return false, "chat is on the deny list"
	}
	if r.IsAdmin(in) {
		return true, ""
	}
	if !r.allowUsers.empty() && !r.allowUsers.Has(p, in.UserID) {
		return false, "user is not on the allow list"
	}
	if !r.allowChats.empty() && !r.allowChats.hasChat(in) {
		return false, "chat is not on the allow list"
	}
	return true, ""
}
