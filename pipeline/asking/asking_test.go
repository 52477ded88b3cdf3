package asking

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/audit"
	"relaybot/chat"
)

// consentBook keeps consents in memory and records what was revoked.
type consentBook struct {
	list    []audit.Consent
	revoked []int64
}

func (b *consentBook) ListConsents(_ context.Context, f audit.ConsentFilter) ([]audit.Consent, error) {
	var out []audit.Consent
	for _, c := range b.list {
		if c.Platform == f.Platform && c.ChatID == f.ChatID {
			out = append(out, c)
		}
	}
	return out, nil
}

func (b *consentBook) RevokeConsent(_ context.Context, id int64) error {
	b.revoked = append(b.revoked, id)
	return nil
}

func groupMsg(user, args string) adapters.Inbound {
	return adapters.Inbound{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "-100"}, Kind: adapters.Group, UserID: user, Args: args}
}

// A consent is revoked by the person it covers (or its giver, a chat admin, a bot admin), never
// by another member; a number that names no consent of the chat is said so, and nothing is
// revoked.
func TestAConsentIsRevokedOnlyByThoseItConcerns(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tt := range []struct {
		name, user, args string
		admin            bool
		want             string
		revoked          bool
	}{
		{"the list", "7", "", false, "#4 shell for user 7, given by Ann", false},
		{"a bystander", "8", "revoke 4", false, "Only the person it covers", false},
		{"the person it covers", "7", "revoke 4", false, "Revoked #4: shell asks again.", true},
		{"its giver, by number alone", "9", "#4", false, "Revoked #4", true},
		{"a bot admin", "8", "revoke 4", true, "Revoked #4", true},
		{"a consent of another chat", "7", "revoke 5", false, "There is no always-allow answer 5 in this chat", false},
		{"no number", "7", "revoke all", false, "Usage: /allowed", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			book := &consentBook{list: []audit.Consent{
				{ID: 4, Platform: "telegram", ChatID: "-100", UserID: "7", Tool: "shell", GivenBy: "Ann", GivenByID: "9", ExpiresAt: now.AddDate(0, 0, 30)},
				{ID: 5, Platform: "telegram", ChatID: "-200", UserID: "7", Tool: "shell", GivenByID: "9", ExpiresAt: now.AddDate(0, 0, 30)},
			}}
			got, err := Allowed(context.Background(), book, groupMsg(tt.user, tt.args), tt.admin, now, log)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("/allowed %s by %s answered %q, want it to say %q", tt.args, tt.user, got, tt.want)
			}
			if revoked := len(book.revoked) > 0; revoked != tt.revoked {
				t.Errorf("/allowed %s by %s: revoked %v, want %v", tt.args, tt.user, book.revoked, tt.revoked)
			}
		})
	}
}

// A typed message in a chat with an open reply prompt is its answer only when its sender may
// answer and it is no command; anything else goes on as a message.
func TestATypedAnswerReachesTheOpenPromptOnlyFromAnAnswerer(t *testing.T) {
	qs := New(Options{})
	ref := chat.Ref{Platform: chat.Telegram, ChatID: "-100"}
	op := qs.prompts.openPrompt(ref, func(in adapters.Inbound) bool { return in.UserID == "7" })
	defer qs.prompts.close(ref, op)
	ctx := context.Background()
	msg := func(user, text, command string) adapters.Inbound {
		return adapters.Inbound{Chat: ref, Kind: adapters.Group, UserID: user, Text: text, Command: command}
	}
	if qs.Take(ctx, msg("8", "42", "")) {
		t.Error("a bystander's message was taken as the answer")
	}
	if qs.Take(ctx, msg("7", "", "stop")) {
		t.Error("a command was taken as the answer")
	}
	if qs.Take(ctx, adapters.Inbound{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "-200"}, UserID: "7", Text: "42"}) {
		t.Error("a message in another chat was taken as the answer")
	}
	if !qs.Take(ctx, msg("7", "42", "")) {
		t.Fatal("the asker's answer was not taken")
	}
	if got := <-op.answers; got.Text != "42" {
		t.Errorf("the prompt got %q, want 42", got.Text)
	}
}
