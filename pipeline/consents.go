package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"relaybot/adapters"
	"relaybot/audit"
)

// allowed answers /allowed, the "always allow" answers of this chat: whose calls each covers,
// who gave it and when it ends; "/allowed revoke N" ends consent N. Anyone may list them; a
// consent is revoked by the person it covers, its giver, the chat's admins or the bot's admins.
func (c *commands) allowed(r *request) {
	in, out, log := r.in, r.out, r.log
	cs := c.opts.Tools.Consents
	if cs == nil {
		c.say(out, "Always-allow answers are not kept in this server.", log)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), saveTimeout)
	defer cancel()
	platform := strings.ToLower(string(in.Chat.Platform))
	list, err := cs.ListConsents(ctx, audit.ConsentFilter{Platform: platform, ChatID: in.Chat.ChatID, Now: c.opts.Now()})
	if err != nil {
		c.failed(r, "/allowed", err)
		return
	}
	args := strings.TrimSpace(in.Args)
	if args == "" {
		c.say(out, formatConsents(list), log)
		return
	}
	// "revoke N" as typed, or N alone: a Discord slash command's "revoke" option carries N.
	verb, arg, _ := strings.Cut(args, " ")
	if verb != "revoke" {
		verb, arg = "revoke", args
	}
	if _, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(arg), "#"), 10, 64); err != nil {
		c.say(out, "Usage: /allowed, or /allowed revoke N.", log)
		return
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(arg), "#"), 10, 64)
	var found *audit.Consent
	for i := range list {
		if err == nil && list[i].ID == id {
			found = &list[i]
		}
	}
	switch {
	case found == nil:
		c.say(out, "There is no always-allow answer "+strings.TrimSpace(arg)+" in this chat; /allowed lists them.", log)
		return
	case !c.mayRevoke(in, *found):
		log.Info("pipeline: /allowed revoke refused", "consent", found.ID)
		c.say(out, "Only the person it covers, the one who gave it, chat admins or bot admins can revoke it.", log)
		return
	}
	if err := cs.RevokeConsent(ctx, found.ID); err != nil && !errors.Is(err, audit.ErrConsentNotFound) {
		c.failed(r, "/allowed revoke", err, "consent", found.ID)
		return
	}
	log.Info("pipeline: consent revoked", "consent", found.ID, "tool", found.Tool)
	c.say(out, fmt.Sprintf("Revoked #%d: %s asks again.", found.ID, found.Tool), log)
}

// mayRevoke reports whether the sender may end consent x.
func (c *commands) mayRevoke(in adapters.Inbound, x audit.Consent) bool {
	return in.UserID == x.UserID || in.UserID == x.GivenByID || in.ChatAdmin || c.access.IsAdmin(in) ||
		in.Kind == adapters.Private
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
	return fmt.Sprintf("%s %s, given by %s, until %s UTC", tool, whom, nameOr(x.GivenBy, x.GivenByID), x.ExpiresAt.UTC().Format(time.DateOnly))
}
