package telegram

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

var commandRE = regexp.MustCompile(`^/([A-Za-z0-9_]{1,32})(?:@([A-Za-z0-9_]+))?`)

// parseCommand reads a bot command at the start of text: "/name" or "/name@bot", ended by the
// end of the text or white space (a newline too: "/audit\nfetch_url"), or, after "@bot", by
// anything but a username character ("/reset@bot, please"). A "/name" followed by another
// character ("/etc/hosts") is text, not a command. bot is the username the command names, ""
// when it names none. ("/reset@a@b" is a command for bot a, as a Telegram client marks it.)
func parseCommand(text string) (name, bot, args string, ok bool) {
	c := commandRE.FindStringSubmatch(text)
	if c == nil {
		return "", "", "", false
	}
	rest := text[len(c[0]):]
	if rest != "" {
		r, _ := utf8.DecodeRuneInString(rest)
		if c[2] == "" && !unicode.IsSpace(r) {
			return "", "", "", false
		}
	}
	return strings.ToLower(c[1]), c[2], strings.TrimSpace(rest), true
}
