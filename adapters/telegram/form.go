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

// The bytes url.QueryEscape leaves as they are, letters, digits and "-._~", as bits: bytes
// 0-63 in unescapedLow, 64-127 in unescapedHigh.
const (
	unescapedLow  uint64 = 1<<'-' | 1<<'.' | (1<<10-1)<<'0'
	unescapedHigh uint64 = (1<<26-1)<<('A'-64) | 1<<('_'-64) | (1<<26-1)<<('a'-64) | 1<<('~'-64)
)

// unescaped reports whether url.QueryEscape leaves c as it is.
func unescaped(c byte) bool {
	switch {
	case c < 64:
		return unescapedLow>>c&1 != 0
	case c < 128:
		return unescapedHigh>>(c-64)&1 != 0
	}
	return false
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
