package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/wait"
	"relaybot/store/storetest"
)

const replicaAdminToken = "replica-admin-token-0123456789"

// adminReplicas starts two replicas on one PostgreSQL database with the admin listener (behind
// a token) and the web chat, and returns their base URLs.
func adminReplicas(t *testing.T, e *env) [2]string {
	t.Helper()
	bases, _ := adminReplicaSet(t, e)
	return bases
}

// adminReplicaSet is adminReplicas that returns the replicas too.
func adminReplicaSet(t *testing.T, e *env) ([2]string, [2]*replica) {
	t.Helper()
	dsn := storetest.PostgresDatabaseDSN(t)
	var bases [2]string
	var reps [2]*replica
	for i := range bases {
		reps[i] = startReplica(t, replicaTOML(dsn, e).set("admin", webChatAdmin...).set("admin", "token", replicaAdminToken).parse(t))
		bases[i] = "http://" + reps[i].adminAddr(t)
	}
	return bases, reps
}

// adminLogin logs a browser in on base and returns it: cookies are per host, not per port, so
// its cookie reaches every replica on 127.0.0.1, as it would behind one load balancer.
func adminLogin(t *testing.T, base string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(base+"/admin/login", url.Values{"token": {replicaAdminToken}, "next": {"/admin/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login on %s: %s, want 303", base, resp.Status)
	}
	return c
}

func fetch(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestAnAdminLoginHoldsOnEveryReplicaAndItsLogoutOnAll logs in on one replica's admin and uses
// the cookie on the other: its pages (the replicas page lists both replicas) and its API answer;
// a logout on the first ends the login on both.
func TestAnAdminLoginHoldsOnEveryReplicaAndItsLogoutOnAll(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	bases := adminReplicas(t, e)
	c := adminLogin(t, bases[0])

	code, body := fetch(t, c, bases[1]+"/api/v1/instances")
	var list struct {
		Items []struct {
			ID   string `json:"id"`
			Self bool   `json:"self"`
		}
	}
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil || len(list.Items) != 2 {
		t.Fatalf("the second replica's API with the first's login: %d %s", code, body)
	}
	code, page := fetch(t, c, bases[1]+"/admin/replicas")
	if code != http.StatusOK {
		t.Fatalf("the second replica's replicas page with the first's login: %d, want 200", code)
	}
	for _, it := range list.Items {
		if !strings.Contains(page, it.ID) {
			t.Errorf("the replicas page does not list replica %s:\n%s", it.ID, page)
		}
	}
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the page has no logout form:\n%s", page)
	}

	u, _ := url.Parse(bases[0])
	cookies := c.Jar.Cookies(u)
	resp, err := c.PostForm(bases[0]+"/admin/logout", url.Values{"csrf": {m[1]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout on the first replica with the second's page token: %s, want 303", resp.Status)
	}
	// A browser that kept the cookie is refused by both replicas.
	kept := &http.Client{CheckRedirect: c.CheckRedirect}
	for _, base := range bases {
		req, _ := http.NewRequest(http.MethodGet, base+"/admin/replicas", nil)
		for _, ck := range cookies {
			req.AddCookie(ck)
		}
		resp, err := kept.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/admin/login") {
			t.Errorf("%s after the logout: %s to %q, want 303 to the login page", base, resp.Status, resp.Header.Get("Location"))
		}
	}
}

// TestAWebChatUserIsRecognisedByEveryReplica starts a web chat on one replica and sends a message
// through the other, with the page's token from the first: the second streams the answer, and a
// page load on the first then shows the exchange.
func TestAWebChatUserIsRecognisedByEveryReplica(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	bases := adminReplicas(t, e)
	c := adminLogin(t, bases[0])
	c.CheckRedirect = nil

	req, _ := http.NewRequest(http.MethodPost, bases[0]+"/chat/session", nil)
	req.Header.Set("Origin", bases[0])
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csrfOf := func(base string) string {
		t.Helper()
		code, page := fetch(t, c, base+"/chat")
		m := regexp.MustCompile(`name="csrf-token" content="([^"]+)"`).FindStringSubmatch(page)
		if code != http.StatusOK || m == nil {
			t.Fatalf("GET %s/chat: %d, not the browser's chat:\n%.300s", base, code, page)
		}
		return m[1]
	}
	first := csrfOf(bases[0])

	e.llm.Push(llm.Text("Paris."))
	second := &webChat{t: t, base: bases[1], client: c, csrf: first, msgs: map[string]webMsg{}}
	if got := csrfOf(bases[1]); got != first {
		t.Errorf("the second replica's chat page carries another token than the first's")
	}
	ctx, cancel := context.WithCancel(t.Context())
	second.stream(ctx)
	second.say("What is the capital of France?")
	second.waitMsg("the answer streamed by the replica that ran the turn", func(m webMsg) bool { return m.Role == "bot" && m.Text == "Paris." })
	cancel()

	// The answer is on screen before the turn is saved (its model calls are settled, then the
	// turn is written): a page loaded in between shows the exchange from its next load on.
	// Wait for the stored conversation, as a reload would find it, then load the page.
	wait.For(t, "the exchange stored, as the first replica reads it", func() bool {
		code, body := fetch(t, c, bases[0]+"/chat/conversations")
		var convs []struct {
			ID    int64 `json:"id"`
			Turns int   `json:"turns"`
		}
		if code != http.StatusOK || json.Unmarshal([]byte(body), &convs) != nil || len(convs) == 0 {
			return false
		}
		code, body = fetch(t, c, fmt.Sprintf("%s/chat/conversations/%d", bases[0], convs[0].ID))
		return code == http.StatusOK && strings.Contains(body, "Paris.")
	})
	firstPage := &webChat{t: t, base: bases[0], client: c, csrf: csrfOf(bases[0]), msgs: map[string]webMsg{}}
	firstPage.stream(t.Context())
	firstPage.waitMsg("the question, on a page load of the other replica", func(m webMsg) bool {
		return m.Role == "user" && m.Text == "What is the capital of France?"
	})
	firstPage.waitMsg("the answer, on a page load of the other replica", func(m webMsg) bool { return m.Role == "bot" && m.Text == "Paris." })
}

// TestAWebChatPageSeesATurnAnotherReplicaRuns keeps a browser's event stream on one replica
// while its messages land on the other, as a load balancer without sticky sessions does: the
// page shows the user's message, the answer streaming with its Stop button and then whole (a
// long one: larger than a notification carries) without a reload; and the Stop button pressed
// through the page's replica stops a turn the other one runs.
func TestAWebChatPageSeesATurnAnotherReplicaRuns(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	e := newEnv(t)
	bases, reps := adminReplicaSet(t, e)
	c := adminLogin(t, bases[0])
	c.CheckRedirect = nil
	req, _ := http.NewRequest(http.MethodPost, bases[0]+"/chat/session", nil)
	req.Header.Set("Origin", bases[0])
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	code, page := fetch(t, c, bases[0]+"/chat")
	m := regexp.MustCompile(`name="csrf-token" content="([^"]+)"`).FindStringSubmatch(page)
	if code != http.StatusOK || m == nil {
		t.Fatalf("GET /chat: %d, not the browser's chat:\n%.300s", code, page)
	}
	onA := &webChat{t: t, base: bases[0], client: c, csrf: m[1], msgs: map[string]webMsg{}}
	onA.stream(t.Context())
	toB := &webChat{t: t, base: bases[1], client: c, csrf: m[1], msgs: map[string]webMsg{}}

	// A long answer, paused halfway so the page must show it streaming.
	var parts []string
	for i := range 120 {
		sep := " "
		if i == 0 {
			sep = ""
		}
		parts = append(parts, fmt.Sprintf("%sSentence %03d of a long answer about the capital of France, which is Paris.", sep, i))
	}
	long := strings.Join(parts, "")
	halfway := make(chan struct{})
	forever := make(chan struct{})
	defer close(forever)
	e.llm.SetHandler(func(r llm.Request) llm.Reply {
		switch r.Messages[len(r.Messages)-1].Content {
		case "Tell me about Paris.":
			var chunks []llm.Chunk
			for i, p := range parts {
				ch := llm.Chunk{Content: p}
				if i == len(parts)/2 {
					ch.Wait = halfway
				}
				chunks = append(chunks, ch)
			}
			return llm.Reply{Chunks: chunks}
		default:
			return llm.Reply{Chunks: []llm.Chunk{{Content: "Streaming along"}, {Content: " forever", Wait: forever}}}
		}
	})

	toB.say("Tell me about Paris.")
	onA.waitMsg("the message posted through the other replica, on the page's stream", func(m webMsg) bool {
		return m.Role == "user" && m.Text == "Tell me about Paris."
	})
	onA.waitMsg("the answer streaming, with its Stop button", func(m webMsg) bool {
		return m.Role == "bot" && m.Stop && strings.HasPrefix(m.Text, parts[0]+parts[1])
	})
	close(halfway)
	answer := onA.waitMsg("the whole long answer, final", func(m webMsg) bool { return m.Role == "bot" && !m.Stop && m.Text == long })
	if len(answer.Text) < 8000 {
		t.Fatalf("the answer is %d bytes: too short to test events larger than a notification", len(answer.Text))
	}
	if n := onA.count(func(m webMsg) bool { return m.Role == "bot" }); n != 1 {
		t.Errorf("the page shows %d bot messages, want the one answer", n)
	}

	toB.say("Keep talking.")
	streaming := onA.waitMsg("the second answer streaming from the other replica", func(m webMsg) bool {
		return m.Role == "bot" && m.Stop && strings.HasPrefix(m.Text, "Streaming along")
	})
	onA.say("/stop") // the Stop button posts /stop to the page's replica
	onA.waitMsg("the second answer stopped, its Stop button gone", func(m webMsg) bool {
		return m.ID == streaming.ID && !m.Stop && strings.Contains(m.Text, "[stopped]")
	})
	if !strings.Contains(reps[1].logs.String(), "stopped a turn on another replica's request") {
		t.Errorf("the replica running the turn did not log the stop from the page's replica")
	}
	if n := onA.count(func(m webMsg) bool { return m.Role == "user" }); n != 3 {
		t.Errorf("the page shows %d user messages, want the two questions and /stop", n)
	}
}
