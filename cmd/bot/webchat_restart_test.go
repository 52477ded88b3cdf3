package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"relaybot/config"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/logbuf"
	"relaybot/internal/testkit/wait"
	"relaybot/policy"
)

// transcriptModel answers the web chat's restart tests by what the user says: "think" with
// reasoning and an answer, "tool" with a call of the kit's echo (behind an approval), "slow"
// with an answer that waits on hang until stopped, "fail" with a refusal; anything else "plain".
func transcriptModel(hang <-chan struct{}) func(r llm.Request) llm.Reply {
	return func(r llm.Request) llm.Reply {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == "tool" {
			return llm.Text("tool said: " + last.Content)
		}
		switch text := last.Content; {
		case strings.HasSuffix(text, "think"):
			return llm.Reply{Chunks: []llm.Chunk{{Reasoning: "Let me consider the question."}, {Content: "Visible answer."}}}
		case strings.HasSuffix(text, "tool"):
			return llm.ToolCalls(llm.Call{ID: "call_1", Name: "echo", Args: []string{`{"text":"hi"}`}})
		case strings.HasSuffix(text, "slow"):
			return llm.Reply{Chunks: []llm.Chunk{{Content: "Starting a long"}, {Content: " answer", Wait: hang}}}
		case strings.HasSuffix(text, "fail"):
			return llm.Reply{Status: http.StatusBadRequest, Error: "this request is refused"}
		}
		return llm.Text("plain")
	}
}

// startTranscriptBot runs the bot of the restart tests: the web chat, echo behind an approval.
func startTranscriptBot(t *testing.T, e *env, hang <-chan struct{}) (cfg *config.Config, base string, stop func() error) {
	t.Helper()
	cfg = e.toml().set("admin", webChatAdmin...).parse(t)
	cfg.Tools.Policy = []policy.Rule{{Tool: "echo", Server: "kit", Action: "ask"}}
	e.llm.SetHandler(transcriptModel(hang))
	stop = e.start(cfg)
	return cfg, adminBase(t, e), stop
}

// adminBase is the address the admin listener (and the web chat) logged.
func adminBase(t *testing.T, e *env) string {
	t.Helper()
	e.waitLog("admin listening")
	m := regexp.MustCompile(`admin listening" addr=(\S+)`).FindStringSubmatch(e.logs.String())
	if m == nil {
		t.Fatalf("no admin address in the logs:\n%s", e.logs.String())
	}
	return "http://" + m[1]
}

// restart stops the bot and starts it again on the same database, and returns the web chat's
// new address.
func restart(t *testing.T, e *env, cfg *config.Config, stop func() error) string {
	t.Helper()
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	e.logs = &logbuf.Buffer{}
	e.start(cfg)
	return adminBase(t, e)
}

// reopen is the same browser (its cookie) opening the chat again at base.
func (w *webChat) reopen(base string) *webChat {
	w.t.Helper()
	again := &webChat{t: w.t, base: base, client: w.client, msgs: map[string]webMsg{}}
	resp, err := again.client.Get(base + "/chat")
	if err != nil {
		w.t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf-token" content="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		w.t.Fatalf("no chat page after the restart (status %d): %.300s", resp.StatusCode, page)
	}
	again.csrf = string(m[1])
	ctx, cancel := context.WithCancel(context.Background())
	w.t.Cleanup(cancel)
	again.stream(ctx)
	return again
}

// shown is what the page shows of each message, in the order it shows them (by pos).
func (w *webChat) shown() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	msgs := make([]webMsg, 0, len(w.ids))
	for _, id := range w.ids {
		msgs = append(msgs, w.msgs[id])
	}
	slices.SortStableFunc(msgs, func(a, b webMsg) int { return cmp.Compare(a.Pos, b.Pos) })
	var out []string
	for _, m := range msgs {
		out = append(out, shownLine(m))
	}
	return out
}

// shownLine is what the page shows of m.
func shownLine(m webMsg) string {
	body := m.HTML
	if body == "" {
		body = m.Text
	}
	return fmt.Sprintf("%s %s: %s", m.ID, m.Role, body)
}

// Through the real pipeline: folded reasoning, a tool's approval question and its answer, a
// stopped answer, an upload the bot could not read and a failed turn look the same after the
// bot restarts on the same database, message by message and in the same order; the Stop button
// posts no message of the user's, and the user's bubble never shows the pipeline's notes.
func TestWebChatShowsTheSameTranscriptAfterARestart(t *testing.T) {
	e := newEnv(t)
	hang := make(chan struct{})
	defer close(hang)
	cfg, base, stop := startTranscriptBot(t, e, hang)
	w := openWebChat(t, base)
	bot := func(sub string) func(webMsg) bool {
		return func(m webMsg) bool { return m.Role == "bot" && !m.Stop && strings.Contains(m.Text, sub) }
	}

	w.say("think")
	w.waitMsg("the answer with its reasoning", bot("Visible answer."))
	w.say("tool")
	q := w.waitMsg("the approval question", func(m webMsg) bool { return m.Question != "" && len(m.Choices) > 0 })
	if code, body := w.post("/chat/answer", url.Values{"q": {q.Question}, "choice": {"approve"}}); code != http.StatusNoContent {
		t.Fatalf("approve: %d %s", code, body)
	}
	w.waitMsg("the tool's answer", bot("tool said: hi"))
	w.say("slow")
	w.waitMsg("the slow answer streaming", func(m webMsg) bool { return m.Stop && strings.Contains(m.Text, "Starting") })
	if code, body := w.post("/chat/stop", url.Values{}); code != http.StatusAccepted {
		t.Fatalf("the Stop button: %d %s", code, body)
	}
	w.waitMsg("the stopped answer", bot("[stopped]"))
	if code, body := w.upload("look at this", false, 0, webUpload{"blob.bin", "application/octet-stream", []byte{0, 1, 2, 0, 0xfe}}); code != http.StatusAccepted {
		t.Fatalf("upload: %d %s", code, body)
	}
	w.waitMsg("the answer to the upload", bot("plain"))
	w.say("fail")
	w.waitMsg("the failed turn's line", bot("refused this message"))
	e.waitLog("status=error") // the failed turn is recorded, not only shown
	if n := w.count(func(m webMsg) bool { return m.Role == "user" && strings.HasPrefix(m.Text, "/stop") }); n != 0 {
		t.Errorf("the Stop button posted %d message(s) of the user's", n)
	}
	if u, _ := w.find(func(m webMsg) bool { return m.Role == "user" && strings.Contains(m.Text, "blob.bin") }); u.Text != "look at this\n📎 blob.bin" {
		t.Errorf("the upload's bubble shows %q, want what the user typed and the file's name", u.Text)
	}
	before := w.shown()

	after := w.reopen(restart(t, e, cfg, stop))
	var got []string
	wait.Until(t, "the same transcript after the restart", func() error {
		if got = after.shown(); strings.Join(got, "\n") != strings.Join(before, "\n") {
			return fmt.Errorf("the transcript changed across the restart.\nbefore:\n%s\n\nafter:\n%s", strings.Join(before, "\n"), strings.Join(got, "\n"))
		}
		return nil
	})
	checks := []struct {
		what string
		ok   func(string) bool
	}{
		{"the reasoning folded, apart from the answer", func(s string) bool {
			return strings.Contains(s, "<details>") && strings.Contains(s, "Let me consider the question.</p>\n</details>\n<p>Visible answer.</p>")
		}},
		{"the tool's line", func(s string) bool { return strings.Contains(s, "✓ echo") }},
		{"the stopped marker", func(s string) bool { return strings.Contains(s, "[stopped]") }},
	}
	joined := strings.Join(got, "\n")
	for _, c := range checks {
		if !c.ok(joined) {
			t.Errorf("after the restart the chat lacks %s:\n%s", c.what, joined)
		}
	}
	question, answer := -1, -1
	for i, s := range got {
		if strings.Contains(s, "Approve?") && question < 0 {
			question = i
		}
		if strings.Contains(s, "tool said: hi") {
			answer = i
		}
	}
	if question < 0 || answer < question {
		t.Errorf("the approval question is at %d and the answer it unblocked at %d; want the question first:\n%s", question, answer, joined)
	}
	if strings.Contains(joined, "[Not read") {
		t.Errorf("a note of the pipeline's shows in the chat:\n%s", joined)
	}

	// /reset closes the conversation; read back as an earlier one, it shows the same.
	after.say("/reset")
	after.waitMsg("the reset", func(m webMsg) bool { return m.Role == "bot" && strings.Contains(m.Text, "new conversation") })
	var list []struct {
		ID     int64 `json:"id"`
		Active bool  `json:"active"`
	}
	after.getJSON("/chat/conversations", &list)
	if len(list) != 2 || list[1].Active {
		t.Fatalf("the chat's conversations after /reset: %+v, want the new one and the earlier one", list)
	}
	var earlier []webMsg
	after.getJSON(fmt.Sprintf("/chat/conversations/%d", list[1].ID), &earlier)
	var read []string
	for _, m := range earlier {
		read = append(read, shownLine(m))
	}
	if len(read) < len(before) || strings.Join(read[:len(before)], "\n") != strings.Join(before, "\n") {
		t.Errorf("the earlier conversation reads:\n%s\nwant it to start with:\n%s", strings.Join(read, "\n"), strings.Join(before, "\n"))
	}
}

// getJSON reads path as JSON into v.
func (w *webChat) getJSON(path string, v any) {
	w.t.Helper()
	resp, err := w.client.Get(w.base + path)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		w.t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		w.t.Fatalf("GET %s: %v", path, err)
	}
}

// last is the message that appeared last.
func (w *webChat) last() webMsg {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.ids) == 0 {
		return webMsg{}
	}
	return w.msgs[w.ids[len(w.ids)-1]]
}
