package pipeline

import (
	"strings"

	"relaybot/adapters"
	"relaybot/chat"
)

// Access decides who may talk to the bot and who is an admin. Every entry is "platform:id"
// ("telegram:12345", the platform in any case) or "*:id" (any platform). A message passes when
// its sender passes AllowUsers and its chat passes AllowChats; an empty allow list allows everyone. The deny lists win over
// everything; admins pass the allow lists.
type Access struct {
	AllowUsers []string
	DenyUsers  []string
	AllowChats []string
	DenyChats  []string
	Admins     []string
}

// idSet matches "platform:id" values against entries that may use "*" for the platform.
type idSet struct {
	exact map[string]bool // "platform:id"
	any   map[string]bool // "id" from "*:id"
}

func newIDSet(entries []string) idSet {
	s := idSet{exact: map[string]bool{}, any: map[string]bool{}}
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

func (s idSet) empty() bool { return len(s.exact) == 0 && len(s.any) == 0 }

func (s idSet) has(p chat.Platform, id string) bool {
	if id == "" {
		return false
	}
	return s.exact[strings.ToLower(string(p))+":"+id] || s.any[id]
}

// accessRules is Access compiled for lookups.
type accessRules struct {
	allowUsers, denyUsers, allowChats, denyChats, admins idSet
}

func compileAccess(a Access) accessRules {
	return accessRules{
		allowUsers: newIDSet(a.AllowUsers),
		denyUsers:  newIDSet(a.DenyUsers),
		allowChats: newIDSet(a.AllowChats),
		denyChats:  newIDSet(a.DenyChats),
		admins:     newIDSet(a.Admins),
	}
}

// isAdmin reports whether the sender is listed as an admin.
func (r accessRules) isAdmin(in adapters.Inbound) bool {
	return r.admins.has(in.Chat.Platform, in.UserID)
}

// hasChat reports whether any of the chats whose rules apply to the message (the thread or
// topic, its chat, a Discord thread's parent: adapters.Inbound.RuleChats) is in the set.
func (s idSet) hasChat(in adapters.Inbound) bool {
	for _, ref := range in.RuleChats() {
		if s.has(ref.Platform, ruleChatID(ref)) {
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

// ruleChats returns adapters.Inbound.RuleChats as the "platform:chat_id" strings rules use.
func ruleChats(in adapters.Inbound) []string {
	refs := in.RuleChats()
	out := make([]string, len(refs))
	for i, ref := range refs {
		out[i] = ref.String()
	}
	return out
}

// allowed reports whether the message may be handled, and if not, why (for the log). The chat
// lists match a thread or forum topic, its chat and a Discord thread's parent channel.
func (r accessRules) allowed(in adapters.Inbound) (bool, string) {
	p := in.Chat.Platform
	switch {
	case r.denyUsers.has(p, in.UserID):
		return false, "user is on the deny list"
	case r.denyChats.hasChat(in):
		return false, "chat is on the deny list"
	}
	if r.isAdmin(in) {
		return true, ""
	}
	if !r.allowUsers.empty() && !r.allowUsers.has(p, in.UserID) {
		return false, "user is not on the allow list"
	}
	if !r.allowChats.empty() && !r.allowChats.hasChat(in) {
		return false, "chat is not on the allow list"
	}
	return true, ""
}
