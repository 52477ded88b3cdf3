package pipeline

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/internal/testkit/files"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/wait"
	"relaybot/media/sandbox"
	"relaybot/provider"
	"relaybot/speech"
	"relaybot/store/storetest"
	"relaybot/tools"
)

// document is a message carrying one file.
func document(user, id, name, mime string, data []byte) adapters.Inbound {
	in := privateMsg(user, id, "what does it say?")
	in.Attachments = []adapters.Attachment{{Kind: adapters.Document, Name: name, MIME: mime, Size: int64(len(data)),
		Fetch: adapters.BytesAttachment(data)}}
	return in
}

// The 187-byte PDF that made the PDF library allocate a TiB (a fatal error: the process
// exited) is one file that cannot be read; the bot lives on and the next message, in another
// chat, is answered.
func TestCrashPDFLeavesTheBotAnswering(t *testing.T) {
	h := newHarness(t, Options{})
	out := &recResponder{}
	<-h.handle(document("61", "1", "crash.pdf", "application/pdf", files.CrashPDF()), out)
	n := out.Notices()
	if len(n) != 1 || !strings.HasPrefix(n[0], "crash.pdf could not be read: it breaks the reader's limits") {
		t.Fatalf("notices %q, want one line saying the file could not be read", n)
	}
	h.llm.Push(llm.Text("Still here."))
	other := &recResponder{}
	<-h.handle(privateMsg("62", "1", "are you there?"), other)
	if r := other.Reply(0); r == nil {
		t.Fatal("the next message, in another chat, was not answered")
	} else if final, _ := r.Final(); final != "Still here." {
		t.Fatalf("the next message was answered %q", final)
	}
}

// A PDF whose page tree lists itself would be read for ever: /stop ends it at once, reader
// process included, and the chat is free for the next message.
func TestStopEndsADocumentThatReadsForever(t *testing.T) {
	r, err := sandbox.New(sandbox.Limits{Wall: time.Hour, CPU: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Options{Media: MediaOptions{Reader: r}})
	out := &recResponder{}
	done := h.handle(document("63", "1", "loop.pdf", "application/pdf", files.KidsLoopPDF()), out)
	var pid int
	wait.For(t, "the reader process of loop.pdf", func() bool { pid = readerPID(); return pid != 0 })
	<-h.handle(privateMsg("63", "2", "/stop"), &recResponder{})
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the turn reading loop.pdf went on 30 s after /stop")
	}
	wait.For(t, "the reader process to be gone", func() bool { return readerPID() != pid })
	h.llm.Push(llm.Text("Next answer."))
	next := &recResponder{}
	<-h.handle(privateMsg("63", "3", "hello"), next)
	if r := next.Reply(0); r == nil {
		t.Fatal("after /stop the next message was not answered")
	}
}

// A 5-minute voice note declared as 1 s is measured: over speech.max_seconds (60 s) it is
// refused without a transcription; under a 10-minute limit it is transcribed and /usage bills
// its 300 s, not the 1 s declared.
func TestVoiceNoteIsMeasuredNotBelieved(t *testing.T) {
	srv := llm.NewServer()
	t.Cleanup(srv.Close)
	sp, err := speech.New(speech.Options{Candidates: []provider.Endpoint{{BaseURL: srv.URL, Model: "whisper-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	five := files.OggOpus(5 * time.Minute)
	voice := func(id string) adapters.Inbound {
		in := privateMsg("64", id, "")
		in.Attachments = []adapters.Attachment{{Kind: adapters.Voice, MIME: "audio/ogg", Size: int64(len(five)),
			Duration: time.Second, Fetch: adapters.BytesAttachment(five)}}
		return in
	}

	h := newHarnessOn(t, srv, storetest.Open(t, storetest.SQLite), Options{Media: MediaOptions{Transcriber: sp, MaxAudio: time.Minute}}, tools.ManagerOptions{}, nil)
	out := &recResponder{}
	<-h.handle(voice("1"), out)
	if n := out.Notices(); len(n) != 1 || n[0] != "The voice note is 5:00 long; I transcribe at most 1:00." {
		t.Fatalf("notices %q, want the voice note refused by its measured length", n)
	}
	if got := len(srv.AudioRequests()); got != 0 {
		t.Fatalf("%d transcription requests for a voice note over the limit", got)
	}

	h = newHarnessOn(t, srv, storetest.Open(t, storetest.SQLite), Options{Media: MediaOptions{Transcriber: sp, MaxAudio: 10 * time.Minute}}, tools.ManagerOptions{}, nil)
	h.llm.Push(llm.Text("Heard you."))
	<-h.handle(voice("2"), &recResponder{})
	if got := len(srv.AudioRequests()); got != 1 {
		t.Fatalf("%d transcription requests, want the 5-minute note transcribed once", got)
	}
	if u := usageOf(t, h.store.Usage, "64"); u.AudioSeconds != 300 {
		t.Fatalf("usage bills %v s of audio, want the measured 300", u.AudioSeconds)
	}
}

// A recording whose length cannot be read is refused with a line saying so, not taken as 0 s.
func TestUnmeasurableAudioIsRefused(t *testing.T) {
	srv := llm.NewServer()
	t.Cleanup(srv.Close)
	sp, err := speech.New(speech.Options{Candidates: []provider.Endpoint{{BaseURL: srv.URL, Model: "whisper-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessOn(t, srv, storetest.Open(t, storetest.SQLite), Options{Media: MediaOptions{Transcriber: sp}}, tools.ManagerOptions{}, nil)
	in := privateMsg("65", "1", "")
	junk := []byte(strings.Repeat("no audio frames here ", 1000))
	in.Attachments = []adapters.Attachment{{Kind: adapters.Audio, Name: "song.mp3", MIME: "audio/mpeg", Size: int64(len(junk)), Fetch: adapters.BytesAttachment(junk)}}
	out := &recResponder{}
	<-h.handle(in, out)
	if n := out.Notices(); len(n) != 1 || !strings.Contains(n[0], `The audio "song.mp3" was not transcribed: I cannot tell how long it is`) {
		t.Fatalf("notices %q, want the unmeasurable file refused", n)
	}
	if got := len(srv.AudioRequests()); got != 0 {
		t.Fatalf("%d transcription requests for a recording of unknown length", got)
	}
}

// readerPID is the pid of a child process of this one (a reader), 0 when there is none.
func readerPID() int {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		if fs := strings.Fields(string(b)); len(fs) > 0 {
			pid, _ := strconv.Atoi(fs[0])
			return pid
		}
	}
	return 0
}
