package telegram

import (
	"slices"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// encodeForm is the body of a form request with params: what url.Values.Encode makes of them
// (tgbotapi's MakeRequest sends that), keys sorted, each key and value escaped as
// url.QueryEscape escapes it, but written into one buffer of the exact size.
func encodeForm(params tgbotapi.Params) []byte {
	var kept [16]string // a call has fewer parameters: the keys stay on the stack
	keys := kept[:0]
	n := -1 // no '&' before the first pair
	for k, v := range params {
		keys = append(keys, k)
		n += 1 + escapedLen(k) + 1 + escapedLen(v)
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	b := make([]byte, 0, n)
	for i, k := range keys {
		if i > 0 {
			b = append(b, '&')
		}
		b = appendEscaped(b, k)
		b = append(b, '=')
		b = appendEscaped(b, params[k])
	}
	return b
}

// unescaped reports whether url.QueryEscape leaves c as it is.
func unescaped(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// escapedLen is the length of s escaped by appendEscaped.
func escapedLen(s string) int {
	n := len(s)
	for i := range len(s) {
		if c := s[i]; c != ' ' && !unescaped(c) {
			n += 2
		}
	}
	return n
}

// appendEscaped appends s to b as url.QueryEscape escapes it: a space becomes '+', every other
// byte but letters, digits and "-._~" becomes %XX.
func appendEscaped(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := range len(s) {
		switch c := s[i]; {
		case unescaped(c):
			b = append(b, c)
		case c == ' ':
			b = append(b, '+')
		default:
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return b
}
