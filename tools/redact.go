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
var secretKeyParts = [...]string{"token", "password", "passwd", "secret", "apikey", "authorization", "cookie", "credential", "privatekey"}

// IsSecretKey reports whether values under key are redacted: keys containing token, password,
// passwd, secret, api_key (or api-key, apikey), authorization, cookie, credential or private_key,
// in any case. Token counts such as max_tokens or total_tokens are not secrets.
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
// replaced by Redacted, at any depth. v is not modified.
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
	default:
		return v
	}
}

// looseSecretPair finds `"secret-ish key": value` pairs in text that is not valid JSON, so that
// malformed arguments are still redacted before they are stored.
var looseSecretPair = regexp.MustCompile(`(?i)("[^"\\]*(?:token|password|passwd|secret|api[-_ ]?key|authorization|cookie|credential|private[-_ ]?key)[^"\\]*"\s*:\s*)("(?:[^"\\]|\\.)*"?|[^,}\]\s]*)`)

// RedactJSONText redacts secret-looking keys in JSON text. Valid JSON objects and arrays are
// decoded, redacted at any depth and encoded again (keys sorted); other text keeps its shape, with
// the values of `"key": value` pairs under secret-looking keys replaced.
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
	if !looseSecretPair.MatchString(s) {
		return s
	}
	return looseSecretPair.ReplaceAllString(s, `${1}"`+Redacted+`"`)
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
