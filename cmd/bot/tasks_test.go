package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"relaybot/audit"
	"relaybot/config"
	dtk "relaybot/internal/testkit/discord"
	"relaybot/internal/testkit/llm"
	tgkit "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
	"relaybot/policy"
	"relaybot/store"
)

// taskTools offers the scheduled tasks' tools (and current_time) to the model.
var taskTools = []any{"plugins", []string{}, "native", []string{"current_time", "schedule_task", "list_tasks", "cancel_task"}}

// TestARemindeAndAPromptTaskArriveOnceThroughTelegram runs the whole bot against the testkit
// Telegram and model: the user sets their zone, asks for a reminder and a prompt task; the
// model's schedule_task calls are answered in the user's zone, the reminder arrives once as
// written, the prompt runs a turn as the user whose answer arrives once, and both runs are
// recorded delivered.
func TestARemindeAndAPromptTaskArriveOnceThroughTelegram(t *testing.T) {
	e := newEnv(t)
	cfg := e.toml().set("tools", taskTools...).parse(t)
	stop := e.start(cfg)
	const chatID = 4242

	e.say(chatID, "/timezone Europe/Berlin")
	e.waitBotText(chatID, "the zone set", contains("Your time zone is now Europe/Berlin"))

	e.llm.Push(llm.ToolCalls(llm.Call{ID: "call_1", Name: "schedule_task", Args: []string{`{"message":"Stand up and stretch.","in":"2s"}`}}),
		llm.Text("I will remind you."))
	e.say(chatID, "remind me in two seconds to stand up")
	e.waitBotText(chatID, "the model's answer", contains("I will remind you."))
	reqs := e.llm.Requests()
	last := reqs[len(reqs)-1].Messages
	if tool := last[len(last)-1]; tool.Role != "tool" || !strings.HasPrefix(tool.Content, "Task 1 scheduled: next ") || !strings.HasSuffix(tool.Content, " Europe/Berlin.") {
		t.Fatalf("the model read %q from schedule_task, want the task's number and its next run in Europe/Berlin", tool.Content)
	}
	e.waitBotText(chatID, "the reminder", func(s string) bool { return s == "Stand up and stretch." })

	e.llm.Push(llm.ToolCalls(llm.Call{ID: "call_2", Name: "schedule_task", Args: []string{`{"prompt":"How is the build?","in":"2s"}`}}),
		llm.Text("Scheduled."), llm.Text("The build is green."))
	e.say(chatID, "in two seconds ask how the build is")
	e.waitBotText(chatID, "the prompt task's answer", contains("The build is green."))
	reqs = e.llm.Requests()
	turn := reqs[len(reqs)-1].Messages
	if u := turn[len(turn)-1]; u.Role != "user" || u.Content != "How is the build?" {
		t.Errorf("the prompt task's turn sent the model %q as %s, want the prompt as the user's message", u.Content, u.Role)
	}
	e.waitLog(`msg="tasks: run delivered" run=2`)

	e.say(chatID, "/tasks")
	e.waitBotText(chatID, "/tasks", contains("You have no scheduled tasks in this chat."))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := e.botTexts(chatID)
	for _, want := range []string{"Stand up and stretch.", "The build is green."} {
		n := 0
		for _, s := range got {
			if strings.Contains(s, want) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%q arrived %d times, want once: %q", want, n, got)
		}
	}
	st := e.openStore()
	defer st.Close()
	for _, id := range []int64{1, 2} {
		runs, err := st.Tasks.TaskRuns(context.Background(), id, 5)
		if err != nil || len(runs) != 1 || runs[0].Status != store.RunDelivered {
			t.Errorf("task %d's runs = %+v (%v), want one, delivered", id, runs, err)
		}
	}
	if runs, _ := st.Tasks.TaskRuns(context.Background(), 2, 5); len(runs) == 1 && runs[0].TurnID == 0 {
		t.Error("the prompt task's run names no turn")
	}
}

// TestAMemberCannotCancelAnothersTaskInAGroup: in a group, /tasks shows a member their own
// tasks only, and their /tasks cancel of another member's task is refused.
func TestAMemberCannotCancelAnothersTaskInAGroup(t *testing.T) {
	e := newEnv(t)
	cfg := e.toml().set("tools", taskTools...).parse(t)
	e.start(cfg)
	const group = -5005
	say := func(from int64, text string) {
		e.tg.Send(tgkit.Inbound{Chat: tgkit.Chat{ID: group, Type: "group", Title: "team"}, From: user(from), Text: text})
	}
	e.llm.Push(llm.ToolCalls(llm.Call{ID: "call_1", Name: "schedule_task", Args: []string{`{"message":"Standup!","cron":"0 9 * * 1-5"}`}}),
		llm.Text("Done."))
	say(11, "@relay_test_bot post the standup every weekday at nine")
	wait.For(t, "the model's answer", func() bool { return strings.Contains(strings.Join(e.botTexts(group), "\n"), "Done.") })
	say(12, "/tasks cancel 1")
	wait.For(t, "the refusal", func() bool {
		return strings.Contains(strings.Join(e.botTexts(group), "\n"), "Not cancelled: task 1 is not yours")
	})
	say(11, "/tasks")
	wait.For(t, "the owner's list", func() bool { return strings.Contains(strings.Join(e.botTexts(group), "\n"), "#1 next ") })
}

// bot tasks prints the live tasks as a table, and with -json one object per line with the
// fields of GET /api/v1/tasks; -all adds the cancelled ones.
func TestBotTasksListsTheScheduledTasks(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Storage.DSN = filepath.Join(t.TempDir(), "bot.db")
	if err := runMigrate(ctx, &cfg, nil, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	s, err := openStore(ctx, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2030, 1, 2, 9, 0, 0, 0, time.UTC)
	for _, text := range []string{"water the plants", "post the standup"} {
		if _, err := s.Tasks.CreateTask(ctx, store.Task{Platform: "telegram", ChatID: "-100", UserID: "7", Kind: "message", Text: text,
			Schedule: "every 24h0m0s from 2030-01-02T09:00:00Z", Timezone: "Asia/Tokyo", State: store.TaskActive, NextRunAt: &at}, 10); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Tasks.CancelTask(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s.Close()

	var out bytes.Buffer
	if err := runTasks(ctx, &cfg, nil, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "NEXT RUN (UTC)") || !strings.Contains(lines[1], "2030-01-02 09:00:00") ||
		!strings.Contains(lines[1], "post the standup") || !strings.Contains(lines[1], "telegram:-100") {
		t.Fatalf("bot tasks printed:\n%s\nwant a header and the live task", out.String())
	}
	out.Reset()
	if err := runTasks(ctx, &cfg, []string{"-json", "-all"}, &out); err != nil {
		t.Fatal(err)
	}
	var items []map[string]any
	for line := range strings.Lines(out.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		items = append(items, m)
	}
	if len(items) != 2 || items[0]["text"] != "post the standup" || items[0]["next_run_at"] != "2030-01-02T09:00:00Z" ||
		items[1]["next_run_at"] != nil || items[0]["timezone"] != "Asia/Tokyo" {
		t.Errorf("bot tasks -json -all printed:\n%s", out.String())
	}
}

// A reminder made in a Discord channel arrives there once, through the Discord adapter's
// delivery engine.
func TestAReminderArrivesOnceInItsDiscordChannel(t *testing.T) {
	e := newEnv(t)
	dc := startDiscordBot(t, e, func(cfg *config.Config) {
		cfg.Tools.Native = []string{"schedule_task", "list_tasks", "cancel_task"}
	})
	const guild, channel = "900000000000000001", "800000000000000002"
	e.llm.Push(llm.ToolCalls(llm.Call{ID: "call_1", Name: "schedule_task", Args: []string{`{"message":"Deploy window opens now.","in":"2s"}`}}),
		llm.Text("Noted."))
	if _, err := dc.Post(dtk.UserMessage{ChannelID: channel, GuildID: guild, AuthorID: "600", MentionBot: true,
		Content: "<@100000000000000001> tell us in two seconds that the deploy window opens"}); err != nil {
		t.Fatal(err)
	}
	texts := func() []string {
		var out []string
		for _, m := range dc.BotMessages(channel) {
			out = append(out, m.Content)
		}
		return out
	}
	wait.For(t, "the reminder in the channel", func() bool { return slices.Contains(texts(), "Deploy window opens now.") })
	e.waitLog(`msg="tasks: run delivered" run=1`)
	if n := len(slices.DeleteFunc(texts(), func(s string) bool { return s != "Deploy window opens now." })); n != 1 {
		t.Errorf("the reminder arrived %d times: %q", n, texts())
	}
}

// schedule_task answers to the tool policies as any tool: denied in a chat, the model reads the
// refusal, no task is made, and the call is in the audit log as a native tool's, denied.
func TestScheduleTaskIsDeniedByAToolPolicyAndAudited(t *testing.T) {
	e := newEnv(t)
	cfg := e.toml().set("tools", taskTools...).parse(t)
	cfg.Tools.Policy = []policy.Rule{{Tool: "schedule_task", Chats: []string{"telegram:4343"}, Action: "deny"}}
	stop := e.start(cfg)
	e.llm.Push(llm.ToolCalls(llm.Call{ID: "call_1", Name: "schedule_task", Args: []string{`{"message":"x","in":"1h"}`}}),
		llm.Text("I may not."))
	e.say(4343, "remind me in an hour")
	e.waitBotText(4343, "the model's answer", contains("I may not."))
	reqs := e.llm.Requests()
	last := reqs[len(reqs)-1].Messages
	if tool := last[len(last)-1]; tool.Role != "tool" || !strings.HasPrefix(tool.Content, "err:") {
		t.Errorf("the model read %q, want the policy's refusal", tool.Content)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	st := e.openStore()
	defer st.Close()
	if ts, _ := st.Tasks.ListTasks(context.Background(), store.TaskFilter{}); len(ts) != 0 {
		t.Errorf("a denied schedule_task made %d tasks", len(ts))
	}
	rows, _, err := st.ToolCalls.ToolCalls(context.Background(), audit.Filter{Tool: "schedule_task"})
	if err != nil || len(rows) != 1 || rows[0].Status != audit.StatusDenied || rows[0].Source != audit.SourceNative {
		t.Errorf("audit rows = %+v (%v), want one native call, denied", rows, err)
	}
}
