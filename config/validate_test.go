package config

import (
	"strings"
	"testing"
)

// Every key holding a "platform:id" reference shares one check; each must refuse a bare id and
// name itself, and take the same reference written with its platform.
func TestChatAndUserReferencesNeedTheirPlatform(t *testing.T) {
	tests := []struct {
		name, bare, good, want string
	}{
		{"per-chat tools", "[tools.per_chat]\n\"12345\" = [\"x\"]\n", "[tools.per_chat]\n\"telegram:12345\" = [\"x\"]\n", `tools.per_chat: keys must look like "platform:chat_id", got "12345"`},
		{"policy chats", "[[tools.policy]]\nchats = [\"12345\"]\naction = \"deny\"\n", "[[tools.policy]]\nchats = [\"telegram:12345\"]\naction = \"deny\"\n", `tools.policy[0].chats: must look like "platform:chat_id", got "12345"`},
		{"quota users", "[[quotas.overrides]]\nusers = [\":12345\"]\ntokens_per_day = 5\n", "[[quotas.overrides]]\nusers = [\"*:12345\"]\ntokens_per_day = 5\n", `quotas.overrides[0].users: must look like "platform:id" or "*:id", got ":12345"`},
		{"access lists", "[access]\ndeny_chats = [\"discord:\"]\n", "[access]\ndeny_chats = [\"discord:1\"]\n", `access.deny_chats[0]: must look like "platform:id" or "*:id", got "discord:"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse([]byte(minimal+tc.bare), env(nil)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("bare reference: error = %v, want one saying %q", err, tc.want)
			}
			if _, err := Parse([]byte(minimal+tc.good), env(nil)); err != nil {
				t.Errorf("reference with its platform refused: %v", err)
			}
		})
	}
}
