package tools_test

import (
	"strings"
	"testing"

	"relaybot/tools"
)

func TestRedactText(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"authorization header", "request failed: Authorization: Bearer sk-abc123XYZ rejected",
			"request failed: Authorization: Bearer [redacted] rejected"},
		{"authorization without scheme", "authorization=abcdef123, retry", "authorization=[redacted], retry"},
		{"basic auth header", "Proxy-Authorization: Basic dXNlcjpwYXNz", "Proxy-Authorization: Basic [redacted]"},
		{"cookie header", "sent Cookie: session=abc; theme=dark\nnext line", "sent Cookie: [redacted]\nnext line"},
		{"bearer alone", "curl -H 'x' using bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "curl -H 'x' using bearer [redacted]"},
		{"token in URL", `Get "https://api.example.com/v1/items?token=s3cr3t&page=2": dial tcp: timeout`,
			`Get "https://api.example.com/v1/items?token=[redacted]&page=2": dial tcp: timeout`},
		{"api_key after &", "https://x.test/q?lang=en&api_key=AKIA123&x=1", "https://x.test/q?lang=en&api_key=[redacted]&x=1"},
		{"key param in URL", "https://maps.test/geo?key=AIzaSyXYZ", "https://maps.test/geo?key=[redacted]"},
		{"access_token in fragment", "https://app.test/cb#access_token=abc.def&state=1", "https://app.test/cb#access_token=[redacted]&state=1"},
		{"password pair", "connect failed: user=bob password=hunter2 host=db", "connect failed: user=bob password=[redacted] host=db"},
		{"env style", "DB_PASSWORD=p@ss;w0rd OTHER=1", "DB_PASSWORD=[redacted];w0rd OTHER=1"},
		{"quoted value", `client_secret="a b c" done`, `client_secret=[redacted] done`},
		{"colon pair", "api-key: 9f8e7d6c", "api-key: [redacted]"},
		{"telegram bot URL", `Post "https://api.telegram.org/bot123456:AAH-xyz_789/sendMessage": EOF`,
			`Post "https://api.telegram.org/bot[redacted]/sendMessage": EOF`},

		// Ordinary words stay.
		{"prose about tokens", "the token expired; enter your password again", "the token expired; enter your password again"},
		{"bearer as a word", "the bearer of bad news", "the bearer of bad news"},
		{"authorization as a word", "authorization failed for user bob", "authorization failed for user bob"},
		{"token counts", "max_tokens=4096 prompt_tokens: 12", "max_tokens=4096 prompt_tokens: 12"},
		{"harmless query", "https://x.test/search?q=password+reset&page=2", "https://x.test/search?q=password+reset&page=2"},
		{"keyword param", "https://x.test/?keyword=golang", "https://x.test/?keyword=golang"},
		{"empty", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tools.RedactText(tc.in); got != tc.want {
				t.Fatalf("RedactText(%q)\ngot  %q\nwant %q", tc.in, got, tc.want)
			}
			// RedactJSONText treats text that is not JSON the same way.
			if got := tools.RedactJSONText(tc.in); got != tc.want {
				t.Fatalf("RedactJSONText(%q)\ngot  %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

// Strings inside valid JSON are redacted too: a result that quotes a URL or a header.
func TestRedactJSONTextRedactsPlainSecretsInStrings(t *testing.T) {
	in := `{"url":"https://x.test/a?api_key=AK123","log":["Authorization: Bearer tok_9z"],"note":"the token expired"}`
	want := `{"log":["Authorization: Bearer [redacted]"],"note":"the token expired","url":"https://x.test/a?api_key=[redacted]"}`
	if got := tools.RedactJSONText(in); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestRedactTextLeavesNoSecret(t *testing.T) {
	secrets := []string{"hunter2", "sk-abc123XYZ", "AKIA123"}
	in := "password=hunter2 Authorization: Bearer sk-abc123XYZ https://x.test/?api_key=AKIA123"
	got := tools.RedactText(in)
	for _, s := range secrets {
		if strings.Contains(got, s) {
			t.Errorf("%q leaked in %q", s, got)
		}
	}
}
