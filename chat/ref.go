package chat

import (
	"errors"
	"fmt"
	"strings"
)

// MaxRefLen is the longest chat reference ParseRef reads, in bytes: far above any platform's ids
// ("telegram:-1001234567890#123456" is 30), low enough that a query string cannot make it work.
const MaxRefLen = 256

// ErrBadRef is wrapped by the errors of ParseRef and FilterRef: the text is not a chat reference.
var ErrBadRef = errors.New("not a chat reference")

// ParseRef reads a chat reference as Ref.String writes it and the admin pages, the audit table
// and the usage tables print it: "platform:chat" or "platform:chat#thread" ("web:3f9a…",
// "telegram:-100123", "telegram:-100123#7" for a forum topic, "discord:123" for a channel or a
// thread, whose id is its own channel's). Spaces around it are dropped and the platform is read
// in any case. The platform must be one of the shipped ones; the ids are letters, digits and
// "-_.@", which every platform's ids are made of. A conversation key's user part ("/u:5") is
// refused: people are filtered apart. Errors wrap ErrBadRef and say what is wrong.
func ParseRef(s string) (Ref, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return Ref{}, fmt.Errorf("%w: it is empty (want PLATFORM:ID, e.g. telegram:-100123)", ErrBadRef)
	case len(s) > MaxRefLen:
		return Ref{}, fmt.Errorf("%w: it is %d bytes long, more than %d", ErrBadRef, len(s), MaxRefLen)
	}
	p, rest, ok := strings.Cut(s, ":")
	if !ok {
		return Ref{}, fmt.Errorf("%w: %q has no platform (want PLATFORM:ID, e.g. telegram:%s)", ErrBadRef, s, s)
	}
	platform := Platform(strings.ToLower(p))
	if !platform.Valid() {
		return Ref{}, fmt.Errorf("%w: %q names no platform the bot has (want %s before the colon)", ErrBadRef, p, platformList())
	}
	if user := strings.Index(rest, "/u:"); user >= 0 {
		return Ref{}, fmt.Errorf("%w: %q names one user's conversation; give the chat (%s) and filter the user apart", ErrBadRef, s, s[:len(p)+1+user])
	}
	chatID, thread, hasThread := strings.Cut(rest, "#")
	if err := checkRefID("chat id", chatID, s); err != nil {
		return Ref{}, err
	}
	if hasThread {
		if err := checkRefID("thread id", thread, s); err != nil {
			return Ref{}, err
		}
	}
	return Ref{Platform: platform, ChatID: chatID, ThreadID: thread}, nil
}

// checkRefID refuses an empty id or one with a character no platform's ids have.
func checkRefID(what, id, ref string) error {
	if id == "" {
		return fmt.Errorf("%w: %q has an empty %s", ErrBadRef, ref, what)
	}
	for _, r := range id {
		if !isRefIDRune(r) {
			return fmt.Errorf("%w: the %s of %q has %q (ids are letters, digits and -_.@; one # separates the thread)", ErrBadRef, what, ref, r)
		}
	}
	return nil
}

func isRefIDRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
		r == '-' || r == '_' || r == '.' || r == '@'
}

// Platforms lists the shipped platforms.
var Platforms = []Platform{Telegram, Discord, Web}

// Valid reports whether p is one of Platforms.
func (p Platform) Valid() bool { return p == Telegram || p == Discord || p == Web }

func platformList() string {
	names := make([]string, len(Platforms))
	for i, p := range Platforms {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

// FilterRef reads the chat a filter asks for from its two fields, as the admin API and pages,
// bot audit and /audit take them: chat is a reference ParseRef reads ("telegram:-100123#7") or,
// as before references were taken, a bare chat id; platform is the separate platform field.
// Either may be empty (no filter on it); when chat is a reference and platform is set too, they
// must agree. A bare chat id is taken as it is. The Ref's empty fields do not filter.
func FilterRef(platform, chat string) (Ref, error) {
	platform, chat = strings.TrimSpace(platform), strings.TrimSpace(chat)
	if !strings.Contains(chat, ":") {
		return Ref{Platform: Platform(platform), ChatID: chat}, nil
	}
	ref, err := ParseRef(chat)
	if err != nil {
		return Ref{}, err
	}
	if platform != "" && !strings.EqualFold(platform, string(ref.Platform)) {
		return Ref{}, fmt.Errorf("%w: the chat %s is on %s, but the platform filter says %q (leave one out)", ErrBadRef, ref, ref.Platform, platform)
	}
	return ref, nil
}
