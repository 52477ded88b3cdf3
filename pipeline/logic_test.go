package pipeline

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"relaybot/adapters"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/tools"
)

func inbound(platform chat.Platform, kind adapters.ChatKind, chatID, thread, user string) adapters.Inbound {
	return adapters.Inbound{Chat: chat.Ref{Platform: platform, ChatID: chatID, ThreadID: thread}, Kind: kind, UserID: user}
}

func TestParseAuditArgs(t *testing.T) {
	tests := []struct {
		args    string
		want    audit.Filter
		wantErr bool
	}{
		{"", audit.Filter{Limit: 10}, false},
		{"fetch_url", audit.Filter{Tool: "fetch_url", Limit: 10}, false},
		{"fetch_url error 5", audit.Filter{Tool: "fetch_url", Statuses: []audit.Status{"error"}, Limit: 5}, false},
		{"5 timeout", audit.Filter{Statuses: []audit.Status{"timeout"}, Limit: 5}, false},
		{"a b", audit.Filter{}, true},
		{"500", audit.Filter{}, true},
	}
	for _, tt := range tests {
		got, err := parseAuditArgs(tt.args)
		if (err != nil) != tt.wantErr {
			t.Errorf("parseAuditArgs(%q) err = %v, want error %v", tt.args, err, tt.wantErr)
			continue
		}
		if err == nil && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseAuditArgs(%q) = %+v, want %+v", tt.args, got, tt.want)
		}
	}
}

func TestView(t *testing.T) {
	v := &view{track: true}
	v.setText("Let me look")
	v.setText("Let me look that up.")
	v.endRound()
	v.startTool("c1", "fetch_url")
	if got, want := v.render(), "Let me look that up.\n\n⏳ fetch\\_url…"; got != want {
		t.Fatalf("while the tool runs:\n%q\nwant\n%q", got, want)
	}
	v.finishTool("c1", "fetch_url", tools.Outcome{Status: audit.StatusOK, Duration: 1200 * time.Millisecond})
	v.startTool("c2", "current_time")
	v.finishTool("c2", "current_time", tools.Failed(audit.StatusError, errors.New("boom\nstack")))
	v.startTool("c3", "echo")
	v.finishTool("c3", "echo", tools.Outcome{Status: audit.StatusOK, Duration: 35 * time.Millisecond})
	if got, want := v.render(), "Let me look that up.\n\n✓ fetch\\_url 1.2 s\n✗ current\\_time: boom\n✓ echo 35 ms"; got != want {
		t.Fatalf("tools done, no text yet:\n%q\nwant\n%q", got, want)
	}
	// Once the answer continues, the finished lines fold away, the way each surface folds.
	v.setText("It is noon.")
	want := "Let me look that up.\n\n<details>\n<summary>✗ 3 tools, 1 failed · 1.2 s</summary>\n\n✓ fetch\\_url 1.2 s\n✗ current\\_time: boom\n✓ echo 35 ms\n\n</details>\n\nIt is noon."
	if got := v.render(); got != want {
		t.Fatalf("final:\n%q\nwant\n%q", got, want)
	}
	v.s = newSurface(chat.Discord, "")
	if got, want := v.render(), "Let me look that up.\n\n✗ 3 tools, 1 failed · 1.2 s\n\nIt is noon."; got != want {
		t.Fatalf("final on Discord:\n%q\nwant one compact line\n%q", got, want)
	}

	quiet := &view{}
	quiet.setText("Before.")
	quiet.endRound()
	quiet.startTool("c1", "secret_tool")
	quiet.finishTool("c1", "secret_tool", tools.Outcome{Status: audit.StatusOK, Duration: time.Second})
	quiet.setText("After")
	if got := quiet.render(); got != "Before.\n\nAfter" {
		t.Fatalf("without tracking: %q", got)
	}
	if got := quiet.withNote("[stopped]", true); got != "Before.\n\nAfter [stopped]" {
		t.Fatalf("stopped mid-sentence: %q", got)
	}
	empty := &view{}
	if got := quiet.withNote("Request failed.", false); got != "Before.\n\nAfter\n\nRequest failed." {
		t.Fatalf("failure after a partial answer: %q", got)
	}
	if got := empty.withNote("Request failed.", false); got != "Request failed." {
		t.Fatalf("failure without an answer: %q", got)
	}
}

// settleDelays are the settle delays the scheduler tests run with: none, and a moment (in the
// fake time of a synctest bubble, so a busy machine cannot stretch it).
var settleDelays = []struct {
	name   string
	settle time.Duration
}{{"without settling", 0}, {"with settling", 50 * time.Millisecond}}

// ready reports whether a ticket may run (or was dropped).
func ready(tk *queuedTurn) bool {
	select {
	case <-tk.ready:
		return true
	default:
		return false
	}
}

// settle lets the scheduler's settle delay pass in the bubble and the timers it started fire.
func settle(s *turnQueue) {
	time.Sleep(s.settle)
	synctest.Wait()
}

func TestSchedulerQueue(t *testing.T) {
	for _, tt := range settleDelays {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newTurnQueue(2, false, tt.settle)
				at := func(sec int, id string) adapters.Inbound {
					return adapters.Inbound{MessageID: id, Time: time.Unix(int64(sec), 0)}
				}
				first, _, err := s.enqueue("k", at(1, "1"))
				if err != nil {
					t.Fatal(err)
				}
				if tt.settle > 0 && ready(first) {
					t.Fatal("the first message ran before the conversation settled")
				}
				settle(s)
				if !ready(first) {
					t.Fatal("the first message of an idle conversation must run once it settled")
				}
				// The third message reaches the scheduler before the second (racing goroutines).
				third, busy, _ := s.enqueue("k", at(2, "3"))
				if !busy {
					t.Fatal("a message behind a running turn is not reported busy")
				}
				second, _, _ := s.enqueue("k", at(2, "2"))
				if _, _, err := s.enqueue("k", at(3, "4")); !errors.Is(err, errBusy) {
					t.Fatalf("a full queue must refuse, got %v", err)
				}
				other, _, _ := s.enqueue("other", at(2, "9"))
				settle(s)
				if !ready(other) {
					t.Fatal("another conversation must not wait")
				}
				if ready(second) || ready(third) {
					t.Fatal("waiting messages ran while the first one runs")
				}
				s.leave("k", first)
				if !ready(second) || ready(third) {
					t.Fatal("the earlier message must run next")
				}
				s.leave("k", second)
				if !ready(third) {
					t.Fatal("the last message did not run")
				}
				s.leave("k", third)
				s.leave("other", other)
				if n := len(s.sessions); n != 0 {
					t.Fatalf("%d sessions left after every ticket left", n)
				}
			})
		})
	}
}

func TestSchedulerInterruptAndStop(t *testing.T) {
	for _, tt := range settleDelays {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newTurnQueue(8, true, tt.settle)
				first, _, _ := s.enqueue("k", adapters.Inbound{MessageID: "1"})
				settle(s)
				ctx, cancel := context.WithCancelCause(context.Background())
				defer cancel(nil)
				s.started("k", first, cancel)
				second, busy, _ := s.enqueue("k", adapters.Inbound{MessageID: "2"})
				if !busy {
					t.Fatal("a message that interrupts a running turn is not reported busy")
				}
				if !errors.Is(context.Cause(ctx), ErrInterrupted) {
					t.Fatalf("running turn cause = %v, want interrupted", context.Cause(ctx))
				}
				third, _, _ := s.enqueue("k", adapters.Inbound{MessageID: "3"})
				if !ready(second) || !errors.Is(second.dropped, ErrInterrupted) {
					t.Fatalf("superseded waiting message: ready %v, dropped = %v", ready(second), second.dropped)
				}
				s.leave("k", second)
				s.leave("k", first)
				if !ready(third) || third.dropped != nil {
					t.Fatalf("the newest message: ready %v, dropped %v; want it to run", ready(third), third.dropped)
				}
				ctx3, cancel3 := context.WithCancelCause(context.Background())
				s.started("k", third, cancel3)
				if running, stopped := s.stop("k", ErrStopped, func(adapters.Inbound) bool { return false }); !running || stopped || ctx3.Err() != nil {
					t.Fatal("a refused stop cancelled the running turn")
				}
				if _, stopped := s.stop("k", ErrStopped, nil); !stopped || !errors.Is(context.Cause(ctx3), ErrStopped) {
					t.Fatal("stop did not cancel the running turn")
				}
				s.leave("k", third)
				if running, _ := s.stop("k", ErrStopped, nil); running {
					t.Fatal("stop reported a running turn in an idle conversation")
				}
			})
		})
	}
}

// Two messages racing into an idle conversation run in the order they were sent, whichever
// reached the scheduler first, as long as both arrive within the settle delay; one that arrives
// after it waits its turn behind the running one.
func TestSchedulerSettleOrdersRacingMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTurnQueue(1, false, 20*time.Millisecond)
		second, _, _ := s.enqueue("k", adapters.Inbound{MessageID: "11"})
		time.Sleep(s.settle - time.Millisecond) // the earlier message is late, but within the delay
		first, _, _ := s.enqueue("k", adapters.Inbound{MessageID: "10"})
		synctest.Wait()
		if ready(first) || ready(second) {
			t.Fatal("a message ran before the conversation settled")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if !ready(first) || ready(second) {
			t.Fatalf("after settling: earlier message ready %v, later %v; want only the earlier", ready(first), ready(second))
		}
		s.leave("k", first)
		if !ready(second) {
			t.Fatal("the later message did not run after the earlier one")
		}
		s.leave("k", second)
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.sessions) != 0 {
			t.Fatal("session left behind")
		}
	})
}

// A /stop that arrives after a message was let run but before its turn began (it waited for a
// free slot among the turns in flight) must still stop that turn, not answer "Nothing to stop."
// and let it run to the end.
func TestSchedulerStopBeforeTurnBegins(t *testing.T) {
	s := newTurnQueue(8, false, 0)
	first, _, _ := s.enqueue("k", adapters.Inbound{MessageID: "1", UserID: "u"})
	<-first.ready
	running, stopped := s.stop("k", ErrStopped, func(started adapters.Inbound) bool { return started.UserID == "u" })
	if !running || !stopped {
		t.Fatalf("stop of a turn about to begin: running=%v stopped=%v, want true true", running, stopped)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	s.started("k", first, cancel)
	if !errors.Is(context.Cause(ctx), ErrStopped) {
		t.Fatalf("turn began after /stop with cause %v, want stopped", context.Cause(ctx))
	}
	s.leave("k", first)

	// A refused stop leaves the turn alone.
	second, _, _ := s.enqueue("k", adapters.Inbound{MessageID: "2", UserID: "u"})
	<-second.ready
	if running, stopped := s.stop("k", ErrStopped, func(adapters.Inbound) bool { return false }); !running || stopped {
		t.Fatalf("refused stop: running=%v stopped=%v, want true false", running, stopped)
	}
	ctx2, cancel2 := context.WithCancelCause(context.Background())
	defer cancel2(nil)
	s.started("k", second, cancel2)
	if ctx2.Err() != nil {
		t.Fatal("a refused stop cancelled the turn when it began")
	}
	s.leave("k", second)
}

// Reasoning shows the way each surface shows it, in every mode and at every moment of the
// stream (still thinking, done, a </think> without its opening tag), and never as raw tags.
func TestReasoningNeverShowsRawTags(t *testing.T) {
	texts := map[string]string{
		"thinking": "<think>\nweigh the options",
		"answered": "<think>\nweigh the options\n</think>\nTake the train.",
		"orphan":   "weigh the options</think>Take the train.",
		"inline":   "Sure. <think>check the map</think> Take the train.",
	}
	tests := []struct {
		platform chat.Platform
		mode     Reasoning
		want     map[string]string
	}{
		{chat.Telegram, "", map[string]string{
			"thinking": "<details>\n<summary>💭 Thinking…</summary>\n\nweigh the options\n\n</details>",
			"answered": "<details>\n<summary>💭 Thought</summary>\n\nweigh the options\n\n</details>\n\nTake the train.",
		}},
		{chat.Web, ReasoningCollapsed, map[string]string{
			"answered": "<details>\n<summary>💭 Thought</summary>\n\nweigh the options\n\n</details>\n\nTake the train.",
		}},
		{chat.Discord, ReasoningCollapsed, map[string]string{
			"thinking": "-# 💭 Thinking…\n-# weigh the options",
			"answered": "-# 💭 Thought\n-# weigh the options\n\nTake the train.",
		}},
		{chat.Telegram, ReasoningHidden, map[string]string{
			"thinking": "",
			"answered": "Take the train.",
			"orphan":   "Take the train.",
			"inline":   "Sure.\n\nTake the train.",
		}},
		{chat.Discord, ReasoningInline, map[string]string{
			"answered": "> 💭 Thought\n> weigh the options\n\nTake the train.",
		}},
	}
	for _, tt := range tests {
		s := newSurface(tt.platform, tt.mode)
		for name, text := range texts {
			got := s.showReasoning(text)
			if strings.Contains(got, "<think>") || strings.Contains(got, "</think>") {
				t.Errorf("%s/%s/%s shows raw tags: %q", tt.platform, tt.mode, name, got)
			}
			if want, ok := tt.want[name]; ok && got != want {
				t.Errorf("%s/%s/%s:\n got %q\nwant %q", tt.platform, tt.mode, name, got, want)
			}
			if tt.mode != ReasoningHidden && !strings.Contains(got, "weigh the options") && name != "inline" {
				t.Errorf("%s/%s/%s lost the reasoning: %q", tt.platform, tt.mode, name, got)
			}
		}
	}
}
