package telegram

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

type answer struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  struct {
		RetryAfter      int   `json:"retry_after"`
		MigrateToChatID int64 `json:"migrate_to_chat_id"`
	} `json:"parameters"`
}

func post(t *testing.T, s *Server, token, method string, form url.Values) answer {
	t.Helper()
	resp, err := http.PostForm(s.BaseURL()+"/bot"+token+"/"+method, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	if a.ErrorCode != 0 && a.ErrorCode != resp.StatusCode {
		t.Fatalf("error_code %d with HTTP %d", a.ErrorCode, resp.StatusCode)
	}
	return a
}

func TestServerSpeaksTheBotAPI(t *testing.T) {
	s, err := New(Options{RetryAfterUnit: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tok := s.Token()

	if a := post(t, s, "wrong", "getMe", nil); a.OK || a.ErrorCode != 401 {
		t.Fatalf("wrong token: %+v", a)
	}
	if a := post(t, s, tok, "getMe", nil); !a.OK || !strings.Contains(string(a.Result), s.BotUsername()) {
		t.Fatalf("getMe: %+v", a)
	}

	// Long polling: a getUpdates waiting with a timeout returns as soon as a message arrives.
	got := make(chan answer, 1)
	go func() { got <- post(t, s, tok, "getUpdates", url.Values{"timeout": {"10"}}) }()
	s.Send(Inbound{Chat: Chat{ID: 9}, From: User{ID: 9, FirstName: "U"}, Text: "hello"})
	var ups []struct {
		UpdateID int64 `json:"update_id"`
		Message  struct {
			Text string `json:"text"`
		} `json:"message"`
	}
	a := <-got
	if err := json.Unmarshal(a.Result, &ups); err != nil || len(ups) != 1 || ups[0].Message.Text != "hello" {
		t.Fatalf("getUpdates: %s", a.Result)
	}
	// The offset confirms it.
	post(t, s, tok, "getUpdates", url.Values{"offset": {"2"}})
	if s.PendingUpdates() != 0 {
		t.Fatal("offset did not confirm the update")
	}

	// Sends and edits share the chat's bucket of 3; the 4th at once gets a real 429.
	for i := 0; i < 3; i++ {
		if a := post(t, s, tok, "sendMessage", url.Values{"chat_id": {"9"}, "text": {"x"}}); !a.OK {
			t.Fatalf("send %d: %+v", i, a)
		}
	}
	a = post(t, s, tok, "editMessageText", url.Values{"chat_id": {"9"}, "message_id": {"2"}, "text": {"y"}})
	if a.ErrorCode != 429 || a.Parameters.RetryAfter < 1 || !strings.HasPrefix(a.Description, "Too Many Requests: retry after") {
		t.Fatalf("4th request: %+v", a)
	}

	// Edits: not modified, not found; entities validated in UTF-16 units.
	s2, err := New(Options{NoLimits: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	s2.Send(Inbound{Chat: Chat{ID: 9}, From: User{ID: 9}, Text: "hi"})
	tok = s2.Token()
	post(t, s2, tok, "sendMessage", url.Values{"chat_id": {"9"}, "text": {"🙂 ok"}, "entities": {`[{"type":"bold","offset":3,"length":2}]`}})
	if a := post(t, s2, tok, "sendMessage", url.Values{"chat_id": {"9"}, "text": {"🙂 ok"}, "entities": {`[{"type":"bold","offset":3,"length":3}]`}}); a.ErrorCode != 400 {
		t.Fatalf("entity past the end accepted: %+v", a)
	}
	if a := post(t, s2, tok, "editMessageText", url.Values{"chat_id": {"9"}, "message_id": {"2"}, "text": {"🙂 ok"}, "entities": {`[{"type":"bold","offset":3,"length":2}]`}}); !strings.Contains(a.Description, "message is not modified") {
		t.Fatalf("same text: %+v", a)
	}
	if a := post(t, s2, tok, "editMessageText", url.Values{"chat_id": {"9"}, "message_id": {"77"}, "text": {"z"}}); !strings.Contains(a.Description, "message to edit not found") {
		t.Fatalf("missing message: %+v", a)
	}
	// A keyboard edited in place; the same keyboard again is "not modified".
	kb := `{"inline_keyboard":[[{"text":"✓ A","callback_data":"a"}]]}`
	if a := post(t, s2, tok, "editMessageReplyMarkup", url.Values{"chat_id": {"9"}, "message_id": {"2"}, "reply_markup": {kb}}); !a.OK {
		t.Fatalf("keyboard edit: %+v", a)
	}
	if a := post(t, s2, tok, "editMessageReplyMarkup", url.Values{"chat_id": {"9"}, "message_id": {"2"}, "reply_markup": {kb}}); !strings.Contains(a.Description, "message is not modified") {
		t.Fatalf("the same keyboard again: %+v", a)
	}
	if a := post(t, s2, tok, "editMessageReplyMarkup", url.Values{"chat_id": {"9"}, "message_id": {"2"}, "text": {"x"}}); a.ErrorCode != 400 {
		t.Fatalf("a keyboard edit with text accepted: %+v", a)
	}
	if a := post(t, s2, tok, "sendMessage", url.Values{"chat_id": {"9"}, "text": {strings.Repeat("🙂", 2049)}}); !strings.Contains(a.Description, "message is too long") {
		t.Fatalf("4,098 units accepted: %+v", a)
	}
	msgs := s2.BotMessages(9)
	if len(msgs) != 1 || msgs[0].Text != "🙂 ok" || len(msgs[0].Entities) != 1 {
		t.Fatalf("chat state: %+v", msgs)
	}
	// Calls are recorded with their outcome.
	var codes []int
	for _, c := range s2.Calls() {
		codes = append(codes, c.Code)
	}
	if len(codes) != 8 || codes[0] != 200 || codes[1] != 400 || codes[4] != 200 {
		t.Fatalf("calls: %v", codes)
	}
}

func TestMigratedGroupAnswersWithTheSupergroup(t *testing.T) {
	s, err := New(Options{RetryAfterUnit: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tok := s.Token()
	s.Send(Inbound{Chat: Chat{ID: -42, Type: "group"}, From: User{ID: 9, FirstName: "U"}, Text: "hello"})
	s.MigrateChat(-42, Chat{ID: -1000000000042})
	for _, method := range []string{"sendMessage", "sendChatAction"} {
		a := post(t, s, tok, method, url.Values{"chat_id": {"-42"}, "text": {"hi"}, "action": {"typing"}})
		if a.OK || a.ErrorCode != 400 || a.Parameters.MigrateToChatID != -1000000000042 ||
			!strings.Contains(a.Description, "upgraded to a supergroup") {
			t.Errorf("%s to the old group: %+v", method, a)
		}
	}
	if a := post(t, s, tok, "sendMessage", url.Values{"chat_id": {"-1000000000042"}, "text": {"hi"}}); !a.OK {
		t.Fatalf("sendMessage to the supergroup: %+v", a)
	}
	if got := s.BotMessages(-1000000000042); len(got) != 1 || got[0].Text != "hi" {
		t.Errorf("supergroup shows %+v, want the one message", got)
	}
	if got := s.BotMessages(-42); len(got) != 0 {
		t.Errorf("old group shows %+v, want nothing", got)
	}
}

// The server takes rich messages as the Bot API documents them: HTML with the documented
// tags, thinking blocks in drafts only, within the limits.
func TestRichMessagesFollowTheDocumentedRules(t *testing.T) {
	s, err := New(Options{NoLimits: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Send(Inbound{Chat: Chat{ID: 5, Type: "private"}, From: User{ID: 5, FirstName: "U"}, Text: "hi"})
	rich := func(h string) string {
		b, _ := json.Marshal(map[string]string{"html": h})
		return string(b)
	}
	tests := []struct {
		method string
		params map[string]string
		code   int
	}{
		{"sendRichMessage", map[string]string{"rich_message": rich("<p>Hello <b>there</b></p><details><summary>s</summary><p>x</p></details>")}, 200},
		{"sendRichMessage", map[string]string{"rich_message": rich("<tg-thinking>hm</tg-thinking><p>x</p>")}, 400},
		{"sendRichMessageDraft", map[string]string{"draft_id": "1", "rich_message": rich("<tg-thinking>hm</tg-thinking>")}, 200},
		{"sendRichMessage", map[string]string{"rich_message": rich("<p>a<br>b</p>")}, 400},
		{"sendRichMessage", map[string]string{"rich_message": rich("<p>open")}, 400},
		{"sendRichMessage", map[string]string{"rich_message": rich("<p>" + strings.Repeat("x", RichMaxChars+1) + "</p>")}, 400},
		{"sendRichMessage", map[string]string{"rich_message": rich(strings.Repeat("<p>x</p>", RichMaxBlocks+1))}, 400},
		{"sendRichMessage", map[string]string{"rich_message": `{"html":"<p>x</p>","markdown":"x"}`}, 400},
		{"editMessageText", map[string]string{"message_id": "2", "rich_message": rich("<p>edited</p>")}, 200},
	}
	for i, tt := range tests {
		p := url.Values{"chat_id": {"5"}}
		for k, v := range tt.params {
			p.Set(k, v)
		}
		resp, err := http.PostForm(fmt.Sprintf(s.Endpoint(), s.Token(), tt.method), p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.code {
			t.Errorf("case %d (%s): answered %d, want %d", i, tt.method, resp.StatusCode, tt.code)
		}
	}
	ms := s.BotMessages(5)
	if len(ms) != 1 || ms[0].Rich == nil || ms[0].Text != "edited" {
		t.Fatalf("the chat shows %+v, want one rich message reading \"edited\"", ms)
	}
}

func TestSetMyCommandsTakesTheDocumentedParametersOnly(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	menu := `[{"command":"reset","description":"start a new conversation"},{"command":"help","description":"show this"}]`
	tests := []struct {
		name string
		form url.Values
		ok   bool
	}{
		{"the list", url.Values{"commands": {menu}}, true},
		{"with a scope and a language", url.Values{"commands": {menu}, "scope": {`{"type":"all_private_chats"}`}, "language_code": {"de"}}, true},
		{"no commands", url.Values{"scope": {`{"type":"default"}`}}, false},
		{"an undocumented parameter", url.Values{"commands": {menu}, "chat_id": {"5"}}, false},
		{"an upper-case command", url.Values{"commands": {`[{"command":"Reset","description":"x"}]`}}, false},
		{"an empty description", url.Values{"commands": {`[{"command":"reset","description":""}]`}}, false},
		{"an undocumented field", url.Values{"commands": {`[{"command":"reset","description":"x","hidden":true}]`}}, false},
		{"an unknown scope", url.Values{"commands": {menu}, "scope": {`{"type":"everyone"}`}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if a := post(t, s, s.Token(), "setMyCommands", tt.form); a.OK != tt.ok {
				t.Fatalf("setMyCommands answered %+v, want ok=%v", a, tt.ok)
			}
		})
	}
	want := []BotCommand{{"reset", "start a new conversation"}, {"help", "show this"}}
	if got := s.MyCommands(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("command menu %+v, want %+v (the default scope's list, not the German one)", got, want)
	}
}

// sendMessageDraft is taken as the Bot API documents it (private chats only, a non-zero
// draft_id, 0 to 4096 characters, an empty text for the "Thinking…" placeholder) and every draft
// shown is kept with its time, in order, as the calls are.
func TestSendMessageDraftAsDocumented(t *testing.T) {
	s, err := New(Options{NoLimits: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Send(Inbound{Chat: Chat{ID: 5, Type: "private"}, From: User{ID: 5, FirstName: "U"}, Text: "hi"})
	s.Send(Inbound{Chat: Chat{ID: -7, Type: "supergroup", Title: "g"}, From: User{ID: 5, FirstName: "U"}, Text: "hi"})
	tests := []struct {
		name   string
		params url.Values
		code   int
	}{
		{"a draft", url.Values{"chat_id": {"5"}, "draft_id": {"3"}, "text": {"Hel"}}, 200},
		{"the placeholder", url.Values{"chat_id": {"5"}, "draft_id": {"3"}, "text": {""}}, 200},
		{"spaces only show the placeholder", url.Values{"chat_id": {"5"}, "draft_id": {"3"}, "text": {"  "}}, 200},
		{"entities on no text", url.Values{"chat_id": {"5"}, "draft_id": {"3"}, "text": {""}, "entities": {`[{"type":"bold","offset":0,"length":1}]`}}, 400},
		{"in a group", url.Values{"chat_id": {"-7"}, "draft_id": {"3"}, "text": {"Hel"}}, 400},
		{"draft_id zero", url.Values{"chat_id": {"5"}, "draft_id": {"0"}, "text": {"Hel"}}, 400},
		{"no draft_id", url.Values{"chat_id": {"5"}, "text": {"Hel"}}, 400},
		{"4097 characters", url.Values{"chat_id": {"5"}, "draft_id": {"3"}, "text": {strings.Repeat("x", 4097)}}, 400},
		{"a user who never wrote", url.Values{"chat_id": {"6"}, "draft_id": {"3"}, "text": {"Hel"}}, 400},
		{"the whole text", url.Values{"chat_id": {"5"}, "draft_id": {"3"}, "text": {"Hello"}}, 200},
	}
	before := time.Now()
	for _, tc := range tests {
		if a := post(t, s, s.Token(), "sendMessageDraft", tc.params); a.OK != (tc.code == 200) || !a.OK && a.ErrorCode != tc.code {
			t.Errorf("%s: %+v, want %d", tc.name, a, tc.code)
		}
	}
	after := time.Now()
	drafts := s.Drafts(5)
	var texts []string
	for i, d := range drafts {
		texts = append(texts, d.Text)
		if d.Time.Before(before) || d.Time.After(after) || i > 0 && d.Time.Before(drafts[i-1].Time) {
			t.Errorf("draft %d shown at %v, want in order within %v..%v", i, d.Time, before, after)
		}
	}
	if got := strings.Join(texts, "|"); got != "Hel|||Hello" {
		t.Errorf("drafts shown %q, want \"Hel|||Hello\"", got)
	}
	if d, ok := s.CurrentDraft(5); !ok || d.Text != "Hello" || d.ID != 3 {
		t.Errorf("current draft %+v (%v), want draft 3 reading Hello", d, ok)
	}
	if len(s.Drafts(-7)) != 0 || len(s.BotMessages(5)) != 0 {
		t.Errorf("a refused draft or a draft left something: group drafts %v, messages %v", s.Drafts(-7), s.BotMessages(5))
	}
	n := 0
	for _, c := range s.Calls() {
		if c.Method == "sendMessageDraft" {
			n++
		}
	}
	if n != len(tests) {
		t.Errorf("%d sendMessageDraft calls recorded, want %d", n, len(tests))
	}
}

// A private chat's drafts draw on a budget of their own: a chat whose three messages spent its
// budget still shows drafts, up to DraftBurst at once; the next draft gets a 429.
func TestDraftsHaveABudgetOfTheirOwn(t *testing.T) {
	s, err := New(Options{DraftBurst: 4, DraftInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Send(Inbound{Chat: Chat{ID: 5, Type: "private"}, From: User{ID: 5, FirstName: "U"}, Text: "hi"})
	for i := range 3 {
		if a := post(t, s, s.Token(), "sendMessage", url.Values{"chat_id": {"5"}, "text": {"m"}}); !a.OK {
			t.Fatalf("message %d: %+v", i+1, a)
		}
	}
	if a := post(t, s, s.Token(), "sendMessage", url.Values{"chat_id": {"5"}, "text": {"m"}}); a.ErrorCode != 429 {
		t.Fatalf("a fourth message at once: %+v, want 429 (the chat's budget is spent)", a)
	}
	for i := range 4 {
		if a := post(t, s, s.Token(), "sendMessageDraft", url.Values{"chat_id": {"5"}, "draft_id": {"1"}, "text": {"d"}}); !a.OK {
			t.Fatalf("draft %d after the messages: %+v, want it shown", i+1, a)
		}
	}
	if a := post(t, s, s.Token(), "sendMessageDraft", url.Values{"chat_id": {"5"}, "draft_id": {"1"}, "text": {"d"}}); a.ErrorCode != 429 {
		t.Fatalf("a fifth draft at once: %+v, want 429", a)
	}
}
