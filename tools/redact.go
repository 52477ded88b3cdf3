package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// AuditMaxChars caps the arguments and results stored in an audit record.
const AuditMaxChars = 20000

// Redacted replaces the values of secret-looking keys in audit records.
const Redacted = "[redacted]"

// secretKeyParts are the fragments that make a key secret-looking once it is lower-cased and
// stripped of '-' and '_': "X-Api-Key" → "xapikey" contains "apikey".
var secretKeyParts = [...]string{
	"token", "password", "passwd", "passphrase", "secret", "apikey", "authorization", "cookie", "credential",
	"privatekey", "signature", "dsn", "connectionstring",
}

// IsSecretKey reports whether values under key are redacted: keys containing token, password,
// passwd, passphrase, secret, api_key (or api-key, apikey), authorization, cookie, credential,
// private_key, signature (X-Amz-Signature, X-Goog-Signature), dsn or connection_string, in any
// case. Token counts such as max_tokens or total_tokens are not secrets.
func IsSecretKey(key string) bool {
	var buf [64]byte
	norm := buf[:0]
	for _, r := range strings.ToLower(key) {
		if r != '-' && r != '_' && r != ' ' {
			norm = utf8.AppendRune(norm, r)
		}
	}
	k := string(norm)
	if isTokenCount(k) {
		return false
	}
	for _, p := range secretKeyParts {
		if strings.Contains(k, p) {
			return true
		}
	}
	return false
}

// tokenCountPrefixes name LLM token counts ("max_tokens", "prompt_tokens"): numbers that share
// the word "token" with credentials but hide nothing, and that admins need to read.
var tokenCountPrefixes = [...]string{"max", "min", "total", "prompt", "completion", "input", "output", "num", "used", "reasoning", "cached"}

func isTokenCount(k string) bool {
	base, ok := strings.CutSuffix(k, "tokens")
	if !ok {
		return false
	}
	for _, p := range tokenCountPrefixes {
		if base == p {
			return true
		}
	}
	return false
}

// RedactValue returns v (a value decoded from JSON) with the values of secret-looking keys
// replaced by Redacted, at any depth, and the strings redacted with RedactText. v is not modified.
func RedactValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			if IsSecretKey(k) {
				out[k] = Redacted
				continue
			}
			out[k] = RedactValue(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = RedactValue(val)
		}
		return out
	case string:
		return RedactText(x)
	default:
		return v
	}
}

// looseSecretPair finds `"secret-ish key": value` pairs in text that is not valid JSON, so that
// malformed arguments are still redacted before they are stored. A quoted URL followed by a colon
// (`Get "https://…?token=…": dial tcp`) is no key: keys hold no '/', '?', '=', '&' or ':'.
var looseSecretPair = regexp.MustCompile(`(?i)("[^"\\/?=&:]*(?:token|password|passwd|passphrase|secret|api[-_ ]?key|authorization|cookie|credential|private[-_ ]?key|signature|dsn|connection[-_ ]?string)[^"\\/?=&:]*"\s*:\s*)("(?:[^"\\]|\\.)*"?|[^,}\]\s]*)`)

// RedactJSONText redacts secret-looking keys in JSON text. Valid JSON objects and arrays are
// decoded, redacted at any depth and encoded again (keys sorted), their strings redacted with
// RedactText; other text keeps its shape, with the values of `"key": value` pairs under
// secret-looking keys replaced and the plain-text forms of RedactText redacted.
func RedactJSONText(s string) string {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
		dec := json.NewDecoder(strings.NewReader(t))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err == nil && !dec.More() {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(RedactValue(v)); err == nil {
				return strings.TrimSuffix(buf.String(), "\n")
			}
		}
	}
	if looseSecretPair.MatchString(s) {
		s = looseSecretPair.ReplaceAllString(s, `${1}"`+Redacted+`"`)
	}
	return RedactText(s)
}

var (
	// authHeader is an Authorization header in text: "Authorization: Bearer abc", with or
	// without a scheme; the scheme stays readable.
	authHeader = regexp.MustCompile(`(?i)\b((?:proxy-)?authorization\s*[:=]\s*)((?:bearer|basic|digest|token|apikey)\s+)?([^\s,;"'&]+)`)
	// cookieHeader is a Cookie or Set-Cookie header: the rest of its line is the secret.
	cookieHeader = regexp.MustCompile(`(?i)\b((?:set-)?cookie\s*:\s*)([^\r\n"]+)`)
	// bearer is a bearer credential outside a header ("using Bearer sk-abc123").
	bearer = regexp.MustCompile(`(?i)\b(bearer\s+)([A-Za-z0-9._~+/=-]+)`)
	// queryParam is a URL query (or fragment) parameter: "?token=abc", "&api_key=abc".
	queryParam = regexp.MustCompile(`([?&#])([^=&?#\s"'<>]+)=([^&#\s"'<>]+)`)
	// plainPair is "name=value" or "name: value" with a secret-looking name, the name not glued
	// to a preceding word character.
	plainPair = regexp.MustCompile(`(?i)(^|[^A-Za-z0-9_.-])([A-Za-z0-9_.-]*(?:token|password|passwd|passphrase|pwd|secret|api[-_]?key|credential|private[-_]?key|signature|dsn|connection[-_]?string)[A-Za-z0-9_.-]*)(\s*[=:]\s*)("(?:[^"\\]|\\.)*"|'[^']*'|[^\s,;&"'}\])]+)`)
	// urlPassword is the password of a URL's userinfo, any scheme: "postgres://admin:hunter2@db";
	// the user name stays readable.
	urlPassword = regexp.MustCompile(`(\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@"'<>]*:)([^@\s/"'<>]+)@`)
	// telegramToken is the bot token in a Telegram Bot API URL: ".../bot123456:AA.../sendMessage".
	telegramToken = regexp.MustCompile(`(/bot)(\d+:[A-Za-z0-9_-]+)`)
)

// urlSecretParams are query parameter names that carry credentials in URLs although IsSecretKey
// does not treat them as secret keys everywhere ("key" alone is too common a JSON key).
var urlSecretParams = [...]string{"key", "sig", "signature", "auth", "pwd", "pass", "x-amz-credential", "x-goog-credential"}

// RedactText redacts secrets written as plain text, as they appear in error messages and tool
// output: the password of a URL of any scheme ("postgres://admin:…@host"), "Authorization: Bearer abc…" (the scheme is kept), Cookie headers, a bearer credential
// on its own, URL query parameters with secret-looking names ("?token=…", "&api_key=…",
// "&key=…"), "name=value" and "name: value" pairs under secret-looking names ("password=…",
// "DB_PASSWORD: …", token counts such as max_tokens excepted) and the bot token of Telegram API
// URLs. Words are left alone when they are not assigned a value: "the token expired" stays as is,
// and "Bearer" is only followed by a credential when that holds a digit or is 20 characters long.
func RedactText(s string) string {
	if s == "" {
		return s
	}
	s = authHeader.ReplaceAllStringFunc(s, func(m string) string {
		sub := authHeader.FindStringSubmatch(m)
		if strings.HasPrefix(sub[3], Redacted) || (sub[2] == "" && isSchemeWord(sub[3])) {
			return m
		}
		return sub[1] + sub[2] + Redacted
	})
	s = cookieHeader.ReplaceAllString(s, "${1}"+Redacted)
	s = bearer.ReplaceAllStringFunc(s, func(m string) string {
		sub := bearer.FindStringSubmatch(m)
		if !looksLikeCredential(sub[2]) {
			return m
		}
		return sub[1] + Redacted
	})
	s = queryParam.ReplaceAllStringFunc(s, func(m string) string {
		sub := queryParam.FindStringSubmatch(m)
		if !isURLSecretParam(sub[2]) || strings.HasPrefix(sub[3], Redacted) {
			return m
		}
		return sub[1] + sub[2] + "=" + Redacted
	})
	s = plainPair.ReplaceAllStringFunc(s, func(m string) string {
		sub := plainPair.FindStringSubmatch(m)
		name, val := sub[2], sub[4]
		// A value already redacted (by an earlier form) stops at its "]": leave it.
		if strings.HasPrefix(strings.Trim(val, `"'`), strings.TrimSuffix(Redacted, "]")) || !(IsSecretKey(name) || strings.EqualFold(name, "pwd")) {
			return m
		}
		return sub[1] + name + sub[3] + Redacted
	})
	// After the pairs: "dsn=postgres://u:p@h" is redacted whole, not cut at a redacted password.
	s = urlPassword.ReplaceAllStringFunc(s, func(m string) string {
		sub := urlPassword.FindStringSubmatch(m)
		if sub[2] == Redacted {
			return m
		}
		return sub[1] + Redacted + "@"
	})
	return telegramToken.ReplaceAllString(s, "${1}"+Redacted)
}

func isSchemeWord(w string) bool {
	switch strings.ToLower(w) {
	case "bearer", "basic", "digest", "token", "apikey":
		return true
	}
	return false
}

// looksLikeCredential tells a credential after "Bearer" from an ordinary word ("the bearer of").
func looksLikeCredential(v string) bool {
	if strings.HasPrefix(v, Redacted) {
		return false
	}
	if utf8.RuneCountInString(v) >= 20 {
		return true
	}
	return strings.ContainsAny(v, "0123456789")
}

func isURLSecretParam(name string) bool {
	if IsSecretKey(name) {
		return true
	}
	for _, p := range urlSecretParams {
		if strings.EqualFold(name, p) {
			return true
		}
	}
	return false
}

// Truncate cuts s to at most max characters (runes), adding the suffix "… [truncated N chars]"
// where N is the number of characters cut. max <= 0 means no limit.
func Truncate(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	n := utf8.RuneCountInString(s)
	if n <= max {
		return s
	}
	i, count := 0, 0
	for i = range s {
		if count == max {
			break
		}
		count++
	}
	return s[:i] + fmt.Sprintf("… [truncated %d chars]", n-max)
}
