package discord

import (
	"strings"
	"testing"
)

// The server refuses what Discord refuses of threads: a name outside 1-100 characters, an
// archive duration Discord does not offer, a second thread on one message (160004), changes to
// an archived thread other than reopening it (50083), and reopening a locked one without
// MANAGE_THREADS (50013).
func TestThreadsAreRefusedAsDiscordRefusesThem(t *testing.T) {
	s := New(Config{BudgetN: 100})
	defer s.Close()
	s.AddChannel(Channel{ID: "1", GuildID: "9", Type: ChannelGuildText})
	auth := "Bot " + s.Token()
	_, m := do(t, s, "POST", "/channels/1/messages", auth, `{"content":"question"}`)
	id, _ := m["id"].(string)
	_, other := do(t, s, "POST", "/channels/1/messages", auth, `{"content":"another"}`)
	otherID, _ := other["id"].(string)

	code := func(body map[string]any) int { c, _ := body["code"].(float64); return int(c) }
	for _, tc := range []struct {
		name, method, path, body string
		status, code             int
	}{
		{"a name too long", "POST", "/channels/1/messages/" + id + "/threads", `{"name":"` + strings.Repeat("é", 101) + `"}`, 400, 50035},
		{"an empty name", "POST", "/channels/1/messages/" + id + "/threads", `{"name":""}`, 400, 50035},
		{"an archive duration Discord does not offer", "POST", "/channels/1/messages/" + id + "/threads", `{"name":"q","auto_archive_duration":90}`, 400, 50035},
		{"an unknown message", "POST", "/channels/1/messages/123/threads", `{"name":"q"}`, 404, 10008},
		{"the thread", "POST", "/channels/1/messages/" + id + "/threads", `{"name":"` + strings.Repeat("é", 100) + `","auto_archive_duration":60}`, 201, 0},
		{"a second thread on the message", "POST", "/channels/1/messages/" + id + "/threads", `{"name":"q"}`, 400, 160004},
		{"a thread on a message in a thread", "POST", "/channels/" + id + "/messages/" + otherID + "/threads", `{"name":"q"}`, 404, 10008},
		{"a rename too long", "PATCH", "/channels/" + id, `{"name":"` + strings.Repeat("a", 101) + `"}`, 400, 50035},
		{"a rename", "PATCH", "/channels/" + id, `{"name":"Tides"}`, 200, 0},
	} {
		resp, body := do(t, s, tc.method, tc.path, auth, tc.body)
		if resp.StatusCode != tc.status || code(body) != tc.code {
			t.Errorf("%s: HTTP %d code %d, want %d code %d (%v)", tc.name, resp.StatusCode, code(body), tc.status, tc.code, body)
		}
	}
	if c, _ := s.Channel(id); c.Name != "Tides" || c.OwnerID != s.BotID() || c.ParentID != "1" || c.AutoArchive != 60 {
		t.Errorf("thread = %+v", c)
	}

	if err := s.ArchiveThread(id, true); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, method, path, body string
		status, code             int
	}{
		{"a rename of an archived thread", "PATCH", "/channels/" + id, `{"name":"x"}`, 400, 50083},
		{"a message in an archived, locked thread", "POST", "/channels/" + id + "/messages", `{"content":"x"}`, 400, 50083},
		{"reopening a locked thread without MANAGE_THREADS", "PATCH", "/channels/" + id, `{"archived":false}`, 403, 50013},
	} {
		resp, body := do(t, s, tc.method, tc.path, auth, tc.body)
		if resp.StatusCode != tc.status || code(body) != tc.code {
			t.Errorf("%s: HTTP %d code %d, want %d code %d", tc.name, resp.StatusCode, code(body), tc.status, tc.code)
		}
	}
	// An archived thread that is not locked is reopened by a message sent to it.
	if err := s.ArchiveThread(id, false); err != nil {
		t.Fatal(err)
	}
	if resp, _ := do(t, s, "POST", "/channels/"+id+"/messages", auth, `{"content":"x"}`); resp.StatusCode != 200 {
		t.Errorf("a message in an archived thread: HTTP %d", resp.StatusCode)
	}
	if c, _ := s.Channel(id); c.Archived {
		t.Error("the message did not reopen the thread")
	}
}
