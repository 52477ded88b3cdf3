package main

import (
	"database/sql"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"relaybot/adapters/discord"
	dtk "relaybot/internal/testkit/discord"
	"relaybot/internal/testkit/llm"
	tgkit "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
	"relaybot/store/storetest"
)

// holdingToolModel is toolModel, but a message starting "hold" streams an answer that waits
// until hold is closed, and one starting "ask " calls the kit's ask tool (roundModel).
func holdingToolModel(hold chan struct{}) func(llm.Request) llm.Reply {
	return func(req llm.Request) llm.Reply {
		last := lastUserText(req)
		if strings.HasPrefix(last, "ask ") {
			return roundModel(req)
		}
		if strings.HasPrefix(last, "hold") {
			// More chunks than a flush takes, so the answer in progress shows (with its Stop
			// button) before it waits.
			var chunks []llm.Chunk
			for range 9 {
				chunks = append(chunks, llm.Chunk{Content: "Holding "})
			}
			return llm.Reply{Chunks: append(chunks, llm.Chunk{Content: "on", Wait: hold})}
		}
		return toolModel(req)
	}
}

// fromLogs returns, for each replica, the first submatch of re in its log (what names it).
func fromLogs(t *testing.T, reps []*childReplica, what, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	out := make([]string, len(reps))
	for i, r := range reps {
		wait.For(t, "a replica to log its "+what, func() bool {
			m := rx.FindStringSubmatch(r.out.String())
			if m != nil {
				out[i] = m[1]
			}
			return m != nil
		})
	}
	return out
}

// streamingTelegram is the webhook Telegram of the three-replica tests with streaming replies,
// so an answer in progress carries a Stop button.
type streamingTelegram struct{ *telegramPlatform }

func (p streamingTelegram) configure(t *testing.T, i int, c *tomlConfig) {
	p.telegramPlatform.configure(t, i, c)
	c.set("telegram", "stream", true)
}

// askPolicy puts the kit's echo behind an approval question in c, for approvers (none: the
// default, bot admins and chat admins).
func askPolicy(c *tomlConfig, approvers ...string) {
	c.set("tools", "approval_timeout_sec", 120)
	c.set("tools.policy", "tool", "echo", "server", "kit", "action", "ask")
	if len(approvers) > 0 {
		c.set("tools.policy", "approvers", approvers)
	}
}

// TestButtonsWorkOnAnyReplica is test (d) of issue 23: three replicas behind the round-robin
// webhook proxy, tool calls behind approval questions, and every press sent to a replica other
// than the one whose turn asked (a bystander's refused press to one, the decision to the
// other). Every press is honoured: the bystander is refused with an alert, approved calls run
// once, denied ones never, "always allow" is not asked again; each press is answered exactly
// once; each question ends showing its decision without buttons; a Stop button pressed on a
// replica that does not run the turn stops it. A tool's questions work the same: its buttons
// pressed elsewhere, and typed answers to its reply prompts sent to other replicas than the one
// running the turn reach the tool; a web chat page's press posted to another replica too. Every
// message is answered exactly once, nothing
// is left running, no 429, and every turn is in the history, whole.
func TestButtonsWorkOnAnyReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three bot serve processes")
	}
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	dsn := storetest.PostgresDatabaseDSN(t)
	e := newEnv(t)
	tg := paidTelegram(t, e)
	hold := make(chan struct{})
	defer close(hold)
	e.llm.SetHandler(holdingToolModel(hold))
	p := streamingTelegram{&telegramPlatform{e: e, webhook: true, rr: newRoundRobin(t)}}
	reps := startReplicasWith(t, 3, dsn, e, p, func(c *tomlConfig) {
		askPolicy(c)
		c.set("admin", webChatAdmin...)
	})
	p.started(t, reps)
	ids := fromLogs(t, reps, "instance id", `msg="replica joined" instance=(\S+)`)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	const admin, bystander, asker = 9, 8, 7
	mention := "@" + tg.BotUsername() + " "
	type chatCase struct {
		id       int64
		choice   string // the admin's press
		refuse   bool   // a bystander presses first
		messages []string
	}
	cases := []chatCase{
		{id: -6000, choice: "approve", refuse: true, messages: []string{"first"}},
		{id: -6001, choice: "approve", refuse: true, messages: []string{"second"}},
		{id: -6002, choice: "approve", messages: []string{"third"}},
		{id: -6003, choice: "deny", refuse: true, messages: []string{"fourth"}},
		{id: -6004, choice: "deny", messages: []string{"fifth"}},
		{id: -6005, choice: "always", messages: []string{"sixth", "seventh"}},
	}
	var presses []string
	answered := func(id string) tgkit.CallbackAnswer {
		t.Helper()
		var a tgkit.CallbackAnswer
		wait.For(t, "the press answered", func() bool {
			var ok bool
			a, ok = tg.Answer(id)
			return ok
		})
		return a
	}
	replicaOf := func(instance string) int { return slices.Index(ids, instance) }
	// question waits for a question with buttons in chat whose text has sub.
	question := func(chat int64, sub string) tgkit.Message {
		t.Helper()
		var q tgkit.Message
		wait.For(t, "the question "+sub+" in chat "+fmt.Sprint(chat), func() bool {
			for _, m := range tg.BotMessages(chat) {
				if strings.Contains(m.Text, sub) && m.ReplyMarkup != "" {
					q = m
					return true
				}
			}
			return false
		})
		return q
	}
	// askedOn returns the replica whose turn asked question q, as its row says.
	askedOn := func(chat int64, q tgkit.Message) int {
		t.Helper()
		var instance string
		wait.For(t, "the question recorded with the replica that asked", func() bool {
			return db.QueryRow(`SELECT instance_id FROM questions WHERE chat_id = $1 AND message_id = $2`,
				fmt.Sprint(chat), fmt.Sprint(q.ID)).Scan(&instance) == nil
		})
		at := replicaOf(instance)
		if at < 0 {
			t.Fatalf("the question in chat %d was asked by %q, no replica of the test", chat, instance)
		}
		return at
	}
	// running returns the replica running the one turn that runs.
	running := func() int {
		t.Helper()
		var instance string
		wait.For(t, "a turn running", func() bool {
			return db.QueryRow(`SELECT instance_id FROM turns WHERE status = 'running'`).Scan(&instance) == nil
		})
		return replicaOf(instance)
	}
	for _, c := range cases {
		group := tgkit.Chat{ID: c.id, Type: "group", Title: fmt.Sprint("team ", c.id)}
		tg.SetChatAdmin(group.ID, admin)
		tg.Send(tgkit.Inbound{Chat: group, From: user(asker), Text: mention + c.messages[0]})
		q := question(group.ID, "echo (MCP server kit)")
		at := askedOn(group.ID, q)
		if c.refuse {
			p.rr.pin((at + 1) % 3)
			id := tg.Press(group, user(bystander), q.ID, pressData(t, q, "approve"))
			presses = append(presses, id)
			if a := answered(id); !a.ShowAlert || !strings.Contains(a.Text, "You may not answer this") {
				t.Errorf("chat %d: the bystander's press on another replica was answered %+v, want an alert refusing them", c.id, a)
			}
		}
		p.rr.pin((at + 2) % 3)
		id := tg.Press(group, user(admin), q.ID, pressData(t, q, c.choice))
		presses = append(presses, id)
		if a := answered(id); a.ShowAlert {
			t.Errorf("chat %d: the admin's %s on another replica was answered %+v, want no alert", c.id, c.choice, a)
		}
		p.rr.pin(-1)
		want := "tool said: [user7] " + c.messages[0]
		if c.choice == "deny" {
			want = "tool said: err: denied by user9"
		}
		e.waitBotText(group.ID, "the answer after the press", contains(want))
		for _, text := range c.messages[1:] {
			tg.Send(tgkit.Inbound{Chat: group, From: user(asker), Text: mention + text})
			e.waitBotText(group.ID, "the answer always allowed", contains("tool said: [user7] "+text))
		}
	}

	// A tool's questions: an enum and a boolean with buttons, pressed on other replicas than
	// the one whose turn asked; then typed answers to its reply prompts, each sent to another
	// replica than the one running the turn.
	askGroup := tgkit.Chat{ID: -6200, Type: "group", Title: "ask"}
	tg.Send(tgkit.Inbound{Chat: askGroup, From: user(asker), Text: mention + "ask choice"})
	for _, step := range []struct{ sub, choice string }{{"Colour", "v1"}, {"Sure?", "yes"}} {
		q := question(askGroup.ID, step.sub)
		p.rr.pin((askedOn(askGroup.ID, q) + 1) % 3)
		id := tg.Press(askGroup, user(asker), q.ID, pressData(t, q, step.choice))
		presses = append(presses, id)
		if a := answered(id); a.ShowAlert {
			t.Errorf("the press of %s on another replica was answered %+v, want no alert", step.sub, a)
		}
		p.rr.pin(-1)
	}
	e.waitBotText(askGroup.ID, "the tool's answer to its questions", contains(`tool said: accept {"color":"green","confirm":true}`))
	e.say(asker, "ask text")
	e.waitBotText(asker, "the age prompt", contains("age (a whole number)"))
	runner := running()
	p.rr.pin((runner + 1) % 3)
	e.say(asker, "33")
	e.waitBotText(asker, "the name prompt", contains("Name (required)"))
	p.rr.pin((runner + 2) % 3)
	e.say(asker, "Ann")
	e.waitBotText(asker, "the typed answers reaching the tool", contains(`tool said: accept {"age":33,"name":"Ann"}`))
	p.rr.pin(-1)

	// The web chat: a page on one replica, the question's press posted to another.
	addrs := fromLogs(t, reps, "admin listener", `admin listening" addr=(\S+)`)
	w := openWebChat(t, "http://"+addrs[0])
	w.say("web question")
	wq := w.waitMsg("the web chat's question", func(m webMsg) bool { return m.Question != "" && len(m.Choices) > 0 })
	var webAsker string
	wait.For(t, "the web question recorded", func() bool {
		return db.QueryRow(`SELECT instance_id FROM questions WHERE id = $1`, wq.Question).Scan(&webAsker) == nil
	})
	w.base = "http://" + addrs[(replicaOf(webAsker)+1)%3]
	if code, body := w.post("/chat/answer", url.Values{"q": {wq.Question}, "choice": {"approve"}}); code != http.StatusNoContent {
		t.Errorf("the web chat's press through another replica: %d %s, want 204", code, body)
	}
	w.waitMsg("the web chat's approved answer", func(m webMsg) bool { return strings.HasPrefix(m.Text, "tool said: ") })

	// A Stop button pressed on a replica that does not run the turn.
	stopGroup := tgkit.Chat{ID: -6100, Type: "group", Title: "stop"}
	tg.Send(tgkit.Inbound{Chat: stopGroup, From: user(asker), Text: mention + "hold on"})
	var stopMsg tgkit.Message
	wait.For(t, "the held answer with its Stop button", func() bool {
		for _, m := range tg.BotMessages(stopGroup.ID) {
			if strings.Contains(m.ReplyMarkup, "stop:") {
				stopMsg = m
				return true
			}
		}
		return false
	})
	runner = running()
	p.rr.pin((runner + 1) % 3)
	stopPress := tg.Press(stopGroup, user(asker), stopMsg.ID, "stop:")
	presses = append(presses, stopPress)
	answered(stopPress)
	e.waitBotText(stopGroup.ID, "the held answer stopped", contains("stopped"))
	p.rr.pin(-1)
	// The stopped reply may reach Telegram before the replica's log line reaches the pipe.
	wait.For(t, "the replica running the held turn to log the stop from the replica that got the press", func() bool {
		return reps[runner].logged("stopped a turn on another replica's request")
	})

	wait.For(t, "no turn running", func() bool {
		var n int
		return db.QueryRow(`SELECT count(*) FROM turns WHERE status = 'running'`).Scan(&n) == nil && n == 0
	})
	for _, r := range reps {
		r.term(t)
	}

	// Each press answered exactly once.
	byPress := map[string]int{}
	for _, c := range tg.Calls() {
		if c.Method == "answerCallbackQuery" {
			byPress[c.Params["callback_query_id"]]++
		}
	}
	for _, id := range presses {
		if byPress[id] != 1 {
			t.Errorf("press %s was answered %d times, want once", id, byPress[id])
		}
	}
	if len(byPress) != len(presses) {
		t.Errorf("%d presses were answered, want the %d pressed", len(byPress), len(presses))
	}
	// The presses were carried: each was settled by the replica that asked, through the table.
	var carried int
	if err := db.QueryRow(`SELECT count(*) FROM question_presses WHERE status IN ('accepted', 'refused')`).Scan(&carried); err != nil {
		t.Fatal(err)
	}
	if want := len(presses) - 1 + 3; carried != want {
		t.Errorf("%d presses and typed answers were settled by the replica that asked, want all %d (every press but Stop, the web chat's, and the two typed answers)", carried, want)
	}
	// Approved calls ran once, denied never.
	if n := e.kit.Calls("echo"); n != 6 {
		t.Errorf("the echo tool ran %d times, want 6 (3 approved in Telegram and 1 in the web chat, 2 always allowed; the 2 denied never)", n)
	}
	// Every message answered exactly once; every question shows its decision without buttons.
	for _, c := range cases {
		var answers, questions []string
		for _, m := range tg.BotMessages(c.id) {
			switch {
			case strings.Contains(m.Text, "tool said:"):
				answers = append(answers, m.Text)
			case strings.Contains(m.Text, "echo (MCP server kit)"):
				questions = append(questions, m.Text)
				if m.ReplyMarkup != "" {
					t.Errorf("chat %d: a decided question still shows buttons: %q", c.id, m.Text)
				}
			}
		}
		if len(answers) != len(c.messages) || len(questions) != 1 {
			t.Errorf("chat %d: answers %q and questions %q; want %d answers and one question", c.id, answers, questions, len(c.messages))
		}
	}
	if got := e.botTexts(stopGroup.ID); len(got) != 1 {
		t.Errorf("the stopped chat shows %q, want the one stopped answer", got)
	}
	if limited := p.rateLimited(); len(limited) != 0 {
		t.Errorf("the platform answered %d requests with 429, want none:\n%s", len(limited), strings.Join(limited, "\n"))
	}
	checkHistoryWhole(t, db, 10) // the stopped turn is not ok
}

// checkHistoryWhole checks that no turn or tool call is left running and that ok turns, each
// ending with the answer, number want.
func checkHistoryWhole(t *testing.T, db *sql.DB, want int) {
	t.Helper()
	var running, calls int
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM turns WHERE status = 'running'),
		(SELECT count(*) FROM tool_calls WHERE status = 'running')`).Scan(&running, &calls); err != nil {
		t.Fatal(err)
	}
	if running+calls != 0 {
		t.Errorf("%d turns and %d tool calls left running, want none", running, calls)
	}
	rows, err := db.Query(`SELECT u.content, (SELECT role FROM messages WHERE turn_id = t.id ORDER BY seq DESC LIMIT 1)
		FROM turns t JOIN messages u ON u.turn_id = t.id AND u.role = 'user' WHERE t.status = 'ok'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ok := 0
	for rows.Next() {
		var text string
		var last sql.NullString
		if err := rows.Scan(&text, &last); err != nil {
			t.Fatal(err)
		}
		ok++
		if last.String != "assistant" {
			t.Errorf("the turn of %q ends with a %q message, want the answer", text, last.String)
		}
	}
	if ok != want {
		t.Errorf("%d turns finished ok, want %d: one per message answered", ok, want)
	}
}

// TestDiscordButtonsAfterTheShardChangesHands: one replica holds both shards and asks a question
// in a guild of shard 1, with another turn streaming there; a second replica joins and takes
// shard 1, so the presses arrive on it. A bystander's press is acknowledged in time and refused
// in a message only they see; the asker's approval is acknowledged within Discord's 3 s (the
// test server refuses a later answer), the tool runs once and the question shows the decision
// without buttons; the Stop button of the streaming answer stops it on the first replica.
func TestDiscordButtonsAfterTheShardChangesHands(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two bot serve processes")
	}
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	dsn := storetest.PostgresDatabaseDSN(t)
	e := newEnv(t)
	dc := dtk.New(dtk.Config{Shards: discordShards, MaxConcurrency: discordShards, GlobalN: discordBudget})
	t.Cleanup(dc.Close)
	hold := make(chan struct{})
	defer close(hold)
	e.llm.SetHandler(holdingToolModel(hold))
	p := &discordPlatform{t: t, dc: dc, channels: map[int64]dtk.UserMessage{}, shard: 1}
	config := func() *tomlConfig {
		c := threeReplicaConfig(dsn, e)
		p.configure(t, 0, c)
		askPolicy(c, "asker")
		return c
	}
	first := startChildReplica(t, config())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("first replica's log:\n%s", first.out)
		}
	})
	wait.For(t, "the first replica to hold both shards", func() bool {
		h := p.holders([]*childReplica{first})
		live := dc.LiveShards()
		return len(h[0]) == 1 && len(h[1]) == 1 && live[0] == 1 && live[1] == 1
	})
	const questionChat, stopChat = 1, 2
	p.say(questionChat, "first")
	var q dtk.Message
	wait.For(t, "the question with its buttons", func() bool {
		for _, m := range dc.BotMessages(p.channel(questionChat).ChannelID) {
			if strings.Contains(m.Content, "echo") && len(m.Buttons) >= 2 {
				q = m
				return true
			}
		}
		return false
	})
	p.say(stopChat, "hold on")
	var held dtk.Message
	wait.For(t, "the held answer with its Stop button", func() bool {
		for _, m := range dc.BotMessages(p.channel(stopChat).ChannelID) {
			if slices.ContainsFunc(m.Buttons, func(b dtk.Button) bool { return b.CustomID == discord.StopButtonID }) {
				held = m
				return true
			}
		}
		return false
	})

	second := startChildReplica(t, config())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("second replica's log:\n%s", second.out)
		}
	})
	reps := []*childReplica{first, second}
	wait.Until(t, "the second replica to hold shard 1", func() error {
		h, live := p.holders(reps), dc.LiveShards()
		if !slices.Equal(h[1], []int{1}) || !slices.Equal(h[0], []int{0}) || live[0] != 1 || live[1] != 1 {
			return fmt.Errorf("holders %v, live sessions %v", h, live)
		}
		return nil
	})

	approve := ""
	for _, b := range q.Buttons {
		if strings.HasSuffix(b.CustomID, ":approve") {
			approve = b.CustomID
		}
	}
	asker := p.channel(questionChat).AuthorID
	bystander, err := dc.ClickButton(q.ID, approve, "800000000000000001", nil)
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the bystander's press refused in a message only they see", func() bool {
		fs := dc.Followups(bystander)
		return len(fs) == 1 && strings.Contains(fs[0].Content, "You may not answer this") && fs[0].Flags&64 != 0
	})
	if !dc.Acknowledged(bystander) {
		t.Errorf("the bystander's press was not acknowledged")
	}
	press, err := dc.ClickButton(q.ID, approve, asker, nil)
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the approved tool's answer", func() bool {
		return slices.ContainsFunc(p.answers(questionChat), contains("tool said:"))
	})
	if !dc.Acknowledged(press) {
		t.Errorf("the asker's press on the new shard holder was not acknowledged within 3 s")
	}
	wait.For(t, "the question showing the decision without buttons", func() bool {
		m, ok := dc.Message(q.ID)
		return ok && len(m.Buttons) == 0 && strings.Contains(m.Content, "pproved")
	})
	stop, err := dc.ClickButton(held.ID, discord.StopButtonID, p.channel(stopChat).AuthorID, nil)
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the held answer stopped", func() bool {
		return slices.ContainsFunc(p.answers(stopChat), contains("stopped"))
	})
	if !dc.Acknowledged(stop) {
		t.Errorf("the Stop press was not acknowledged")
	}
	// The stopped reply may reach Discord before the replica's log line reaches the pipe.
	wait.For(t, "the first replica to log the stop the second one passed on", func() bool {
		return first.logged("stopped a turn on another replica's request")
	})
	if n := e.kit.Calls("echo"); n != 1 {
		t.Errorf("the echo tool ran %d times, want once", n)
	}
	for _, c := range dc.Calls() {
		if c.Status == http.StatusTooManyRequests {
			t.Errorf("a 429 from Discord: %s %s", c.Method, c.Path)
		}
	}
	wait.For(t, "no turn running", func() bool {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			return false
		}
		defer db.Close()
		var n int
		return db.QueryRow(`SELECT count(*) FROM turns WHERE status = 'running'`).Scan(&n) == nil && n == 0
	})
}
