package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
)

// recorder is a Messenger that keeps what each request did, in order, as a line of text:
// "send <text>", "edit <id> <text>", "files <names> <caption>", "attach <id> <names> <text>".
type recorder struct {
	mu       sync.Mutex
	log      []string
	next     int
	attachFn func() error  // the answer to the next EditWithFiles; nil means success
	first    chan struct{} // closed by the first request
}

func (m *recorder) add(line string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	if m.next == 1 {
		close(m.first)
	}
	m.log = append(m.log, line)
	return fmt.Sprintf("m%d", m.next)
}

func (m *recorder) lines() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.log)
}

func names(files []chat.File) string {
	var n []string
	for _, f := range files {
		n = append(n, f.Name)
	}
	return strings.Join(n, ",")
}

func (m *recorder) Send(_ context.Context, chat chat.Ref, text string, _ adapters.SendOptions) (adapters.MessageRef, error) {
	return adapters.MessageRef{Chat: chat, ID: m.add("send " + text)}, nil
}

func (m *recorder) Edit(_ context.Context, msg adapters.MessageRef, text string) error {
	m.add("edit " + msg.ID + " " + text)
	return nil
}

func (m *recorder) SendFiles(_ context.Context, chat chat.Ref, files []chat.File, caption string, _ adapters.SendOptions) (adapters.MessageRef, error) {
	return adapters.MessageRef{Chat: chat, ID: m.add("files " + names(files) + " " + caption)}, nil
}

func (m *recorder) Typing(context.Context, chat.Ref) error { return nil }

// attacher is a recorder whose platform can attach files to sent messages.
type attacher struct{ *recorder }

func (m attacher) EditWithFiles(_ context.Context, msg adapters.MessageRef, text string, files []chat.File) error {
	m.mu.Lock()
	fn := m.attachFn
	m.attachFn = nil
	m.mu.Unlock()
	if fn != nil {
		if err := fn(); err != nil {
			m.add("refused " + msg.ID)
			return err
		}
	}
	m.add("attach " + msg.ID + " " + names(files) + " " + text)
	return nil
}

func testFiles(n int) []chat.File {
	var files []chat.File
	for i := range n {
		files = append(files, chat.File{Name: fmt.Sprintf("f%d", i), MIME: "image/png", Data: []byte{byte(i)}})
	}
	return files
}

func TestFinishDeliversFiles(t *testing.T) {
	long := strings.Repeat("a", 60) + "\n\n" + strings.Repeat("b", 60) // two parts of 100 at most
	limited := 0
	cases := []struct {
		name     string
		attach   bool
		preview  string // shown before Finish, if any
		attachFn func() error
		text     string
		files    int
		want     []string
	}{
		{"without attaching, one message per file", false, "", nil, "done", 2,
			[]string{"send done", "files f0 ", "files f1 "}},
		{"without attaching, after a preview", false, "do", nil, "done", 1,
			[]string{"send do", "edit m1 done", "files f0 "}},
		{"a new last message is posted with its files", true, "", nil, "done", 2,
			[]string{"files f0,f1 done"}},
		{"an existing last message gets its text and files in one edit", true, "do", nil, "done", 2,
			[]string{"send do", "attach m1 f0,f1 done"}},
		{"a last message already showing the text still gets the files", true, "done", nil, "done", 1,
			[]string{"send done", "attach m1 f0 done"}},
		{"files go on the last of several parts, the rest follow", true, "a", nil, long, 5,
			[]string{"send a", "edit m1 " + strings.Repeat("a", 60), "files f0,f1 " + strings.Repeat("b", 60), "files f2,f3 ", "files f4 "}},
		{"a gone message is replaced with text and files", true, "do", func() error { return adapters.ErrMessageGone }, "done", 1,
			[]string{"send do", "refused m1", "files f0 done"}},
		{"refused files fall back to the text, then one message per file", true, "do", func() error { return errors.New("HTTP 413") }, "done", 2,
			[]string{"send do", "refused m1", "edit m1 done", "files f0 ", "files f1 "}},
		{"a 429 is waited out and the attach sent again", true, "do", func() error {
			limited++
			return &adapters.RateLimitError{RetryAfter: 10 * time.Millisecond}
		}, "done", 1,
			[]string{"send do", "refused m1", "attach m1 f0 done"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{attachFn: tc.attachFn, first: make(chan struct{})}
			var m adapters.Messenger = rec
			if tc.attach {
				m = attacher{rec}
			}
			e := New(m, adapters.Limits{MaxLen: 100, MaxFiles: 2}, Options{})
			defer e.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r := e.NewReply(ctx, testChat, adapters.SendOptions{})
			if tc.preview != "" {
				r.Update(tc.preview)
				select {
				case <-rec.first:
				case <-ctx.Done():
					t.Fatal("the preview was never sent")
				}
			}
			if err := r.Finish(ctx, tc.text, testFiles(tc.files)); err != nil {
				t.Fatalf("Finish: %v", err)
			}
			if got := rec.lines(); !slices.Equal(got, tc.want) {
				t.Errorf("requests:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
	if limited != 1 {
		t.Errorf("the 429 case ran %d times", limited)
	}
}
