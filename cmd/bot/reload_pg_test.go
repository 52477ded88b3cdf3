package main

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"relaybot/config"
	"relaybot/internal/testkit/wait"
	"relaybot/store/storetest"
)

// TestAReloadIsAnnouncedToEveryReplicaAndTheirDigestsShown runs two replicas on PostgreSQL, each
// with a config file of its own. A reload asked of the first is announced to the second, which
// reads its own file again; the Replicas page shows which configuration each runs: while only
// the first file was edited the second replica runs another digest (and the page says so), and
// once both files say the same, one reload brings both to one digest.
func TestAReloadIsAnnouncedToEveryReplicaAndTheirDigestsShown(t *testing.T) {
	e := newEnv(t)
	dsn := storetest.PostgresDSN(t)
	c := replicaTOML(dsn, e).set("admin", webChatAdmin...).set("admin", "token", replicaAdminToken)
	var paths [2]string
	var bases [2]string
	var reps [2]*replica
	for i := range reps {
		paths[i] = c.write(t)
		cfg, err := config.Load(paths[i])
		if err != nil {
			t.Fatal(err)
		}
		reps[i] = startReplica(t, cfg)
		bases[i] = "http://" + reps[i].adminAddr(t)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the first replica's log:\n%s\nthe second's:\n%s", reps[0].logs, reps[1].logs)
		}
	})
	api := func(method, base, path string, into any) int {
		t.Helper()
		return callAdmin(t, method, base, path, replicaAdminToken, into)
	}
	digests := func() map[string]bool {
		var list struct {
			Items []struct {
				Digest string `json:"config_digest"`
			}
		}
		if code := api(http.MethodGet, bases[0], "/api/v1/instances", &list); code != http.StatusOK || len(list.Items) != 2 {
			t.Fatalf("GET /api/v1/instances: %d, %d replicas", code, len(list.Items))
		}
		out := map[string]bool{}
		for _, it := range list.Items {
			out[it.Digest] = true
		}
		return out
	}
	settingsDigest := func(base string) string {
		var s struct {
			Digest string `json:"digest"`
		}
		if code := api(http.MethodGet, base, "/api/v1/settings", &s); code != http.StatusOK {
			t.Fatalf("GET %s/api/v1/settings: %d", base, code)
		}
		return s.Digest
	}
	for _, r := range reps {
		wait.For(t, "a replica listening for reloads", func() bool { return strings.Contains(r.logs.String(), "listening for config reloads") })
	}
	first := settingsDigest(bases[0])
	wait.For(t, "both replicas' digests recorded", func() bool { d := digests(); return len(d) == 1 && d[first] })

	edited := c.clone().set("agent", "system_prompt", "You are the reloaded bot.").String()
	if err := os.WriteFile(paths[0], []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := api(http.MethodPost, bases[0], "/api/v1/settings/reload", nil); code != http.StatusOK {
		t.Fatalf("POST /api/v1/settings/reload: %d", code)
	}
	wait.For(t, "the second replica reading its file again", func() bool {
		return strings.Contains(reps[1].logs.String(), "another replica reloaded its config") &&
			strings.Contains(reps[1].logs.String(), "nothing to change live")
	})
	second := settingsDigest(bases[0])
	if second == first {
		t.Fatal("the reloaded replica's digest did not change")
	}
	wait.For(t, "the digests of the two configurations", func() bool { d := digests(); return len(d) == 2 && d[first] && d[second] })
	code, page := fetch(t, adminLogin(t, bases[0]), bases[0]+"/admin/replicas")
	if code != http.StatusOK || !strings.Contains(page, second) || !strings.Contains(page, first) || !strings.Contains(page, "not this one") {
		t.Fatalf("the Replicas page (%d) does not tell the two configurations apart:\n%s", code, page)
	}

	if err := os.WriteFile(paths[1], []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := api(http.MethodPost, bases[0], "/api/v1/settings/reload", nil); code != http.StatusOK {
		t.Fatalf("POST /api/v1/settings/reload: %d", code)
	}
	wait.For(t, "one digest on both replicas", func() bool { d := digests(); return len(d) == 1 && d[second] })
	if got := settingsDigest(bases[1]); got != second {
		t.Fatalf("the second replica runs %s, want %s", got, second)
	}
}
