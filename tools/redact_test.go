package tools_test

import (
	"strings"
	"testing"

	"relaybot/tools"
)

func TestIsSecretKey(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"token", true}, {"Token", true}, {"access_token", true}, {"refreshToken", true},
		{"password", true}, {"DB_PASSWORD", true}, {"passwd", true},
		{"secret", true}, {"client_secret", true}, {"api_key", true}, {"X-Api-Key", true}, {"apikey", true},
		{"API KEY", true}, {"Authorization", true}, {"proxy-authorization", true},
		{"cookie", true}, {"Set-Cookie", true}, {"credentials", true}, {"private_key", true},
		{"query", false}, {"url", false}, {"author", false}, {"key", false}, {"keyword", false}, {"", false},
		{"max_tokens", false}, {"totalTokens", false}, {"prompt-tokens", false}, {"access_tokens", true}, {"tokens", true},
	}
	for _, tc := range tests {
		if got := tools.IsSecretKey(tc.key); got != tc.want {
			t.Errorf("IsSecretKey(%q) = %v, want %v", tc.key, got, tc.want)
		}
	}
}

func TestRedactJSONText(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain text unchanged", "it is 5 pm", "it is 5 pm"},
		{"object, nested", `{"a":{"b":[{"Token":"x"}]},"n":1.50}`, `{"a":{"b":[{"Token":"[redacted]"}]},"n":1.50}`},
		{"secret object value", `{"secret":{"k":"v"}}`, `{"secret":"[redacted]"}`},
		{"array at the top", `[{"password":"p"},2]`, `[{"password":"[redacted]"},2]`},
		{"no html escaping", `{"q":"<a&b>"}`, `{"q":"<a&b>"}`},
		{"malformed JSON", `{"token": "abc", "q": 1`, `{"token": "[redacted]", "q": 1`},
		{"malformed, unquoted value", `{"api_key": 12345, "q": 1`, `{"api_key": "[redacted]", "q": 1`},
		{"malformed, escaped quote", `{"cookie":"a\"b", "q"`, `{"cookie":"[redacted]", "q"`},
		{"two values", `{"a":1} {"token":"x"}`, `{"a":1} {"token":"[redacted]"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tools.RedactJSONText(tc.in); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"hello", 5, "hello"},
		{"hello", 0, "hello"},
		{"hello!", 5, "hello… [truncated 1 chars]"},
		{"héllo wörld", 4, "héll… [truncated 7 chars]"},
		{strings.Repeat("日", 10), 9, strings.Repeat("日", 9) + "… [truncated 1 chars]"},
	}
	for _, tc := range tests {
		if got := tools.Truncate(tc.in, tc.max); got != tc.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}
