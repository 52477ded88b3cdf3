package admin

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"relaybot/chat"
	"relaybot/store"
	"relaybot/store/storetest"
)

// TestTheConversationPageShowsTheFilesBothWays: a turn's page names what the member sent (a
// photo, a voice note, a document whose name carried a secret, shown redacted) and what the bot
// sent (a generated picture shown as a thumbnail that opens it, an SVG that is only a
// download, a file whose bytes are not kept), each with its kind and size; a kept picture is
// served as itself, an SVG never inline, a file not kept is a 404, and none of it without a
// login.
func TestTheConversationPageShowsTheFilesBothWays(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	ctx := context.Background()
	conv, err := st.Conversations.Conversation(ctx, chat.Key{Platform: chat.Telegram, ChatID: "77"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := st.Turns.StartTurn(ctx, store.TurnStart{ConversationID: conv.ID, UserID: "77", UserName: "Ida",
		UserMessage: chat.Message{Role: store.RoleUser, Content: "draw my cat"}})
	if err != nil {
		t.Fatal(err)
	}
	png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 2040)...)
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)
	files := []store.TurnFile{
		{Kind: "image", Name: "image 1", MIME: "image/jpeg", Size: 51200},
		{Kind: "voice", Name: "voice", MIME: "audio/ogg", Size: 3000},
		{Kind: "document", Name: "token=abc123secret.txt", MIME: "text/plain", Size: 12},
		{FromBot: true, Kind: "image", Name: "cat.png", MIME: "image/png", Data: png},
		{FromBot: true, Kind: "image", Name: "cat.svg", MIME: "image/svg+xml", Data: svg},
		{FromBot: true, Kind: "file", Name: "notes.txt", MIME: "text/plain", Data: []byte("not kept")},
	}
	if err := st.Turns.FinishTurn(ctx, store.TurnEnd{TurnID: id, Status: store.TurnOK, Files: files,
		Messages: []chat.Message{{Role: store.RoleAssistant, Content: "Here is your cat."}}}); err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, st, testToken)
	c, _ := loggedIn(t, ts)
	code, body := get(t, c, ts.URL+"/admin/conversations/"+strconv.FormatInt(conv.ID, 10))
	if code != http.StatusOK {
		t.Fatalf("conversation page = %d: %s", code, body)
	}
	file := func(seq int) string {
		return "/admin/turns/" + strconv.FormatInt(id, 10) + "/files/" + strconv.Itoa(seq)
	}
	for _, want := range []string{
		"🖼 image 1 <span", "(image, image/jpeg, 50.0 KiB)",
		"voice <span", "(voice, audio/ogg, 2.9 KiB)",
		"(document, text/plain, 12 B)",
		`<img class="thumb" src="` + file(3) + `" alt="cat.png"`, `<a href="` + file(3) + `">cat.png</a>`, "(image, image/png, 2.0 KiB)",
		`<a href="` + file(4) + `">cat.svg</a>`,
		"notes.txt <span", "(file, text/plain, 8 B)",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the conversation page lacks %q", want)
		}
	}
	if strings.Contains(body, "abc123secret") || strings.Contains(body, `src="`+file(4)+`"`) {
		t.Errorf("the page shows a secret in a file name, or draws the SVG in place")
	}
	fetch := func(c *http.Client, path string) (*http.Response, []byte) {
		t.Helper()
		resp, err := c.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, b := fetch(c, file(3))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/png" || string(b) != string(png) ||
		resp.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "inline") {
		t.Errorf("the picture = %d %q %q, %d bytes; want the PNG shown in place", resp.StatusCode, resp.Header.Get("Content-Type"),
			resp.Header.Get("Content-Disposition"), len(b))
	}
	resp, _ = fetch(c, file(4))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/octet-stream" ||
		!strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Errorf("the SVG = %d %q %q; want a download only", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"))
	}
	for _, path := range []string{file(0), file(5), file(9), "/admin/turns/" + strconv.FormatInt(id, 10) + "/files/x"} {
		if resp, _ := fetch(c, path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s = %d, want 404 (not kept, or no such file)", path, resp.StatusCode)
		}
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if resp, b := fetch(noRedirect, file(3)); resp.StatusCode == http.StatusOK || string(b) == string(png) {
		t.Errorf("the picture is served without a login (%d)", resp.StatusCode)
	}
}
