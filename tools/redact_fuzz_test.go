package tools_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"relaybot/tools"
)

// FuzzRedactJSONText: whatever text a tool call's arguments, result or error holds, redaction
// never panics, keeps valid JSON valid, changes nothing a second time (a redacted row stays as it
// is), and a password planted in a URL, under a secret key or in a signed URL never survives.
func FuzzRedactJSONText(f *testing.F) {
	f.Add(`{"dsn":"postgres://admin:hunter2@10.0.0.5/prod"}`, "hunter2xyz")
	f.Add("connect to postgres://admin:hunter2@10.0.0.5/prod", "s3cretpw")
	f.Add("GET https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIA&X-Amz-Signature=abc", "sigvalue1")
	f.Add(`{"a":[{"token":"x"},{"max_tokens":5}],"q":"Bearer sk-1234567890"}`, "tokentoken")
	f.Add(`{"token": "abc", "q": 1`, "unfinished")
	f.Add("Authorization: Bearer abc\nCookie: a=b; c=d", "cookieval")
	f.Add("password=hunter2 and https://api.telegram.org/bot123:AAbb/sendMessage", "tgtoken99")
	f.Add(`["amqp://guest:guest@mq/vhost", "?sig=zz&key=kk"]`, "keyvalue77")
	f.Fuzz(func(t *testing.T, text, secret string) {
		once := tools.RedactJSONText(text)
		if twice := tools.RedactJSONText(once); twice != once {
			t.Fatalf("redacting a redacted text changed it:\nin    %q\nonce  %q\ntwice %q", text, once, twice)
		}
		if json.Valid([]byte(strings.TrimSpace(text))) && (strings.HasPrefix(strings.TrimSpace(text), "{") || strings.HasPrefix(strings.TrimSpace(text), "[")) &&
			!json.Valid([]byte(once)) {
			t.Fatalf("valid JSON became invalid: %q → %q", text, once)
		}
		if !plantable(secret) {
			return
		}
		shapes := []string{
			`{"password":"` + secret + `"}`,
			`{"x":{"api_key":"` + secret + `"}}`,
			"dial postgres://admin:" + secret + "@db.internal:5432/app failed",
			`{"url":"mysql://root:` + secret + `@db/app"}`,
			"https://b.s3.amazonaws.com/k?X-Amz-Date=1&X-Amz-Signature=" + secret,
			"https://x.example/f?sig=" + secret + "&se=1",
		}
		if !strings.Contains(text, secret) {
			shapes = append(shapes, text+" token="+secret)
		}
		for _, shape := range shapes {
			if got := tools.RedactJSONText(shape); strings.Contains(got, secret) {
				t.Fatalf("secret %q survived in %q", secret, got)
			}
		}
	})
}

// plantable reports whether s can stand for a password in the shapes above: letters and digits
// only, long enough not to occur in the surrounding text by chance.
func plantable(s string) bool {
	if len(s) < 8 {
		return false
	}
	for _, r := range s {
		if r > unicode.MaxASCII || !(unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return false
		}
	}
	return !strings.Contains("redacted", strings.ToLower(s))
}
