package config

import (
	"reflect"
	"testing"
	"time"
)

// TestDurationKeysKeepTheirUnitAndTakeDurations: a number under a *_sec, *_minutes or *_days key
// counts that unit as it always did, in plain tables, [[array]] entries and [speech]'s embedded
// keys; a string is a Go duration.
func TestDurationKeysKeepTheirUnitAndTakeDurations(t *testing.T) {
	cfg, err := Parse([]byte(`
[storage]
retention_days = 7
[[models]]
model = "a"
base_url = "http://127.0.0.1:9/v1"
timeout_sec = 30
[[models]]
model = "b"
base_url = "http://127.0.0.1:9/v1"
timeout_sec = "90s"
[chat]
turn_wait_sec = "2m"
idle_reset_minutes = 45
turn_timeout_sec = 600
[tools]
always_allow_days = "36h"
approval_timeout_sec = 10
[speech]
base_url = "http://127.0.0.1:9/v1"
model = "whisper-1"
timeout_sec = 5
max_seconds = "1m30s"
[[speech.fallbacks]]
base_url = "http://127.0.0.1:9/v1"
model = "whisper-2"
timeout_sec = 7
[[mcp.servers]]
name = "x"
transport = "http"
url = "http://127.0.0.1:9/mcp"
connect_timeout_sec = 12
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key       string
		got, want time.Duration
	}{
		{"storage.retention_days", cfg.Storage.Retention, 7 * 24 * time.Hour},
		{"models[0].timeout_sec", cfg.Models[0].Timeout, 30 * time.Second},
		{"models[1].timeout_sec", cfg.Models[1].Timeout, 90 * time.Second},
		{"chat.turn_wait_sec", cfg.Chat.TurnWait, 2 * time.Minute},
		{"chat.idle_reset_minutes", cfg.Chat.IdleReset, 45 * time.Minute},
		{"chat.turn_timeout_sec", cfg.Chat.TurnTimeout, 10 * time.Minute},
		{"chat.shutdown_grace_sec (default)", cfg.Chat.ShutdownGrace, 30 * time.Second},
		{"tools.always_allow_days", cfg.Tools.AlwaysAllow, 36 * time.Hour},
		{"tools.approval_timeout_sec", cfg.Tools.ApprovalTimeout, 10 * time.Second},
		{"tools.elicitation_timeout_sec (default)", cfg.Tools.ElicitationTimeout, 5 * time.Minute},
		{"speech.timeout_sec", cfg.Speech.Timeout, 5 * time.Second},
		{"speech.max_seconds", cfg.Speech.MaxAudio, 90 * time.Second},
		{"speech.fallbacks[0].timeout_sec", cfg.Speech.Fallbacks[0].Timeout, 7 * time.Second},
		{"mcp.servers[0].connect_timeout_sec", cfg.MCP.Servers[0].ConnectTimeout, 12 * time.Second},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.key, tc.got, tc.want)
		}
	}
}

// TestEveryDurationKeyNamesItsUnit: a duration field's key says what a number there counts, or
// a number would be read as nanoseconds.
func TestEveryDurationKeyNamesItsUnit(t *testing.T) {
	var check func(reflect.Type, string)
	check = func(tp reflect.Type, path string) {
		for i := 0; i < tp.NumField(); i++ {
			f := tp.Field(i)
			name := f.Tag.Get("toml")
			ft := f.Type
			if ft.Kind() == reflect.Slice {
				ft = ft.Elem()
			}
			switch {
			case name == "-" || !f.IsExported():
			case ft == durationType:
				if _, _, ok := keyUnit(name); !ok {
					t.Errorf("%s%s: duration key without a unit suffix (_sec, _seconds, _minutes, _days)", path, name)
				}
			case ft.Kind() == reflect.Struct:
				check(ft, path+name+".")
			}
		}
	}
	check(reflect.TypeOf(Config{}), "")
}
