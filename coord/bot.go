package coord

import (
	"crypto/sha256"
	"encoding/hex"

	"relaybot/chat"
)

// Bot names one bot of a platform where the replicas meet: in the shared tables (chat budgets,
// replies in flight) and in the names of its leases. It carries the platform and a digest of the
// bot's token, so two bots on one database keep apart, and the token itself appears nowhere.
type Bot struct {
	Platform chat.Platform
	digest   string
}

// BotOf names the bot of platform whose token is token.
func BotOf(platform chat.Platform, token string) Bot {
	sum := sha256.Sum256([]byte(token))
	return Bot{Platform: platform, digest: hex.EncodeToString(sum[:8])}
}

// String renders the bot as the shared tables name it: "telegram 0123456789abcdef".
func (b Bot) String() string { return string(b.Platform) + " " + b.digest }

// lease names a role of the bot that one replica holds at a time: "telegram poller 0123…".
func (b Bot) lease(role string) string { return string(b.Platform) + " " + role + " " + b.digest }
