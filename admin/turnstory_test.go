package admin

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/store"
	"relaybot/store/storetest"
)

// seedStory stores a turn that asks with a secret in it, reasons, calls a tool that fails and
// one that answers, and answers at length. It returns the turn's id.
func seedStory(t *testing.T, st *store.Database) int64 {
	t.Helper()
	ctx := context.Background()
	conv, err := st.Conversations.Conversation(ctx, chat.Key{Platform: "telegram", ChatID: "42"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := st.Turns.StartTurn(ctx, store.TurnStart{ConversationID: conv.ID, UserID: "u1",
		UserMessage: chat.Message{Role: store.RoleUser, Content: "Check the weather with api_key=sk-live-abcdef1234567890 please"}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UTC()
	for i, c := range []struct {
		tool, result, err string
		status            audit.Status
	}{{"weather", "", "upstream 502: bad gateway", audit.StatusError}, {"fetch_url", `{"temp":21}`, "", audit.StatusOK}} {
		rec := audit.Record{TurnID: id, ConversationID: conv.ID, Platform: "telegram", ChatID: "42", UserID: "u1",
			Round: i + 1, ToolCallID: fmt.Sprint("call_", i), ToolName: c.tool, Arguments: `{"city":"Paris"}`, StartedAt: t0}
		if err := st.ToolCalls.StartToolCall(ctx, &rec); err != nil {
			t.Fatal(err)
		}
		rec.Status, rec.Result, rec.Error = c.status, c.result, c.err
		if err := st.ToolCalls.FinishToolCall(ctx, &rec); err != nil {
			t.Fatal(err)
		}
	}
	answer := "It is 21 degrees in Paris. " + strings.Repeat("The forecast goes on. ", 40)
	err = st.Turns.FinishTurn(ctx, store.TurnEnd{TurnID: id, Status: store.TurnOK, Model: "main", Rounds: 3, TokensIn: 3000, TokensOut: 300,
		Messages: []chat.Message{
			{Role: store.RoleAssistant, Reasoning: "The user wants the weather; weather first.", ToolCalls: []chat.ToolCall{{ID: "call_0", Name: "weather", Arguments: `{"city":"Paris"}`}}},
			{Role: store.RoleTool, ToolCallID: "call_0", Content: "error: upstream 502"},
			{Role: store.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "fetch_url", Arguments: `{"city":"Paris"}`}}},
			{Role: store.RoleTool, ToolCallID: "call_1", Content: `{"temp":21}`},
			{Role: store.RoleAssistant, Content: answer},
		},
		LLMCalls: []chat.ModelCall{
			{Round: 1, Model: "main", Status: "ok", StartedAt: t0, TokensIn: 1000, TokensOut: 100},
			{Round: 2, Model: "main", Status: "ok", StartedAt: t0, TokensIn: 1000, CachedIn: 800, TokensOut: 100},
			{Round: 3, Model: "main", Status: "ok", StartedAt: t0, TokensIn: 1000, CachedIn: 900, TokensOut: 100},
		}})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// The turn page tells what was asked (redacted), the model's reasoning folded, each tool's
// arguments, result and the reason a failed one failed, the answer folded when long, and the
// turn's cached tokens and cost.
func TestTheTurnPageTellsTheStory(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	id := seedStory(t, st)
	_, ts := newTestServer(t, st, "", func(o *Options) {
		o.Prices = map[string]chat.Price{"main": {In: 2, CachedIn: 0.5, Out: 10}}
	})
	page := getPage(t, ts, fmt.Sprintf("/admin/turns/%d", id))
	section := func(id string) string {
		end := map[string]string{"asked": "div", "reasoning": "details", "tools": "ol", "answer": "div"}[id]
		m := regexp.MustCompile(`(?s)id="` + id + `"[^>]*>(.*?)</` + end + `>\s*(?:</section>|<h2>|<div)`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("the turn page has no %s:\n%s", id, page)
		}
		return m[1]
	}
	if asked := section("asked"); !strings.Contains(asked, "Check the weather") || strings.Contains(page, "sk-live-abcdef1234567890") {
		t.Errorf("asked = %q, want the question with its key redacted everywhere on the page", asked)
	}
	if r := section("reasoning"); !strings.Contains(r, "weather first") || strings.Contains(page, `id="reasoning" open`) {
		t.Errorf("reasoning = %q, want it folded", r)
	}
	tools := section("tools")
	for _, want := range []string{"weather", "upstream 502: bad gateway", "fetch_url", "&#34;temp&#34;: 21", "&#34;city&#34;: &#34;Paris&#34;"} {
		if !strings.Contains(tools, want) {
			t.Errorf("the tools' rows do not show %q:\n%s", want, tools)
		}
	}
	if strings.Index(tools, "weather") > strings.Index(tools, "fetch_url") {
		t.Error("the tools' rows are not in the order the tools ran")
	}
	if !strings.Contains(page, "failed: upstream 502: bad gateway") {
		t.Error("the failed tool's timeline row does not say why it failed")
	}
	answer := section("answer")
	if !strings.Contains(answer, `<details class="fold"><summary>It is 21 degrees in Paris.`) || !strings.Contains(answer, "The forecast goes on.") {
		t.Errorf("the long answer is not folded behind its start: %q", answer)
	}
	if !strings.Contains(page, `<span id="cached">1700 from the cache</span>`) {
		t.Error("the page does not show the 1700 cached prompt tokens")
	}
	want := fmt.Sprintf(`<dd id="cost">%s</dd>`, fmtMoney((1300*2+1700*0.5+300*10)/1e6))
	if !strings.Contains(page, want) {
		t.Errorf("the page does not show the cost %s", want)
	}
}

// A call's page shows its turn's messages redacted as the audit log's rows are: the key the
// member pasted into their question is not on it.
func TestTheCallPageShowsItsTurnsMessagesRedacted(t *testing.T) {
	st := storetest.Open(t, storetest.SQLite)
	seedStory(t, st)
	_, ts := newTestServer(t, st, "")
	page := getPage(t, ts, "/admin/calls/1")
	if !strings.Contains(page, "Check the weather with api_key=[redacted]") || strings.Contains(page, "sk-live-abcdef1234567890") {
		t.Errorf("the call's page shows the question unredacted, or not at all:\n%s", page)
	}
}
