package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"relaybot/adapters"
	tk "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
)

func TestJournalLoad(t *testing.T) {
	upd := func(id int) string { return fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d}}`, id, id) }
	for _, c := range []struct {
		name        string
		file        string
		wantOffset  int64
		wantPending []int64
		wantDropped int
		wantErr     string
	}{
		{name: "missing file"},
		{name: "plain offset of earlier versions", file: "42\n", wantOffset: 42},
		{name: "takes and dones", file: "relaybot-telegram-journal 1 1000\noffset 3\ntake 1 " + upd(1) + "\ntake 2 " + upd(2) + "\ndone 1\noffset 5\n",
			wantOffset: 5, wantPending: []int64{2}},
		{name: "record cut short by a crash", file: "relaybot-telegram-journal 1 1000\ntake 1 " + upd(1) + "\ntake 2 {\"upd",
			wantPending: []int64{1}},
		{name: "another bot's file", file: "relaybot-telegram-journal 1 999\noffset 7\ntake 6 " + upd(6) + "\n", wantDropped: 1},
		{name: "damage in the middle", file: "relaybot-telegram-journal 1 1000\ngarbage here\noffset 3\n", wantErr: "line 2"},
		{name: "unknown version", file: "relaybot-telegram-journal 2 1000\noffset 3\n", wantErr: "version"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tg.offset")
			if c.file != "" {
				if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			j, dropped, err := loadJournal(path, 1000)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("err = %v, want one naming the file and %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var pending []int64
			for id := range j.pending {
				pending = append(pending, id)
			}
			slices.Sort(pending)
			if j.offset != c.wantOffset || !slices.Equal(pending, c.wantPending) || dropped != c.wantDropped {
				t.Fatalf("offset %d, pending %v, dropped %d; want %d, %v, %d", j.offset, pending, dropped, c.wantOffset, c.wantPending, c.wantDropped)
			}
		})
	}
}

// The journal is rewritten when finished records pile up, and keeps what is unfinished.
func TestJournalCompacts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "tg.offset")
	j, _, err := loadJournal(path, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.open(); err != nil {
		t.Fatal(err)
	}
	const n, batch = 3 * compactAfter, 16
	for first := int64(1); first <= n; first += batch {
		var ids []int64
		var raws []json.RawMessage
		for id := first; id < first+batch; id++ {
			ids = append(ids, id)
			raws = append(raws, json.RawMessage(fmt.Sprintf(`{"update_id": %d,
				"message": {"message_id": %d, "text": "line one\nline two"}}`, id, id)))
		}
		if err := j.take(ids, raws, first+batch); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if id%1000 != 0 { // every thousandth stays unfinished
				if err := j.done(id); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 200*compactAfter {
		t.Fatalf("journal of %d bytes after %d finished updates: not compacted", st.Size(), n)
	}
	// A crash now: the next run reads what is unfinished.
	j2, _, err := loadJournal(path, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	pendingIDs, raws := j2.unfinished()
	for _, id := range pendingIDs {
		var u update
		if err := json.Unmarshal(raws[id], &u); err != nil {
			t.Fatal(err)
		}
		if u.Message.Text != "line one\nline two" {
			t.Fatalf("update %d text %q", u.UpdateID, u.Message.Text)
		}
		ids = append(ids, u.UpdateID)
	}
	var want []int64
	for id := int64(1000); id <= n; id += 1000 {
		want = append(want, id)
	}
	if !slices.Equal(ids, want) || j2.offset != n+1 {
		t.Fatalf("unfinished %v offset %d; want %v offset %d", ids, j2.offset, want, n+1)
	}
	if err := j.close(); err != nil {
		t.Fatal(err)
	}
}

// helperEnv names the environment of the crashing bot run by TestHelperCrashingBot.
const (
	helperEndpoint = "RELAYBOT_TG_HELPER_ENDPOINT"
	helperOffset   = "RELAYBOT_TG_HELPER_OFFSET"
	helperToken    = "RELAYBOT_TG_HELPER_TOKEN"
)

// TestHelperCrashingBot is not a test: TestCrashMidTurnAnsweredOnce runs it in a child process
// and kills it. It answers "first" at once and starts on anything else without ever finishing.
func TestHelperCrashingBot(t *testing.T) {
	endpoint := os.Getenv(helperEndpoint)
	if endpoint == "" {
		t.Skip("run by TestCrashMidTurnAnsweredOnce")
	}
	ad, err := New(Options{
		Token:          os.Getenv(helperToken),
		APIEndpoint:    endpoint,
		Stream:         true,
		PollTimeout:    time.Second,
		RetryAfterUnit: unit,
		OffsetFile:     os.Getenv(helperOffset),
	})
	if err != nil {
		t.Fatal(err)
	}
	ad.Run(context.Background(), handlerFunc(func(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
		r := out.NewReply(ctx)
		if in.Text == "first" {
			_ = r.Finish(ctx, "ok: first", nil)
			return
		}
		r.Update("thinking about " + in.Text)
		<-ctx.Done() // the turn never ends: the process is killed in the middle of it
	}))
}

// A bot killed in the middle of a turn: the next run, with the same offset file, answers that
// message once more (marked Redelivered), does not answer again the one the killed run had
// finished, and goes on with new messages.
func TestCrashMidTurnAnsweredOnce(t *testing.T) {
	e := newEnv(t, tk.Options{}, nil)
	offsetFile := filepath.Join(t.TempDir(), "telegram.offset")
	dm := tk.Chat{ID: 77}

	child := exec.Command(os.Args[0], "-test.run=^TestHelperCrashingBot$", "-test.count=1")
	child.Env = append(os.Environ(), helperEndpoint+"="+e.srv.Endpoint(), helperOffset+"="+offsetFile, helperToken+"="+e.srv.Token())
	var childOut strings.Builder
	child.Stdout, child.Stderr = &childOut, &childOut
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	killed := sync.OnceFunc(func() {
		child.Process.Kill()
		child.Wait()
	})
	defer killed()

	e.srv.Send(tk.Inbound{Chat: dm, From: ann, Text: "first"})
	e.srv.Send(tk.Inbound{Chat: dm, From: ann, Text: "second"})
	texts := func() []string {
		var out []string
		for _, m := range e.srv.BotMessages(dm.ID) {
			out = append(out, m.Text)
		}
		slices.Sort(out)
		return out
	}
	// "first" answered and finished (update 1 done), "second" started (its preview shows).
	wait.Until(t, "the child bot to get to the middle of the second turn", func() error {
		data, _ := os.ReadFile(offsetFile)
		if strings.Contains(string(data), "\ndone 1\n") && slices.Equal(texts(), []string{"ok: first", "thinking about second"}) {
			return nil
		}
		return fmt.Errorf("bot messages %q; its output:\n%s", texts(), childOut.String())
	})
	killed() // SIGKILL: no shutdown, no confirmation, nothing flushed

	opts := e.ad.opts
	opts.OffsetFile = offsetFile
	ad, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	col := newCollector()
	stop := startRun(t, ad, col)
	defer stop()
	again := col.next(t)
	if again.Text != "second" || !again.Redelivered {
		t.Fatalf("after the crash the handler got %q (redelivered %v), want \"second\" handed over again", again.Text, again.Redelivered)
	}
	e.srv.Send(tk.Inbound{Chat: dm, From: ann, Text: "third"})
	if next := col.next(t); next.Text != "third" || next.Redelivered {
		t.Fatalf("then got %q (redelivered %v), want the new message \"third\"", next.Text, next.Redelivered)
	}
	stop()
	if len(col.got) != 2 {
		t.Fatalf("handled %d messages after the crash, want 2 (no message twice): %+v", len(col.got), col.got)
	}
	want := []string{"ok: first", "ok: second", "ok: third", "thinking about second"}
	if got := texts(); !slices.Equal(got, want) {
		t.Fatalf("bot messages %q, want every message answered once: %q", got, want)
	}
	// A clean stop leaves nothing unfinished behind.
	j, _, err := loadJournal(offsetFile, ad.self.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.pending) != 0 || j.offset != 4 {
		t.Fatalf("offset file after a clean stop: offset %d, %d unfinished; want 4, 0", j.offset, len(j.pending))
	}
}

// In webhook mode too, an update is in the offset file while its turn runs, and an update a
// crashed run left unfinished is handed over again at start.
func TestWebhookKeepsUnfinishedUpdates(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	offsetFile := filepath.Join(t.TempDir(), "telegram.offset")
	left := `{"update_id":500,"message":{"message_id":9,"from":{"id":7,"first_name":"Ann"},"chat":{"id":71,"type":"private"},"date":1,"text":"before the crash"}}`
	if err := os.WriteFile(offsetFile, []byte("relaybot-telegram-journal 1 1000\ntake 500 "+left+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, tk.Options{}, func(o *Options) {
		o.Mode = "webhook"
		o.WebhookListen = addr
		o.WebhookURL = "http://" + addr + "/tg"
		o.WebhookSecret = "s3cret"
		o.OffsetFile = offsetFile
	})
	col := newCollector()
	release := make(chan struct{})
	held := make(chan struct{})
	stop := startRun(t, e.ad, handlerFunc(func(ctx context.Context, in adapters.Inbound, out adapters.Responder) {
		if in.Text == "held" {
			close(held)
			<-release
		}
		col.Handle(ctx, in, out)
	}))
	defer stop()
	if got := col.next(t); got.Text != "before the crash" || !got.Redelivered {
		t.Fatalf("first handled %q (redelivered %v), want the crashed run's unfinished update", got.Text, got.Redelivered)
	}
	e.srv.Send(tk.Inbound{Chat: tk.Chat{ID: 71}, From: ann, Text: "held"})
	<-held
	data, err := os.ReadFile(offsetFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"text":"held"`) {
		t.Fatalf("the running update is not in the offset file:\n%s", data)
	}
	close(release)
	if got := col.next(t); got.Text != "held" || got.Redelivered {
		t.Fatalf("then handled %q (redelivered %v)", got.Text, got.Redelivered)
	}
	stop()
	j, _, err := loadJournal(offsetFile, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.pending) != 0 {
		t.Fatalf("%d updates left unfinished after a clean stop", len(j.pending))
	}
}

// BenchmarkJournal is the offset file's cost per message: its take record (synced to disk)
// and its done record.
func BenchmarkJournal(b *testing.B) {
	j, _, err := loadJournal(filepath.Join(b.TempDir(), "telegram.offset"), 1000)
	if err != nil {
		b.Fatal(err)
	}
	if err := j.open(); err != nil {
		b.Fatal(err)
	}
	defer j.close()
	raw := json.RawMessage(`{"update_id":1,"message":{"message_id":1,"from":{"id":7,"first_name":"Ann"},"chat":{"id":71,"type":"private"},"date":1,"text":"a question of a usual length for a chat message"}}`)
	b.ReportAllocs()
	for i := range b.N {
		id := int64(i + 1)
		if err := j.take([]int64{id}, []json.RawMessage{raw}, id+1); err != nil {
			b.Fatal(err)
		}
		if err := j.done(id); err != nil {
			b.Fatal(err)
		}
	}
}

// An offset file is kept with its database, and dropped when the database is new.
func TestOffsetFileIsDroppedOnlyWhenItsDatabaseIsNew(t *testing.T) {
	for _, c := range []struct {
		name           string
		dbExists, keep bool
		postgres       bool
	}{
		{name: "database exists", dbExists: true, keep: true},
		{name: "new database", dbExists: false, keep: false},
		{name: "postgres", postgres: true, keep: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			db, offset := filepath.Join(dir, "bot.db"), filepath.Join(dir, "telegram.offset")
			if c.dbExists {
				if err := os.WriteFile(db, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(offset, []byte("5000\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if c.postgres {
				db = ""
			}
			var logs bytes.Buffer
			if err := DropOffsetOfNewDatabase(db, offset, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
				t.Fatal(err)
			}
			_, err := os.Stat(offset)
			if kept := err == nil; kept != c.keep {
				t.Fatalf("offset file kept = %v, want %v (log: %s)", kept, c.keep, logs.String())
			}
			if !c.keep && !strings.Contains(logs.String(), "earlier database") {
				t.Fatalf("the removal is not logged: %s", logs.String())
			}
		})
	}
}

// An update handed over again after a crash is counted in the offset file, so the run after a
// second crash knows it is the second handover (and the pipeline answers it with a notice
// rather than a third try); the count survives compaction and goes with the update's done.
func TestJournalCountsHandoversAcrossCrashes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tg.offset")
	raw := json.RawMessage(`{"update_id":7,"message":{"message_id":7}}`)
	run := func() *journal { // a run starting on the file a killed run left
		t.Helper()
		j, _, err := loadJournal(path, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.open(); err != nil {
			t.Fatal(err)
		}
		return j
	}
	j := run()
	if err := j.take([]int64{7}, []json.RawMessage{raw}, 8); err != nil {
		t.Fatal(err)
	}
	for want := 1; want <= 2; want++ { // the run dies while answering, twice
		j = run()
		if n, err := j.handOver(7, 0); err != nil || n != want {
			t.Fatalf("handover after crash %d counted %d (%v), want %d", want, n, err, want)
		}
	}
	j = run()
	if err := j.done(7); err != nil {
		t.Fatal(err)
	}
	if err := j.take([]int64{7}, []json.RawMessage{raw}, 8); err != nil {
		t.Fatal(err)
	}
	if n, _ := j.handOver(7, 0); n != 1 {
		t.Fatalf("an update finished and taken anew counted %d handovers, want 1", n)
	}
}
