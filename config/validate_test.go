package config

import (
	"strings"
	"testing"
	"time"
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

func TestTasksKeysAreReadAndCheckedByName(t *testing.T) {
	base := "[storage]\ndsn = \"x.db\"\n[[models]]\nname = \"a\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n"
	cfg, err := Parse([]byte(base+"[tasks]\nmin_every = \"10m\"\nmisfire_grace = \"2h\"\ndefault_timezone = \"Asia/Tokyo\"\nmax_per_user = 3\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tasks.MinEvery.D() != 10*time.Minute || cfg.Tasks.MisfireGrace.D() != 2*time.Hour || cfg.Tasks.DefaultTimezone != "Asia/Tokyo" || cfg.Tasks.MaxPerUser != 3 || !cfg.Tasks.Enabled {
		t.Errorf("[tasks] = %+v, want the values written and enabled by default", cfg.Tasks)
	}
	for _, tc := range []struct{ text, key string }{
		{"min_every = \"30s\"", "tasks.min_every"},
		{"min_every = 300", "min_every"},
		{"default_timezone = \"Mars/Olympus\"", "tasks.default_timezone"},
		{"max_per_user = 0", "tasks.max_per_user"},
	} {
		_, err := Parse([]byte(base+"[tasks]\n"+tc.text+"\n"), func(string) (string, bool) { return "", false })
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: error %v, want one naming %s", tc.text, err, tc.key)
		}
	}
}
