package chat_test

import (
	"testing"

	"relaybot/chat"
)

// TestKeysOfDifferentConversationsNeverReadAlike: the string that serialises turns tells apart a
// chat, a thread in it and one user's conversation there.
func TestKeysOfDifferentConversationsNeverReadAlike(t *testing.T) {
	tests := []struct {
		key  chat.Key
		want string
	}{
		{chat.Key{Platform: "telegram", ChatID: "42", UserID: "42"}, "telegram:42/u:42"},
		{chat.Key{Platform: "telegram", ChatID: "-100", ThreadID: "7"}, "telegram:-100#7"},
		{chat.Key{Platform: "discord", ChatID: "9", ThreadID: "11", UserID: "5"}, "discord:9#11/u:5"},
		{chat.Key{Platform: "web", ChatID: "c1"}, "web:c1"},
	}
	seen := map[string]bool{}
	for _, tc := range tests {
		got := tc.key.String()
		if got != tc.want || seen[got] {
			t.Errorf("%+v.String() = %q, want %q (unique)", tc.key, got, tc.want)
		}
		seen[got] = true
	}
}

// TestOnlyImagesAreShownAsPictures: a reply shows image/* files as pictures and sends anything
// else, including a MIME type that merely starts alike, as a document.
func TestOnlyImagesAreShownAsPictures(t *testing.T) {
	tests := []struct {
		mime string
		want bool
	}{
		{"image/png", true},
		{"image/svg+xml", true},
		{"image/", false},
		{"text/csv", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := (chat.File{Name: "f", MIME: tc.mime}).IsImage(); got != tc.want {
			t.Errorf("IsImage(%q) = %v, want %v", tc.mime, got, tc.want)
		}
	}
}
