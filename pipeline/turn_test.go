package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"relaybot/provider"
	"relaybot/store/storetest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"relaybot/adapters"
	"relaybot/adapters/markdown"
	"relaybot/agent"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/internal/testkit/llm"
	"relaybot/internal/testkit/logbuf"
	"relaybot/internal/testkit/wait"
	"relaybot/pipeline/access"
	"relaybot/pipeline/history"
	"relaybot/store"
	"relaybot/tools"
	"relaybot/tools/toolstest"
)

// recResponder is an adapters.Responder that keeps what the user would see.
type recResponder struct {
	stream bool

	mu       sync.Mutex
	notices  []string
	replies  []*recReply
	finished []*recReply
}

type recReply struct {
	owner    *recResponder
	mu       sync.Mutex
	updates  []string
	final    string
	files    []chat.File
	finished bool
}

func (r *recResponder) NewReply(ctx context.Context) adapters.Reply {
	r.mu.Lock()
	defer r.mu.Unlock()
	rp := &recReply{owner: r}
	r.replies = append(r.replies, rp)
	return rp
}

func (r *recResponder) Notice(ctx context.Context, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notices = append(r.notices, text)
	return nil
}

func (r *recResponder) SupportsStreaming() bool { return r.stream }

// Notices returns the notices as a chat shows them: Markdown rendered to its text (the escapes
// of untrusted words gone, markup the bot meant shown as its text).
func (r *recResponder) Notices() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.notices))
	for i, n := range r.notices {
		out[i], _ = markdown.Telegram(n)
	}
	return out
}

// RawNotices returns the notices as the pipeline wrote them (Markdown).
func (r *recResponder) RawNotices() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.notices...)
}

func (r *recResponder) Reply(i int) *recReply {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i >= len(r.replies) {
		return nil
	}
	return r.replies[i]
}

func (r *recReply) Update(text string) {
	r.mu.Lock()
	r.updates = append(r.updates, text)
	r.mu.Unlock()
}

func (r *recReply) Working(bool) {}

func (r *recReply) Finish(ctx context.Context, text string, files []chat.File) error {
	r.mu.Lock()
	r.final, r.files, r.finished = text, files, true
	r.mu.Unlock()
	if r.owner != nil {
		r.owner.mu.Lock()
		r.owner.finished = append(r.owner.finished, r)
		r.owner.mu.Unlock()
	}
	return nil
}

// finishOrder returns the replies in the order they were finished.
func (r *recResponder) finishOrder() []*recReply {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*recReply(nil), r.finished...)
}

func (r *recReply) Final() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.final, r.finished
}

func (r *recReply) Latest() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.updates) == 0 {
		return ""
	}
	return r.updates[len(r.updates)-1]
}

// pageChars is the size of the "page" tool's result.
const pageChars = 20000

// echoLoader is a native tool source with one tool, "echo", that returns its "text" argument,
// "fail", that always fails, "block", that returns when its call is cancelled, and "page", that
// returns pageChars characters.
type echoLoader struct{}

func (echoLoader) Source() audit.Source { return audit.SourceNative }

func (echoLoader) Tools(context.Context) []tools.Spec {
	schema := json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)
	return []tools.Spec{
		{Name: "echo", Description: "echo text", Parameters: schema},
		{Name: "fail", Description: "always fails", Parameters: schema},
		{Name: "block", Description: "waits until cancelled", Parameters: schema},
		{Name: "page", Description: "fetches a web page of 20,000 characters", Parameters: schema},
	}
}

func (echoLoader) Call(ctx context.Context, inv tools.Invocation) (tools.Result, error) {
	switch inv.Name {
	case "echo":
		var a struct{ Text string }
		if err := json.Unmarshal(inv.Arguments, &a); err != nil {
			return tools.Result{}, err
		}
		return tools.Result{Text: "echo: " + a.Text, Files: []chat.File{{Name: "echo.txt", MIME: "text/plain", Data: []byte(a.Text)}}}, nil
	case "fail":
		return tools.Result{}, fmt.Errorf("the disk is on fire")
	case "page":
		return tools.Result{Text: strings.Repeat("page text ", pageChars/10)}, nil
	case "block":
		<-ctx.Done()
		return tools.Result{}, ctx.Err()
	}
	return tools.Result{}, fmt.Errorf("%w: %s", tools.ErrNotFound, inv.Name)
}

type harness struct {
	t     testing.TB
	llm   *llm.Server
	store *store.Database
	rec   *toolstest.Recorder
	p     *Pipeline
	logs  *logbuf.Buffer
}

func newHarness(t testing.TB, opts Options) *harness {
	t.Helper()
	return newHarnessStore(t, opts, nil)
}

// newHarnessStore is newHarness with the pipeline's store wrapped by wrap (when not nil).
func newHarnessStore(t testing.TB, opts Options, wrap func(Store) Store) *harness {
	t.Helper()
	return newHarnessTools(t, opts, tools.ManagerOptions{}, wrap)
}

// newHarnessTools is newHarnessStore with the tool manager's options (a policy).
func newHarnessTools(t testing.TB, opts Options, mopts tools.ManagerOptions, wrap func(Store) Store) *harness {
	t.Helper()
	return newHarnessLoaders(t, opts, mopts, wrap, echoLoader{})
}

// newHarnessLoaders is newHarnessTools with the tool manager's loaders (an MCP server's).
func newHarnessLoaders(t testing.TB, opts Options, mopts tools.ManagerOptions, wrap func(Store) Store, loaders ...tools.Loader) *harness {
	t.Helper()
	srv := llm.NewServer()
	t.Cleanup(srv.Close)
	return newHarnessOn(t, srv, storetest.Open(t, storetest.SQLite), opts, mopts, wrap, loaders...)
}

// storeOf is the pipeline's part of db, as cmd/bot hands it over.
func storeOf(db *store.Database) Store {
	return Store{Conversations: db.Conversations, Turns: db.Turns, Messages: db.Messages,
		ModelCalls: db.ModelCalls, ToolCalls: db.ToolCalls}
}

// newHarnessOn is a harness on a given model server and store (replicas sharing a database
// share both), with the tool manager's loaders (echoLoader when none are given).
func newHarnessOn(t testing.TB, srv *llm.Server, st *store.Database, opts Options, mopts tools.ManagerOptions, wrap func(Store) Store, loaders ...tools.Loader) *harness {
	t.Helper()
	if len(loaders) == 0 {
		loaders = []tools.Loader{echoLoader{}}
	}
	h := &harness{t: t, llm: srv, store: st, rec: toolstest.NewRecorder(), logs: &logbuf.Buffer{}}
	runner, err := agent.NewRunner([]agent.Model{{Endpoint: provider.Endpoint{Name: "primary", BaseURL: h.llm.URL, Model: "test-model"}, SupportsTools: true}},
		agent.Options{FlushChunks: 1})
	if err != nil {
		t.Fatal(err)
	}
	if mopts.Consents == nil {
		mopts.Consents = st.Consents
	}
	if opts.Tools.Consents == nil {
		opts.Tools.Consents = st.Consents
	}
	if opts.Usage == nil {
		opts.Usage = st.Usage
	}
	mgr, err := tools.NewManager(loaders, h.rec, mopts)
	if err != nil {
		t.Fatal(err)
	}
	if opts.History.Rounds == 0 {
		opts.History.Rounds = 10
	}
	if opts.Queue.Size == 0 {
		opts.Queue.Size = DefaultQueueSize
	}
	opts.History.SystemPrompt = "You are a test bot."
	opts.Logger = slog.New(slog.NewTextHandler(h.logs, nil))
	opts.Recorder = h.rec
	pst := storeOf(st)
	if wrap != nil {
		pst = wrap(pst)
	}
	h.p = newPipeline(t, runner, pst, mgr, opts)
	return h
}

// newPipeline is New's pipeline, shut down when the test ends.
func newPipeline(t testing.TB, runner Runner, st Store, toolbox Toolbox, opts Options) *Pipeline {
	t.Helper()
	p, err := New(runner, st, toolbox, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Shutdown(ctx)
	})
	return p
}

func privateMsg(user, id, text string) adapters.Inbound {
	in := adapters.Inbound{
		Chat: chat.Ref{Platform: chat.Telegram, ChatID: user}, Kind: adapters.Private,
		MessageID: id, UserID: user, UserName: "Ann", Text: text, Time: time.Now(),
	}
	if c, ok := adapters.ParseCommand(text); ok { // as every adapter does
		in.Command, in.Args, in.Text = c.Name, c.Args, ""
	}
	return in
}

// handle runs Handle on its own goroutine, as adapters do, and returns a channel closed when it returns.
func (h *harness) handle(in adapters.Inbound, out adapters.Responder) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.p.Handle(context.Background(), in, out)
	}()
	return done
}

func (h *harness) history(key chat.Key) []chat.Message {
	h.t.Helper()
	conv, err := h.store.Conversations.Conversation(context.Background(), key)
	if err != nil {
		h.t.Fatal(err)
	}
	msgs, err := h.store.Messages.History(context.Background(), conv.ID, 10)
	if err != nil {
		h.t.Fatal(err)
	}
	return msgs
}

// TestFilesOverTheTurnsCapAreNamedToTheUser: files past tools.max_files_per_turn do not go out
// with the answer, and the answer says which were left out.
func TestFilesOverTheTurnsCapAreNamedToTheUser(t *testing.T) {
	h := newHarnessTools(t, Options{}, tools.ManagerOptions{MaxFilesPerTurn: 1}, nil)
	h.llm.Push(
		llm.Reply{Chunks: []llm.Chunk{{ToolCalls: []llm.ToolCallDelta{
			{Index: 0, ID: "call_a", Name: "echo", Arguments: `{"text":"one"}`},
			{Index: 1, ID: "call_b", Name: "echo", Arguments: `{"text":"two"}`},
		}}}},
		llm.Text("Here you are."),
	)
	out := &recResponder{stream: true}
	<-h.handle(privateMsg("42", "1", "two files please"), out)
	final, _ := out.Reply(0).Final()
	if files := out.Reply(0).files; len(files) != 1 {
		t.Errorf("%d files with the answer, want the cap's 1", len(files))
	}
	if !strings.Contains(final, "1 file from echo left out: echo.txt (at most 1 file an answer).") {
		t.Errorf("the answer does not say which file was left out:\n%s", final)
	}
}

func TestTurnWithToolRound(t *testing.T) {
	h := newHarness(t, Options{Output: OutputOptions{TrackFunctionCalls: true}})
	h.llm.Push(
		llm.Reply{Chunks: []llm.Chunk{
			{Content: "Let me check."},
			{ToolCalls: []llm.ToolCallDelta{{Index: 0, ID: "call_a", Name: "echo", Arguments: `{"text":"hi"}`}}},
		}},
		llm.Text("The tool ", "said hi."),
	)
	out := &recResponder{stream: true}
	in := privateMsg("42", "1", "use the tool")
	<-h.handle(in, out)

	final, ok := out.Reply(0).Final()
	if !ok {
		t.Fatal("no final answer")
	}
	want := "Let me check.\n\n<details>\n<summary>✓ 1 tool · "
	if !strings.HasPrefix(final, want) || !strings.Contains(final, "\n✓ echo ") || !strings.HasSuffix(final, "\n\nThe tool said hi.") {
		t.Fatalf("final answer:\n%q\nwant the pre-tool text, the status line folded away and the answer below", final)
	}
	if strings.Contains(final, "echo: hi") {
		t.Fatalf("the tool result was shown to the user: %q", final)
	}
	sawRunning := false
	for _, u := range out.Reply(0).updates {
		sawRunning = sawRunning || strings.Contains(u, "⏳ echo…")
	}
	if !sawRunning {
		t.Errorf("no preview showed the running tool: %q", out.Reply(0).updates)
	}
	if files := out.Reply(0).files; len(files) != 1 || files[0].Name != "echo.txt" {
		t.Errorf("files with the final answer = %+v, want echo.txt", files)
	}

	recs := h.rec.Records()
	if len(recs) != 1 || recs[0].ToolCallID != "call_a" || recs[0].Round != 1 || recs[0].TurnID == 0 || recs[0].Status != audit.StatusOK {
		t.Fatalf("audit records = %+v", recs)
	}
	hist := h.history(history.KeyOf(in, false))
	roles := []string{}
	for _, m := range hist {
		roles = append(roles, string(m.Role))
	}
	if got := strings.Join(roles, ","); got != "user,assistant,tool,assistant" {
		t.Fatalf("history roles = %s, want the whole turn", got)
	}
	if hist[2].Name != "echo" || hist[3].Content != "The tool said hi." {
		t.Errorf("history = %+v", hist)
	}
	turn, err := h.store.Turns.Turn(context.Background(), recs[0].TurnID)
	if err != nil || turn.Status != store.TurnOK || turn.Rounds != 2 {
		t.Errorf("turn = %+v, %v; want ok with 2 rounds", turn, err)
	}

	// The next message sees the history.
	h.llm.Push(llm.Text("Again."))
	<-h.handle(privateMsg("42", "2", "and now?"), out)
	reqs := h.llm.Requests()
	last := reqs[len(reqs)-1].Messages
	if len(last) != 6 || last[0].Role != "system" || last[1].Content != "use the tool" || last[5].Content != "and now?" {
		t.Fatalf("second turn's transcript = %+v", last)
	}
	if !strings.Contains(last[0].Content, "You are a test bot.") {
		t.Errorf("system prompt missing: %q", last[0].Content)
	}
}

func TestStopKeepsPartialAnswer(t *testing.T) {
	h := newHarness(t, Options{})
	hold := make(chan struct{})
	defer close(hold)
	h.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Once upon"}, {Content: " a time", Wait: hold}}})
	out := &recResponder{stream: true}
	in := privateMsg("7", "1", "tell a story")
	done := h.handle(in, out)
	wait.For(t, "the first words", func() bool { r := out.Reply(0); return r != nil && r.Latest() == "Once upon" })

	<-h.handle(adapters.Inbound{Chat: in.Chat, Kind: in.Kind, UserID: "7", Command: "stop"}, out)
	<-done
	final, _ := out.Reply(0).Final()
	if final != "Once upon [stopped]" {
		t.Fatalf("final = %q, want the partial answer marked stopped", final)
	}
	hist := h.history(history.KeyOf(in, false))
	if len(hist) != 2 || hist[1].Content != "Once upon" {
		t.Fatalf("history = %+v, want the user message and the partial answer", hist)
	}
	turns := turnStatuses(t, h, in)
	if len(turns) != 1 || turns[0] != store.TurnCancelled {
		t.Fatalf("turn statuses = %v, want cancelled", turns)
	}
	if n := out.Notices(); len(n) != 0 {
		t.Fatalf("notices = %q", n)
	}
}

// turnStatuses reads the statuses of a conversation's turns from the audit-free turn table.
func turnStatuses(t *testing.T, h *harness, in adapters.Inbound) []chat.Status {
	t.Helper()
	turns, err := h.store.Turns.ChatTurns(context.Background(), in.Chat, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []chat.Status
	for _, turn := range slices.Backward(turns) { // oldest first
		out = append(out, turn.Status)
	}
	return out
}

func TestQueueInOrderAndBusy(t *testing.T) {
	h := newHarness(t, Options{Queue: QueueOptions{Size: 1}})
	hold := make(chan struct{})
	h.llm.Push(
		llm.Reply{Chunks: []llm.Chunk{{Content: "first", Wait: hold}}},
		llm.Text("second"),
	)
	out := &recResponder{stream: true}
	d1 := h.handle(privateMsg("9", "1", "one"), out)
	wait.For(t, "the first turn to ask the model", func() bool { return h.llm.RequestCount() == 1 })
	d2 := h.handle(privateMsg("9", "2", "two"), out)
	wait.For(t, "the second message to wait", func() bool { return h.p.Queued() == 1 })
	<-h.handle(privateMsg("9", "3", "three"), out)
	if n := out.Notices(); len(n) != 1 || n[0] != DefaultBusyText {
		t.Fatalf("notices = %q, want the busy text for the third message", n)
	}
	close(hold)
	<-d1
	<-d2
	f1, _ := out.Reply(0).Final()
	f2, _ := out.Reply(1).Final()
	if f1 != "first" || f2 != "second" {
		t.Fatalf("answers = %q, %q; want in order", f1, f2)
	}
	reqs := h.llm.Requests()
	if got := reqs[1].Messages[len(reqs[1].Messages)-1].Content; got != "two" {
		t.Fatalf("second request answered %q", got)
	}
}

func TestInterrupt(t *testing.T) {
	h := newHarness(t, Options{Queue: QueueOptions{Busy: BusyInterrupt}})
	hold := make(chan struct{})
	defer close(hold)
	h.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Working on it"}, {Content: "...", Wait: hold}}}, llm.Text("New answer."))
	out := &recResponder{stream: true}
	in := privateMsg("5", "1", "slow question")
	d1 := h.handle(in, out)
	wait.For(t, "the first words", func() bool { r := out.Reply(0); return r != nil && r.Latest() == "Working on it" })
	<-h.handle(privateMsg("5", "2", "never mind"), out)
	<-d1
	f1, _ := out.Reply(0).Final()
	f2, _ := out.Reply(1).Final()
	if f1 != "Working on it [stopped]" || f2 != "New answer." {
		t.Fatalf("answers = %q, %q", f1, f2)
	}
	if st := turnStatuses(t, h, in); len(st) != 2 || st[0] != store.TurnInterrupted || st[1] != store.TurnOK {
		t.Fatalf("turn statuses = %v", st)
	}
}

func TestRefusals(t *testing.T) {
	h := newHarness(t, Options{RateLimitPerMinute: 1, Access: access.Lists{DenyUsers: []string{"*:666"}}})
	out := &recResponder{stream: true}
	<-h.handle(privateMsg("666", "1", "hello"), out)
	if len(out.Notices()) != 0 || out.Reply(0) != nil || h.llm.RequestCount() != 0 {
		t.Fatal("a denied user got an answer")
	}
	if !strings.Contains(h.logs.String(), "access rules") || !strings.Contains(h.logs.String(), "user=666") {
		t.Fatalf("the refusal was not logged: %s", h.logs.String())
	}

	h.llm.Push(llm.Text("hi"))
	<-h.handle(privateMsg("1", "1", "hello"), out)
	<-h.handle(privateMsg("1", "2", "hello again"), out)
	<-h.handle(privateMsg("1", "3", "and again"), out)
	if n := out.Notices(); len(n) != 1 || n[0] != DefaultRateLimitedText {
		t.Fatalf("notices = %q, want one rate-limit reply", n)
	}
	if h.llm.RequestCount() != 1 {
		t.Fatalf("the model was asked %d times, want 1", h.llm.RequestCount())
	}
}

func TestFailureHandling(t *testing.T) {
	for _, tt := range []struct {
		mode ExceptionHandling
		want string
	}{
		{"show-hint", "Partial\n\n" + DefaultUnavailableText},
		{"show-error", "Partial\n\n" + DefaultUnavailableText + "\nError: "},
		{"hide", "Partial"},
	} {
		t.Run(string(tt.mode), func(t *testing.T) {
			h := newHarness(t, Options{Output: OutputOptions{ExceptionHandling: tt.mode}})
			h.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Partial"}}, Cut: true})
			out := &recResponder{stream: true}
			in := privateMsg("3", "1", "q")
			<-h.handle(in, out)
			final, _ := out.Reply(0).Final()
			if !strings.HasPrefix(final, tt.want) || (tt.mode == "hide" && final != tt.want) {
				t.Fatalf("final = %q, want prefix %q", final, tt.want)
			}
			if st := turnStatuses(t, h, in); len(st) != 1 || st[0] != store.TurnError {
				t.Fatalf("turn statuses = %v", st)
			}
		})
	}
}

func TestShutdownCancelsAfterGrace(t *testing.T) {
	h := newHarness(t, Options{})
	hold := make(chan struct{})
	defer close(hold)
	h.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Half an"}, {Content: " answer", Wait: hold}}})
	out := &recResponder{stream: true}
	in := privateMsg("8", "1", "q")
	done := h.handle(in, out)
	wait.For(t, "the first words", func() bool { r := out.Reply(0); return r != nil && r.Latest() == "Half an" })
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace left
	if err := h.p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	final, _ := out.Reply(0).Final()
	if final != "Half an [stopped]" {
		t.Fatalf("final = %q", final)
	}
	if st := turnStatuses(t, h, in); len(st) != 1 || st[0] != store.TurnInterrupted {
		t.Fatalf("turn statuses = %v", st)
	}
	<-h.handle(privateMsg("8", "2", "after"), out)
	if out.Reply(1) != nil {
		t.Fatal("a message after shutdown was answered")
	}
	if n := out.Notices(); len(n) != 1 || n[0] != DefaultShutdownText {
		t.Fatalf("notices = %q; a message after shutdown must be told to come back", n)
	}
}

// fakeAudit is an audit.Log with one record; it keeps the filter it was asked with.
type fakeAudit struct{ got audit.Filter }

func (f *fakeAudit) ToolCalls(ctx context.Context, flt audit.Filter) ([]audit.Record, string, error) {
	f.got = flt
	return []audit.Record{{StartedAt: time.Date(2026, 11, 29, 23, 40, 12, 0, time.UTC), ToolName: "fetch_url", Status: audit.StatusError,
		Duration: 1200 * time.Millisecond, Arguments: `{"url": "https://example.com/a/very/long/path/that/goes/on"}`}}, "", nil
}

func (f *fakeAudit) ToolCall(ctx context.Context, id int64) (audit.Record, error) {
	return audit.Record{}, audit.ErrNotFound
}

func (f *fakeAudit) ToolStats(ctx context.Context, flt audit.Filter) ([]audit.Stat, error) {
	return nil, nil
}

// /audit in a group lists that group's calls only; an admin sees every chat's calls only in a
// private chat with the bot.
func TestAuditCommandInAGroupShowsOnlyThatChat(t *testing.T) {
	alog := &fakeAudit{}
	h := newHarness(t, Options{Access: access.Lists{Admins: []string{"telegram:1"}}, Audit: alog})
	tests := []struct {
		name string
		kind adapters.ChatKind
		chat string
		want audit.Filter
	}{
		{"group", adapters.Group, "-100", audit.Filter{Platform: "telegram", ChatID: "-100", Limit: auditDefaultN}},
		{"private", adapters.Private, "1", audit.Filter{Limit: auditDefaultN}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := &recResponder{}
			<-h.handle(adapters.Inbound{Chat: chat.Ref{Platform: chat.Telegram, ChatID: tc.chat}, Kind: tc.kind, UserID: "1", Command: "audit"}, out)
			if !reflect.DeepEqual(alog.got, tc.want) {
				t.Fatalf("/audit in a %s asked the log for %+v, want %+v", tc.name, alog.got, tc.want)
			}
		})
	}
}

func TestAuditCommand(t *testing.T) {
	log := &fakeAudit{}
	h := newHarness(t, Options{Access: access.Lists{Admins: []string{"telegram:1"}}, Audit: log})
	out := &recResponder{}
	<-h.handle(adapters.Inbound{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "1"}, Kind: adapters.Private, UserID: "1", Command: "audit", Args: "fetch_url error 5"}, out)
	n := out.Notices()
	if len(n) != 1 || !strings.Contains(n[0], "\n11-29 23:40:12 fetch_url error 1.2 s {\"url\": \"https://example.com/a/very/lon…") {
		t.Fatalf("admin's /audit = %q", n)
	}
	if want := (audit.Filter{Tool: "fetch_url", Statuses: []audit.Status{audit.StatusError}, Limit: 5}); !reflect.DeepEqual(log.got, want) {
		t.Fatalf("filter = %+v, want %+v", log.got, want)
	}

	out = &recResponder{}
	<-h.handle(adapters.Inbound{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "2"}, Kind: adapters.Private, UserID: "2", MessageID: "77", Command: "audit"}, out)
	if n := out.Notices(); len(n) != 1 || !strings.Contains(n[0], "Only bot admins") {
		t.Fatalf("non-admin's /audit = %q", n)
	}
	recs := h.rec.Records()
	if len(recs) != 1 || recs[0].ToolName != "/audit" || recs[0].Status != audit.StatusDenied || recs[0].UserID != "2" {
		t.Fatalf("refusal records = %+v", recs)
	}
}

// Without streaming, each round's text is its own message as soon as the round ends (the user
// reads "Looking." while the tool runs), and the final message carries only what came after.
func TestNonStreamingSendsEachRoundWhenItEnds(t *testing.T) {
	h := newHarness(t, Options{})
	// newHarness's runner allows 128 rounds; this test needs a runner with a cap of 1.
	runner, err := agent.NewRunner([]agent.Model{{Endpoint: provider.Endpoint{Name: "primary", BaseURL: h.llm.URL, Model: "m"}, SupportsTools: true}},
		agent.Options{MaxToolRounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	h.p.now().parts.runner = runner
	call := llm.Reply{Chunks: []llm.Chunk{
		{Content: "Looking."},
		{ToolCalls: []llm.ToolCallDelta{{Index: 0, ID: "c1", Name: "echo", Arguments: `{"text":"x"}`}}},
	}}
	h.llm.Push(call, llm.Text("Done without more tools."))
	out := &recResponder{stream: false}
	<-h.handle(privateMsg("11", "1", "go"), out)
	final, round := out.Reply(0), out.Reply(1)
	if round == nil {
		t.Fatal("the first round's text was not sent on its own")
	}
	if len(final.updates) != 0 || len(round.updates) != 0 {
		t.Fatalf("a non-streaming reply got previews: %q %q", final.updates, round.updates)
	}
	if text, ok := round.Final(); !ok || text != "Looking." {
		t.Errorf("round message = %q (delivered %v), want \"Looking.\"", text, ok)
	}
	text, _ := final.Final()
	if strings.Contains(text, "Looking.") || !strings.Contains(text, "limit of 1 tool rounds") || !strings.HasSuffix(text, "Done without more tools.") {
		t.Fatalf("final = %q, want the round-cap note and the answer, without the round already sent", text)
	}
	if got := out.finishOrder(); len(got) != 2 || got[0] != round || got[1] != final {
		t.Errorf("the round's message was not delivered before the final one")
	}
}

func TestStopInSharedGroupNeedsTheAsker(t *testing.T) {
	h := newHarness(t, Options{Access: access.Lists{Admins: []string{"telegram:99"}}})
	hold := make(chan struct{})
	defer close(hold)
	h.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "Thinking"}, {Content: " hard", Wait: hold}}})
	group := func(user, text, cmd string) adapters.Inbound {
		return adapters.Inbound{Chat: chat.Ref{Platform: chat.Telegram, ChatID: "-5"}, Kind: adapters.Group,
			UserID: user, UserName: "u" + user, Text: text, Command: cmd}
	}
	out := &recResponder{stream: true}
	done := h.handle(group("1", "question", ""), out)
	wait.For(t, "the first words", func() bool { r := out.Reply(0); return r != nil && r.Latest() == "Thinking" })

	other := &recResponder{}
	<-h.handle(group("2", "", "stop"), other)
	if n := other.Notices(); len(n) != 1 || !strings.Contains(n[0], "Only the person who asked") {
		t.Fatalf("another member's /stop: %q", n)
	}
	if _, finished := out.Reply(0).Final(); finished {
		t.Fatal("another member stopped the answer")
	}
	<-h.handle(group("99", "", "stop"), &recResponder{})
	<-done
	if final, _ := out.Reply(0).Final(); final != "Thinking [stopped]" {
		t.Fatalf("final = %q after an admin's /stop", final)
	}
	reqs := h.llm.Requests()
	if got := lastUserContent(reqs[0]); got != "[u1] question" {
		t.Fatalf("a shared group's message reached the model as %q; want the speaker's name", got)
	}
}

func lastUserContent(r llm.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

func TestGlobalTurnLimit(t *testing.T) {
	h := newHarness(t, Options{Queue: QueueOptions{MaxTurnsInFlight: 1, TurnWait: 50 * time.Millisecond}})
	hold := make(chan struct{})
	h.llm.Push(llm.Reply{Chunks: []llm.Chunk{{Content: "busy", Wait: hold}}}, llm.Text("later"))
	first := &recResponder{stream: true}
	done := h.handle(privateMsg("1", "1", "hold the slot"), first)
	wait.For(t, "the first turn to ask the model", func() bool { return h.llm.RequestCount() == 1 })

	second := &recResponder{stream: true}
	<-h.handle(privateMsg("2", "1", "no slot for me"), second)
	if n := second.Notices(); len(n) != 1 || n[0] != DefaultBusyText {
		t.Fatalf("notices = %q; a message that found no free slot must be told the bot is busy", n)
	}
	if second.Reply(0) != nil {
		t.Fatal("a turn ran past the global limit")
	}
	close(hold)
	<-done
	third := &recResponder{stream: true}
	<-h.handle(privateMsg("2", "2", "now?"), third)
	if final, _ := third.Reply(0).Final(); final != "later" {
		t.Fatalf("after the slot freed: %q", final)
	}
}

// A turn stopped while its tool runs shows and saves the round's text once, also when the model's
// reasoning is shown (remove_think off): the shown text then differs from the stored content, and
// must not come back as a second copy of the answer (on screen and as an extra assistant message).
func TestStopMidToolWithReasoningShowsTheTextOnce(t *testing.T) {
	h := newHarness(t, Options{})
	h.llm.Push(llm.Reply{Chunks: append([]llm.Chunk{{Reasoning: "I should look."}, {Content: "Let me check."}},
		llm.ToolCalls(llm.Call{ID: "b1", Name: "block", Args: []string{`{}`}}).Chunks...)})
	out := &recResponder{stream: true}
	in := privateMsg("7", "1", "check it")
	done := h.handle(in, out)
	wait.For(t, "the tool to start", func() bool {
		for _, r := range h.rec.Records() {
			if r.ToolName == "block" {
				return true
			}
		}
		return false
	})
	<-h.handle(adapters.Inbound{Chat: in.Chat, Kind: in.Kind, UserID: "7", Command: "stop"}, out)
	<-done
	final, _ := out.Reply(0).Final()
	if n := strings.Count(final, "Let me check."); n != 1 {
		t.Errorf("final = %q, want the round's text once", final)
	}
	hist := h.history(history.KeyOf(in, false))
	var roles []string
	for _, m := range hist {
		roles = append(roles, string(m.Role))
	}
	if want := []string{"user", "assistant", "tool"}; !slices.Equal(roles, want) {
		t.Errorf("history roles = %v, want %v (no second copy of the answer)", roles, want)
	}
}

// Every tool call the model made gets an audit row, also the ones a /stop kept from running: the
// turn's transcript answers them with "err: not run", and the audit log must show them too
// (status cancelled), not leave calls in the history that the audit log never heard of.
func TestStopMidToolAuditsTheCallsNotRun(t *testing.T) {
	h := newHarness(t, Options{})
	h.llm.Push(llm.Reply{Chunks: llm.ToolCalls(
		llm.Call{ID: "b1", Name: "block", Args: []string{`{}`}},
		llm.Call{ID: "e2", Name: "echo", Args: []string{`{"text":"hi","password":"hunter2"}`}},
	).Chunks})
	out := &recResponder{stream: true}
	in := privateMsg("7", "1", "go")
	done := h.handle(in, out)
	wait.For(t, "the tool to start", func() bool { return len(h.rec.Records()) > 0 })
	<-h.handle(adapters.Inbound{Chat: in.Chat, Kind: in.Kind, UserID: "7", Command: "stop"}, out)
	<-done
	wait.For(t, "two finished audit rows", func() bool {
		n := 0
		for _, r := range h.rec.Records() {
			if r.Status != audit.StatusRunning {
				n++
			}
		}
		return n == 2
	})
	byID := map[string]audit.Record{}
	for _, r := range h.rec.Records() {
		byID[r.ToolCallID] = r
	}
	if r := byID["b1"]; r.Status != audit.StatusCancelled {
		t.Errorf("running call's row = %+v, want cancelled", r)
	}
	r, ok := byID["e2"]
	if !ok {
		t.Fatalf("no audit row for the call the stop kept from running; rows = %+v", h.rec.Records())
	}
	if r.Status != audit.StatusCancelled || r.ToolName != "echo" || r.Round != 1 || r.TurnID == 0 ||
		r.UserID != "7" || r.Error == "" || strings.Contains(r.Arguments, "hunter2") {
		t.Errorf("row of the call not run = %+v", r)
	}
	hist := h.history(history.KeyOf(in, false))
	if len(hist) != 4 || hist[3].ToolCallID != "e2" || !strings.HasPrefix(hist[3].Content, "err: ") {
		t.Errorf("history = %+v, want the call not run answered in the transcript", hist)
	}
}

// A per-chat tool list restricts its chat however its key's platform is written: a key the
// lookup never matched offered every tool in the chat it was meant to restrict.
func TestToolsPerChatKeyMatchesPlatformInAnyCase(t *testing.T) {
	h := newHarness(t, Options{Tools: ToolOptions{PerChat: map[string][]string{"Telegram:5": {"echo"}, " discord : 6 ": {"fail"}}}})
	tests := []struct {
		chat        chat.Ref
		tool        string
		wantOffered bool
	}{
		{chat.Ref{Platform: chat.Telegram, ChatID: "5"}, "echo", true},
		{chat.Ref{Platform: chat.Telegram, ChatID: "5"}, "fail", false},
		{chat.Ref{Platform: chat.Discord, ChatID: "6"}, "echo", false},
		{chat.Ref{Platform: chat.Telegram, ChatID: "7"}, "fail", true},
	}
	for _, tt := range tests {
		allowed := h.p.now().parts.allowedTools(adapters.Inbound{Chat: tt.chat})
		got := allowed == nil || allowed(tt.tool)
		if got != tt.wantOffered {
			t.Errorf("%s:%s offers %s = %v, want %v", tt.chat.Platform, tt.chat.ChatID, tt.tool, got, tt.wantOffered)
		}
	}
}
