package asking

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"relaybot/adapters"
	"relaybot/audit"
)

// Consents are the "always allow" answers kept (audit.Consents): what /allowed lists and revokes.
type Consents interface {
	ListConsents(ctx context.Context, f audit.ConsentFilter) ([]audit.Consent, error)
	RevokeConsent(ctx context.Context, id int64) error
}

// Allowed is the answer to /allowed, the "always allow" answers of in's chat: whose calls
// each covers, who gave it and when it ends; "/allowed revoke N" ends consent N. Anyone may list
// them; a consent is revoked by the person it covers, its giver, the chat's admins or the bot's
// admins (admin: the sender is one). err is a failure of cs, which the caller tells as it tells
// a turn's (it names users, hosts and databases).
func Allowed(ctx context.Context, cs Consents, in adapters.Inbound, admin bool, now time.Time, log *slog.Logger) (string, error) {
	platform := strings.ToLower(string(in.Chat.Platform))
	list, err := cs.ListConsents(ctx, audit.ConsentFilter{Platform: platform, ChatID: in.Chat.ChatID, Now: now})
	if err != nil {
		return "", fmt.Errorf("list the chat's consents: %w", err)
	}
	args := strings.TrimSpace(in.Args)
	if args == "" {
		return formatConsents(list), nil
	}
	// "revoke N" as typed, or N alone: a Discord slash command's "revoke" option carries N.
	verb, arg, _ := strings.Cut(args, " ")
	if verb != "revoke" {
		arg = args
	}
	arg = strings.TrimSpace(arg)
	id, err := strconv.ParseInt(strings.TrimPrefix(arg, "#"), 10, 64)
	if err != nil {
		return "Usage: /allowed, or /allowed revoke N.", nil
	}
	var found *audit.Consent
	for i := range list {
		if list[i].ID == id {
			found = &list[i]
		}
	}
	switch {
	case found == nil:
		return "There is no always-allow answer " + arg + " in this chat; /allowed lists them.", nil
	case !mayRevoke(in, admin, *found):
		log.Info("asking: /allowed revoke refused", "consent", found.ID)
		return "Only the person it covers, the one who gave it, chat admins or bot admins can revoke it.", nil
	}
	if err := cs.RevokeConsent(ctx, found.ID); err != nil && !errors.Is(err, audit.ErrConsentNotFound) {
		return "", fmt.Errorf("revoke consent %d: %w", found.ID, err)
	}
	log.Info("asking: consent revoked", "consent", found.ID, "tool", found.Tool)
	return fmt.Sprintf("Revoked #%d: %s asks again.", found.ID, found.Tool), nil
}

// mayRevoke reports whether the sender (a bot admin with admin) may end consent x.
func mayRevoke(in adapters.Inbound, admin bool, x audit.Consent) bool {
	return in.UserID == x.UserID || in.UserID == x.GivenByID || in.ChatAdmin || admin || in.Kind == adapters.Private
}

// formatConsents lists a chat's consents, one a line.
func formatConsents(list []audit.Consent) string {
	if len(list) == 0 {
		return "No tool is always allowed in this chat."
	}
	var b strings.Builder
	b.WriteString("Always allowed in this chat:")
	for _, x := range list {
		fmt.Fprintf(&b, "\n#%d %s", x.ID, consentLine(x))
	}
	b.WriteString("\nSend /allowed revoke N to end one.")
	return b.String()
}

// consentLine says what a consent covers, who gave it and when it ends.
func consentLine(x audit.Consent) string {
	tool := x.Tool
	if x.Server != "" {
		tool += " (MCP server " + x.Server + ")"
	}
	whom := "for everyone"
	if !x.ForEveryone() {
		whom = "for user " + x.UserID
	}
	return fmt.Sprintf("%s %s, given by %s, until %s UTC", tool, whom, cmp.Or(x.GivenBy, x.GivenByID), x.ExpiresAt.UTC().Format(time.DateOnly))
}
