package adapters_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"relaybot/adapters"
)

func TestParseCommandReadsCommandsAsTelegramClientsMarkThem(t *testing.T) {
	tests := []struct {
		text string
		want adapters.Command
		ok   bool
	}{
		{"/reset", adapters.Command{Name: "reset"}, true},
		{"/STOP now", adapters.Command{Name: "stop", Args: "now"}, true},
		{"/audit fetch_url error 5", adapters.Command{Name: "audit", Args: "fetch_url error 5"}, true},
		{"/audit\nfetch_url", adapters.Command{Name: "audit", Args: "fetch_url"}, true},
		{"/help\u00a0me", adapters.Command{Name: "help", Args: "me"}, true},
		{"/reset@relay_bot", adapters.Command{Name: "reset", Bot: "relay_bot"}, true},
		{"/reset@OtherBot please", adapters.Command{Name: "reset", Bot: "OtherBot", Args: "please"}, true},
		{"/reset@bot, please", adapters.Command{Name: "reset", Bot: "bot", Args: ", please"}, true},
		{"/reset@a@b", adapters.Command{Name: "reset", Bot: "a", Args: "@b"}, true},
		{"/" + strings.Repeat("a", 32), adapters.Command{Name: strings.Repeat("a", 32)}, true},
		{"/" + strings.Repeat("a", 33), adapters.Command{}, false},
		{"/reset@", adapters.Command{}, false},
		{"/reset, please", adapters.Command{}, false},
		{"/etc/hosts", adapters.Command{}, false},
		{"/", adapters.Command{}, false},
		{"/ reset", adapters.Command{}, false},
		{"hello /reset", adapters.Command{}, false},
		{" /reset", adapters.Command{}, false},
		{"", adapters.Command{}, false},
		{"/résumé", adapters.Command{}, false},
	}
	for _, tt := range tests {
		got, ok := adapters.ParseCommand(tt.text)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseCommand(%q) = %+v, %v; want %+v, %v", tt.text, got, ok, tt.want, tt.ok)
		}
	}
}

func TestCommandNamingAnotherBotIsNotForUs(t *testing.T) {
	tests := []struct {
		cmd  adapters.Command
		self string
		want bool
	}{
		{adapters.Command{Name: "reset"}, "relay_bot", true},
		{adapters.Command{Name: "reset"}, "", true},
		{adapters.Command{Name: "reset", Bot: "Relay_Bot"}, "relay_bot", true},
		{adapters.Command{Name: "reset", Bot: "otherbot"}, "relay_bot", false},
		{adapters.Command{Name: "reset", Bot: "otherbot"}, "", false},
	}
	for _, tt := range tests {
		if got := tt.cmd.For(tt.self); got != tt.want {
			t.Errorf("%+v.For(%q) = %v, want %v", tt.cmd, tt.self, got, tt.want)
		}
	}
}

// FuzzParseCommand checks what every adapter relies on: a command is only ever read at the very
// start of the text, its name and bot are plain ASCII name characters, and its arguments are a
// trimmed tail of the text.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{"/reset", "/audit fetch_url 5", "/reset@bot, x", "/etc/hosts", "/a@b@c", "/help\nme", "hi /stop", "/\u2028x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		c, ok := adapters.ParseCommand(text)
		if !ok {
			if c != (adapters.Command{}) {
				t.Fatalf("ParseCommand(%q) refused the text but returned %+v", text, c)
			}
			return
		}
		if !strings.HasPrefix(text, "/") || c.Name == "" || len(c.Name) > 32 {
			t.Fatalf("ParseCommand(%q) = %+v: not a command at the start of the text", text, c)
		}
		for _, s := range []string{c.Name, c.Bot} {
			for i := 0; i < len(s); i++ {
				if b := s[i]; !(b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z') {
					t.Fatalf("ParseCommand(%q) = %+v: %q holds %q", text, c, s, b)
				}
			}
		}
		if c.Name != strings.ToLower(c.Name) {
			t.Fatalf("ParseCommand(%q) name %q is not lower-case", text, c.Name)
		}
		if c.Args != strings.TrimSpace(c.Args) || !strings.HasSuffix(strings.TrimSpace(text), c.Args) {
			t.Fatalf("ParseCommand(%q) args %q are not the trimmed rest of the text", text, c.Args)
		}
		if utf8.ValidString(text) && !utf8.ValidString(c.Args) {
			t.Fatalf("ParseCommand(%q) args %q are not valid UTF-8", text, c.Args)
		}
	})
}
