package delivery

import (
	"context"
	"strings"
	"testing"

	"relaybot/adapters"
	"relaybot/chat"
)

func TestAnInterruptedReplyEndsWithTheNoteAndKeepsItsMarkdownWhole(t *testing.T) {
	for _, tc := range []struct {
		name, shown string
		max         int
		want        []string // the requests made
	}{
		{"text", "Half an", 100, []string{"edit m0 Half an\n\n— interrupted"}},
		{"an open code block is closed first", "Look:\n```go\nx := 1", 100,
			[]string{"edit m0 Look:\n```go\nx := 1\n```\n\n— interrupted"}},
		{"already marked: no request", "Half an\n\n— interrupted", 100, nil},
		{"no room: the text loses its end", "one two three four five six", 24,
			[]string{"edit m0 one two…\n\n— interrupted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &recorder{first: make(chan struct{})}
			e := New(m, adapters.Limits{MaxLen: tc.max}, Options{})
			defer e.Close()
			msg := adapters.MessageRef{Chat: chat.Ref{Platform: "test", ChatID: "1"}, ID: "m0"}
			if err := e.MarkInterrupted(context.Background(), msg, tc.shown); err != nil {
				t.Fatal(err)
			}
			if got := m.lines(); strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("the chat saw %q, want %q", got, tc.want)
			}
		})
	}
}

// inFlightLog records what a reply tells InFlight.
type inFlightLog struct{ log []string }

func (f *inFlightLog) Showing(id string, msg adapters.MessageRef, text string) {
	f.log = append(f.log, "showing "+id+" "+msg.ID+" "+text)
}
func (f *inFlightLog) Ended(id string) { f.log = append(f.log, "ended "+id) }

func TestAReplyInFlightIsKnownUntilItsFinalTextIsDelivered(t *testing.T) {
	m := &recorder{first: make(chan struct{})}
	f := &inFlightLog{}
	e := New(m, adapters.Limits{MaxLen: 100}, Options{InFlight: f})
	defer e.Close()
	r := e.NewReply(context.Background(), chat.Ref{Platform: "test", ChatID: "1"}, adapters.SendOptions{})
	r.Update("Half an")
	<-m.first
	if err := r.Finish(context.Background(), "Half an answer.", nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"showing 1 m1 Half an", "ended 1"}
	if strings.Join(f.log, "|") != strings.Join(want, "|") {
		t.Fatalf("in flight: %q, want %q", f.log, want)
	}
}
