package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
	"relaybot/store"
	"relaybot/store/storetest"
	"relaybot/tools"
)

// post is one message a fake platform delivered.
type post struct {
	at   time.Time
	chat chat.Ref
	text string
}

// fakePlatform records what it delivers; refuse, when set, refuses a text with an error.
type fakePlatform struct {
	mu     sync.Mutex
	posts  []post
	refuse func(text string) error
}

func (p *fakePlatform) Post(ctx context.Context, ref chat.Ref, text string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refuse != nil {
		if err := p.refuse(text); err != nil {
			return err
		}
	}
	p.posts = append(p.posts, post{at: time.Now(), chat: ref, text: text})
	return nil
}

func (p *fakePlatform) ChatResponder(ref chat.Ref) adapters.Responder {
	return fakeResponder{p: p, ref: ref}
}

func (p *fakePlatform) texts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, x := range p.posts {
		out = append(out, x.text)
	}
	return out
}

func (p *fakePlatform) count(text string) int {
	n := 0
	for _, t := range p.texts() {
		if strings.Contains(t, text) {
			n++
		}
	}
	return n
}

type fakeResponder struct {
	p   *fakePlatform
	ref chat.Ref
}

func (r fakeResponder) NewReply(ctx context.Context) adapters.Reply { return fakeReply(r) }
func (r fakeResponder) Notice(ctx context.Context, text string) error {
	return r.p.Post(ctx, r.ref, text)
}
func (r fakeResponder) SupportsStreaming() bool { return false }

type fakeReply fakeResponder

func (r fakeReply) Update(string) {}
func (r fakeReply) Working(bool)  {}
func (r fakeReply) Finish(ctx context.Context, text string, _ []chat.File) error {
	return r.p.Post(ctx, r.ref, text)
}

// world is a tasks service on a fresh SQLite store with one fake Telegram, in a bubble.
type world struct {
	t   *testing.T
	svc *Service
	tg  *fakePlatform
	db  *store.Database
}

func newWorld(t *testing.T, opts Options) *world {
	db := storetest.Open(t, storetest.SQLite)
	tg := &fakePlatform{}
	opts.Store, opts.Turns, opts.Instance = db.Tasks, db.Turns, "test"
	opts.Platforms = map[chat.Platform]Platform{chat.Telegram: tg}
	svc, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, svc: svc, tg: tg, db: db}
}

// run starts the scheduler until the test ends.
func (w *world) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.svc.Run(ctx)
	}()
	w.t.Cleanup(func() {
		cancel()
		<-done
	})
}

var alice = tools.TurnInfo{Platform: "telegram", ChatID: "100", UserID: "alice", Private: true}

func (w *world) schedule(turn tools.TurnInfo, args string) (string, error) {
	return w.svc.ScheduleTask(context.Background(), turn, json.RawMessage(args))
}

func (w *world) command(user, cmd, args string, chatAdmin bool) string {
	w.t.Helper()
	text, err := w.svc.Command(context.Background(), adapters.Inbound{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "100"},
		UserID: user, Command: cmd, Args: args, ChatAdmin: chatAdmin}, false)
	if err != nil {
		w.t.Fatalf("/%s %s: %v", cmd, args, err)
	}
	return text
}

// TestAReminderFiresOnceAtItsTimeInTheOwnersZone: the owner's zone (/timezone) reads "at",
// the answer names the run in that zone, and the message arrives once, at that instant.
func TestAReminderFiresOnceAtItsTimeInTheOwnersZone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, Options{})
		if got := w.command("alice", "timezone", "Asia/Tokyo", false); !strings.Contains(got, "Asia/Tokyo") {
			t.Fatalf("/timezone Asia/Tokyo = %q", got)
		}
		if got := w.command("alice", "timezone", "Mars/Olympus", false); !strings.Contains(got, `"Mars/Olympus" is not a time zone`) {
			t.Errorf("/timezone Mars/Olympus = %q, want it refused by name", got)
		}
		// The bubble starts at 2000-01-01 00:00 UTC, 09:00 in Tokyo.
		res, err := w.schedule(alice, `{"message":"take the pills","at":"2000-01-01 10:30"}`)
		if err != nil {
			t.Fatal(err)
		}
		if want := "Task 1 scheduled: next Sat 1 Jan 10:30 Asia/Tokyo."; res != want {
			t.Errorf("schedule_task = %q, want %q", res, want)
		}
		w.run()
		time.Sleep(89 * time.Minute)
		synctest.Wait()
		if n := w.tg.count("take the pills"); n != 0 {
			t.Fatalf("the reminder came %d times a minute early", n)
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		posts := w.tg.posts
		if len(posts) != 1 || posts[0].text != "take the pills" {
			t.Fatalf("posts = %+v, want the reminder once", posts)
		}
		if want := time.Date(2000, 1, 1, 1, 30, 0, 0, time.UTC); posts[0].at.Sub(want) > 2*time.Second || posts[0].at.Before(want) {
			t.Errorf("delivered at %s, want within a tick of %s", posts[0].at.UTC(), want)
		}
		res, err = w.schedule(alice, `{"message":"call Berlin","at":"2000-01-02 09:00","tz":"Europe/Berlin"}`)
		if want := "Task 2 scheduled: next Sun 2 Jan 17:00 Asia/Tokyo (Sun 2 Jan 09:00 Europe/Berlin)."; err != nil || res != want {
			t.Errorf("schedule_task with tz = %q, %v; want %q", res, err, want)
		}
		w.command("alice", "tasks", "cancel 2", false)
		if got := w.command("alice", "tasks", "", false); !strings.Contains(got, "no scheduled tasks") {
			t.Errorf("/tasks after the one run = %q, want none left", got)
		}
	})
}

// TestScheduleTaskNamesTheArgumentItRefuses: each bad or contradictory argument is refused,
// naming it.
func TestScheduleTaskNamesTheArgumentItRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, Options{MinEvery: 5 * time.Minute})
		for _, tc := range []struct{ args, want string }{
			{`{"in":"2h"}`, "message, prompt"},
			{`{"message":"a","prompt":"b","in":"2h"}`, "message, prompt"},
			{`{"message":"a"}`, "in, at, cron, every"},
			{`{"message":"a","in":"2h","every":"1d"}`, "in, at, cron, every"},
			{`{"message":"a","in":"soon"}`, "in:"},
			{`{"message":"a","in":"-5m"}`, "in:"},
			{`{"message":"a","at":"yesterday"}`, "at:"},
			{`{"message":"a","at":"1999-12-31 10:00"}`, "at:"},
			{`{"message":"a","cron":"* * * * *"}`, "cron:"},
			{`{"message":"a","cron":"0 9 * *"}`, "cron:"},
			{`{"message":"a","cron":"CRON_TZ=UTC 0 9 * * *"}`, "cron:"},
			{`{"message":"a","every":"1m"}`, "every:"},
			{`{"message":"a","in":"1h","tz":"Local"}`, "tz:"},
			{`{"message":"a","in":"1h","tz":"Mars/Olympus"}`, "tz:"},
			{`{"message":"  ","in":"1h"}`, "message:"},
			{`{"message":"a","in":"1h","when":"now"}`, "when"},
		} {
			_, err := w.schedule(alice, tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want an error naming %s", tc.args, err, tc.want)
			}
		}
		if _, err := w.schedule(tools.TurnInfo{Platform: "discord", ChatID: "1", UserID: "u"}, `{"message":"a","in":"1h"}`); err == nil {
			t.Error("a task on a platform that cannot deliver it was made")
		}
		if _, err := w.schedule(alice, `{"prompt":"how is the build","in":"1h"}`); err == nil || !strings.Contains(err.Error(), "prompt:") {
			t.Errorf("a prompt task without a pipeline: %v, want refused naming prompt", err)
		}
	})
}

// TestAMemberCannotCancelAnothersTask: list and cancel see only the caller's own tasks; an
// admin of the chat may cancel any in it.
func TestAMemberCannotCancelAnothersTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, Options{MaxPerUser: 2})
		group := func(user string) tools.TurnInfo {
			return tools.TurnInfo{Platform: "telegram", ChatID: "100", UserID: user}
		}
		for _, who := range []string{"alice", "alice", "bob"} {
			if _, err := w.schedule(group(who), `{"message":"standup","every":"1d"}`); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.schedule(group("alice"), `{"message":"one more","in":"1h"}`); err == nil || !strings.Contains(err.Error(), "max_per_user") {
			t.Errorf("alice's third task: %v, want refused by max_per_user", err)
		}
		if got := w.command("bob", "tasks", "", false); strings.Contains(got, "#1") || !strings.Contains(got, "#3") {
			t.Errorf("bob's /tasks = %q, want his task 3 only", got)
		}
		if got := w.command("bob", "tasks", "cancel 1", false); !strings.Contains(got, "Not cancelled") || !strings.Contains(got, "not yours") {
			t.Errorf("bob's /tasks cancel 1 = %q, want refused", got)
		}
		if _, err := w.svc.CancelTask(context.Background(), group("bob"), 2); err == nil || !strings.Contains(err.Error(), "id:") {
			t.Errorf("bob's cancel_task 2: %v, want refused naming id", err)
		}
		if got := w.command("carol", "tasks", "cancel 2", true); got != "Task 2 cancelled." {
			t.Errorf("a chat admin's /tasks cancel 2 = %q", got)
		}
		if got := w.command("alice", "tasks", "1", false); got != "Task 1 cancelled." { // Discord's slash option
			t.Errorf("alice's /tasks cancel 1 = %q", got)
		}
		if _, err := w.svc.CancelTask(context.Background(), tools.TurnInfo{Platform: "telegram", ChatID: "999", UserID: "bob", Admin: true}, 3); err == nil {
			t.Error("task 3 was cancelled from another chat")
		}
	})
}

// TestAFailingDeliveryIsRetriedWithBackoffAndThreeFailedRunsPauseTheTask: each run is tried
// three times (30 s, then 2 min apart), then recorded failed with the reason and its owner
// told; after three failed runs in a row the task is paused and its owner told.
func TestAFailingDeliveryIsRetriedWithBackoffAndThreeFailedRunsPauseTheTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, Options{MinEvery: 5 * time.Minute})
		var tries []time.Time
		w.tg.refuse = func(text string) error {
			if text == "water the plants" {
				tries = append(tries, time.Now())
				return errors.New("Forbidden: bot was blocked by the user")
			}
			return nil
		}
		if _, err := w.schedule(alice, `{"message":"water the plants","every":"1h"}`); err != nil {
			t.Fatal(err)
		}
		w.run()
		time.Sleep(3*time.Hour + 5*time.Minute)
		synctest.Wait()
		if len(tries) != 9 {
			t.Fatalf("%d tries, want 3 runs of 3 tries", len(tries))
		}
		if gap1, gap2 := tries[1].Sub(tries[0]), tries[2].Sub(tries[1]); gap1 < 30*time.Second || gap1 > 32*time.Second || gap2 < 2*time.Minute || gap2 > 2*time.Minute+2*time.Second {
			t.Errorf("retries after %s and %s, want 30s then 2m", gap1, gap2)
		}
		if n := w.tg.count("could not be delivered: Forbidden: bot was blocked"); n != 3 {
			t.Errorf("owner told of %d failed runs, want 3", n)
		}
		if n := w.tg.count("is paused after 3 failed runs"); n != 1 {
			t.Errorf("owner told of the pause %d times, want once", n)
		}
		got := w.command("alice", "tasks", "", false)
		if !strings.Contains(got, "paused") || !strings.Contains(got, "last run failed: Forbidden") {
			t.Errorf("/tasks = %q, want the task paused with its last failure", got)
		}
		time.Sleep(5 * time.Hour)
		synctest.Wait()
		if len(tries) != 9 {
			t.Errorf("a paused task ran again: %d tries", len(tries))
		}
	})
}

// TestAfterDowntimeALateRunFiresOnceAnOlderOneIsSkippedAndToldAndNoBacklogFires: the
// scheduler starts 75 minutes late (grace 1h): a run missed by 45 minutes fires once, one
// missed by 65 minutes is skipped and its owner told, and a recurring task fires no backlog.
func TestAfterDowntimeALateRunFiresOnceAnOlderOneIsSkippedAndToldAndNoBacklogFires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, Options{MinEvery: 5 * time.Minute, MisfireGrace: time.Hour})
		for _, args := range []string{
			`{"message":"late but fine","in":"30m"}`,
			`{"message":"too late","in":"10m"}`,
			`{"message":"every ten","every":"10m"}`,
		} {
			if _, err := w.schedule(alice, args); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(75 * time.Minute) // the bot is down
		w.run()
		synctest.Wait()
		time.Sleep(time.Second)
		synctest.Wait()
		if n := w.tg.count("late but fine"); n != 1 {
			t.Errorf("the run missed by 45m came %d times, want once", n)
		}
		if n := w.tg.count("too late"); n != 1 || w.tg.count("Task 2 (too late) was due") != 1 {
			t.Errorf("the run missed by 65m: %q, want only the notice that it was skipped", w.tg.texts())
		}
		if n := w.tg.count("every ten"); n != 1 {
			t.Errorf("the recurring task's missed runs: %d messages, want one notice and no backlog", n)
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if n := w.tg.count("every ten"); n != 2 {
			t.Errorf("the recurring task after the restart: %d messages, want its next run once", n)
		}
	})
}

// TestAPromptTaskIsATurnOfItsOwnerInItsChat: a prompt task hands the pipeline a message from
// its owner in the chat, thread included, keyed by the run, and is delivered once answered.
func TestAPromptTaskIsATurnOfItsOwnerInItsChat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []adapters.Inbound
		h := handlerFunc(func(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
			got = append(got, in)
			out.NewReply(ctx).Finish(ctx, "The build is green.", nil)
		})
		w := newWorld(t, Options{Handler: h})
		topic := tools.TurnInfo{Platform: "telegram", ChatID: "-100", UserID: "alice",
			RuleChats: []chat.Ref{{Platform: chat.Telegram, ChatID: "-100", ThreadID: "7"}, {Platform: chat.Telegram, ChatID: "-100"}}}
		if _, err := w.schedule(topic, `{"prompt":"check the build","in":"2h"}`); err != nil {
			t.Fatal(err)
		}
		w.run()
		time.Sleep(2*time.Hour + time.Second)
		synctest.Wait()
		if len(got) != 1 || got[0].UserID != "alice" || got[0].Text != "check the build" || got[0].Chat.ThreadID != "7" || got[0].MessageID != RunMessageID(1) {
			t.Fatalf("the pipeline got %+v, want alice's prompt once in topic 7", got)
		}
		if posts := w.tg.posts; len(posts) != 1 || posts[0].chat.ThreadID != "7" {
			t.Errorf("posts = %+v, want the answer once in the topic", posts)
		}
		runs, _ := w.db.Tasks.TaskRuns(context.Background(), 1, 5)
		if len(runs) != 1 || runs[0].Status != store.RunDelivered {
			t.Errorf("runs = %+v, want one delivered", runs)
		}
	})
}

type handlerFunc func(ctx context.Context, in adapters.Inbound, out adapters.Responder)

func (f handlerFunc) Handle(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
	f(ctx, in, out)
}

// TestDaylightSavingDaysInTwoZones: a cron task at a time the spring-forward day skips does not
// run that day (robfig/cron/v3 skips it; the next run is the next day's), and one at a time the
// autumn day repeats runs once, at its first occurrence; in Europe/Berlin and America/New_York.
func TestDaylightSavingDaysInTwoZones(t *testing.T) {
	for _, tc := range []struct {
		zone, cron, from string
		want             []string // the next three runs, local, with their offsets
	}{
		{"Europe/Berlin", "30 2 * * *", "2026-03-28 12:00", []string{"2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00", "2026-04-01T02:30:00+02:00"}},
		{"Europe/Berlin", "30 2 * * *", "2026-10-24 12:00", []string{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00", "2026-10-27T02:30:00+01:00"}},
		{"America/New_York", "30 2 * * *", "2026-03-07 12:00", []string{"2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00", "2026-03-11T02:30:00-04:00"}},
		{"America/New_York", "30 1 * * *", "2026-10-31 12:00", []string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00", "2026-11-03T01:30:00-05:00"}},
	} {
		loc, err := loadZone(tc.zone)
		if err != nil {
			t.Fatal(err)
		}
		sch, err := cronSchedule(tc.cron)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := ParseSchedule(sch.String())
		if err != nil {
			t.Fatal(err)
		}
		at, _ := time.ParseInLocation("2006-01-02 15:04", tc.from, loc)
		var prev time.Time
		var got []string
		for range 3 {
			next, ok := stored.Next(at, prev, loc)
			if !ok {
				t.Fatalf("%s %s: no next run", tc.zone, tc.cron)
			}
			got = append(got, next.In(loc).Format(time.RFC3339))
			prev, at = next, next
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s %q from %s: runs %v, want %v", tc.zone, tc.cron, tc.from, got, tc.want)
		}
	}
}

// fakeTurns finds the turn of one run's message, as the store would after a turn ended.
type fakeTurns map[string]store.Turn

func (f fakeTurns) TurnByInbound(ctx context.Context, ref chat.Ref, id string) (store.Turn, bool, error) {
	t, ok := f[id]
	return t, ok, nil
}

// TestARunAPreviousProcessLeftClaimedIsFinishedOnce: a process that stopped while firing (alone
// on SQLite) leaves its runs claimed; the next process takes them over. A reminder is sent
// once; a prompt run whose turn had already ended is not answered again, and is recorded
// delivered with that turn.
func TestARunAPreviousProcessLeftClaimedIsFinishedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var handled int
		h := handlerFunc(func(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
			handled++
			out.NewReply(ctx).Finish(ctx, "answered", nil)
		})
		w := newWorld(t, Options{Handler: h})
		for _, args := range []string{`{"message":"stretch","in":"1m"}`, `{"prompt":"summarise the day","in":"1m"}`} {
			if _, err := w.schedule(alice, args); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Minute)
		ctx := context.Background()
		gone := store.Claimant{Instance: "the previous process"}
		due, err := w.db.Tasks.DueWork(ctx, time.Now(), gone, 10)
		if err != nil || len(due) != 2 {
			t.Fatalf("due = %+v, %v", due, err)
		}
		for _, d := range due {
			if id, err := w.db.Tasks.ClaimTaskRun(ctx, d.Task, d.Seq, d.At, nil, store.RunClaimed, gone); id == 0 || err != nil {
				t.Fatalf("claim: %d, %v", id, err)
			}
		}
		// The previous process answered the prompt (turn 77 ended) and then stopped.
		w.svc.opts.Turns = fakeTurns{RunMessageID(2): {ID: 77, Status: chat.StatusOK}}
		w.run()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := w.tg.count("stretch"); n != 1 {
			t.Errorf("the reminder left claimed was sent %d times, want once", n)
		}
		if handled != 0 {
			t.Errorf("the prompt whose turn had ended was answered %d more times", handled)
		}
		runs, _ := w.db.Tasks.TaskRuns(ctx, 2, 5)
		if len(runs) != 1 || runs[0].Status != store.RunDelivered || runs[0].TurnID != 77 {
			t.Errorf("the prompt's runs = %+v, want one delivered with turn 77", runs)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := w.tg.count("stretch"); n != 1 || handled != 0 {
			t.Errorf("an hour later: %d reminders, %d prompt answers; want 1 and 0", n, handled)
		}
	})
}

// TestAPromptRunTheBotRefusesFailsWithoutRetries: a prompt whose turn the bot refused at fire
// time (the owner's quota, their access) is a failed run, tried once: the owner was told why
// by the refusal itself.
func TestAPromptRunTheBotRefusesFailsWithoutRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tries int
		h := handlerFunc(func(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
			tries++
			out.Notice(ctx, "You have used your quota for today.")
		})
		w := newWorld(t, Options{Handler: h})
		if _, err := w.schedule(alice, `{"prompt":"write the weekly report","in":"1h"}`); err != nil {
			t.Fatal(err)
		}
		w.run()
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if tries != 1 {
			t.Errorf("the refused prompt was tried %d times, want once", tries)
		}
		runs, _ := w.db.Tasks.TaskRuns(context.Background(), 1, 5)
		if len(runs) != 1 || runs[0].Status != store.RunFailed || !strings.Contains(runs[0].Error, "refused") {
			t.Errorf("runs = %+v, want one failed as refused", runs)
		}
		if n := w.tg.count("could not be delivered: the turn was refused"); n != 1 {
			t.Errorf("the owner was told %d times, want once: %q", n, w.tg.texts())
		}
	})
}
