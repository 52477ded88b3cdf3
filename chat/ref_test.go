package chat_test

import (
	"errors"
	"strings"
	"testing"

	"relaybot/chat"
)

// TestAChatReferenceReadsAsThePagesPrintIt: what the admin pages print of a chat (Ref.String)
// reads back as the same chat, threads and topics included, and what is not a chat says why.
func TestAChatReferenceReadsAsThePagesPrintIt(t *testing.T) {
	tests := []struct {
		in      string
		want    chat.Ref
		wantErr string // part of the error; empty when the reference is good
	}{
		{in: "web:3f9a0c", want: chat.Ref{Platform: chat.Web, ChatID: "3f9a0c"}},
		{in: "telegram:-100123", want: chat.Ref{Platform: chat.Telegram, ChatID: "-100123"}},
		{in: "telegram:-100123#7", want: chat.Ref{Platform: chat.Telegram, ChatID: "-100123", ThreadID: "7"}},
		{in: "discord:1180000000000000000", want: chat.Ref{Platform: chat.Discord, ChatID: "1180000000000000000"}},
		{in: "  Telegram:42 ", want: chat.Ref{Platform: chat.Telegram, ChatID: "42"}},
		{in: "telegram:@news_channel", want: chat.Ref{Platform: chat.Telegram, ChatID: "@news_channel"}},
		{in: "", wantErr: "empty"},
		{in: "12345", wantErr: "has no platform"},
		{in: "slack:C123", wantErr: `"slack" names no platform`},
		{in: ":123", wantErr: `"" names no platform`},
		{in: "telegram:", wantErr: "empty chat id"},
		{in: "telegram:#7", wantErr: "empty chat id"},
		{in: "telegram:-100#", wantErr: "empty thread id"},
		{in: "telegram:-100#7#8", wantErr: `has '#'`},
		{in: "telegram:1 2", wantErr: `has ' '`},
		{in: "web:a:b", wantErr: `has ':'`},
		{in: "web:a'--", wantErr: `has '\''`},
		{in: "telegram:42/u:42", wantErr: "give the chat (telegram:42)"},
		{in: "web:" + strings.Repeat("a", chat.MaxRefLen), wantErr: "more than 256"},
	}
	for _, tc := range tests {
		got, err := chat.ParseRef(tc.in)
		if tc.wantErr == "" {
			if err != nil || got != tc.want {
				t.Errorf("ParseRef(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
			if again, err := chat.ParseRef(got.String()); err != nil || again != got {
				t.Errorf("ParseRef(%q) does not read back what its String %q prints: %+v, %v", tc.in, got, again, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, chat.ErrBadRef) || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("ParseRef(%q) = %+v, %v; want an ErrBadRef saying %q", tc.in, got, err, tc.wantErr)
		}
	}
}

// TestAChatFilterTakesAReferenceOrTheBareID: the chat field of a filter takes the page's
// reference, the bare id keeps working beside a separate platform, and a reference that
// disagrees with the platform field is refused rather than finding nothing.
func TestAChatFilterTakesAReferenceOrTheBareID(t *testing.T) {
	tests := []struct {
		platform, chat string
		want           chat.Ref
		wantErr        string
	}{
		{"", "", chat.Ref{}, ""},
		{"telegram", "", chat.Ref{Platform: chat.Telegram}, ""},
		{"", "100", chat.Ref{ChatID: "100"}, ""},
		{"telegram", "-100123", chat.Ref{Platform: chat.Telegram, ChatID: "-100123"}, ""},
		{"", "web:abc", chat.Ref{Platform: chat.Web, ChatID: "abc"}, ""},
		{"web", "web:abc", chat.Ref{Platform: chat.Web, ChatID: "abc"}, ""},
		{"Telegram", "telegram:-1#2", chat.Ref{Platform: chat.Telegram, ChatID: "-1", ThreadID: "2"}, ""},
		{"discord", "web:abc", chat.Ref{}, "is on web, but the platform filter says"},
		{"", "web:", chat.Ref{}, "empty chat id"},
	}
	for _, tc := range tests {
		got, err := chat.FilterRef(tc.platform, tc.chat)
		if tc.wantErr == "" {
			if err != nil || got != tc.want {
				t.Errorf("FilterRef(%q, %q) = %+v, %v; want %+v", tc.platform, tc.chat, got, err, tc.want)
			}
			continue
		}
		if err == nil || !errors.Is(err, chat.ErrBadRef) || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("FilterRef(%q, %q) = %+v, %v; want an error saying %q", tc.platform, tc.chat, got, err, tc.wantErr)
		}
	}
}

// FuzzParseRef: any query string either reads as a chat that prints back to the same chat, or
// is refused with ErrBadRef; it never panics and never yields a reference the pages could not
// print.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"web:3f9a", "telegram:-100123#7", "discord:1", " Telegram:42 ", "telegram:42/u:1",
		"x:", ":", "#", "web:a#b#c", "web:\u00e9", "web:a\x00b", strings.Repeat("web:", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := chat.ParseRef(s)
		if err != nil {
			if !errors.Is(err, chat.ErrBadRef) {
				t.Fatalf("ParseRef(%q): error %v does not wrap ErrBadRef", s, err)
			}
			return
		}
		if !ref.Platform.Valid() || ref.ChatID == "" || len(ref.String()) > chat.MaxRefLen {
			t.Fatalf("ParseRef(%q) = %+v: not a chat the pages print", s, ref)
		}
		again, err := chat.ParseRef(ref.String())
		if err != nil || again != ref {
			t.Fatalf("ParseRef(%q) = %+v prints as %q, which reads as %+v, %v", s, ref, ref.String(), again, err)
		}
	})
}
