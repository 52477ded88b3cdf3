package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"relaybot/audit"
	"relaybot/chat"
	"relaybot/policy"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// DefaultResultMaxChars caps what goes back to the model when ManagerOptions.ResultMaxChars is 0.
const DefaultResultMaxChars = 20000

// recorderTimeout bounds each Recorder call of a call without a later deadline, so a stuck audit
// store cannot hold a tool call.
const recorderTimeout = 10 * time.Second

// ManagerOptions tunes a Manager.
type ManagerOptions struct {
	// ResultMaxChars caps the tool result text that goes back to the model (characters); 0 means
	// DefaultResultMaxChars, a negative value means no cap.
	ResultMaxChars int
	// Logger receives collision warnings and recorder failures; nil means slog.Default().
	Logger *slog.Logger
	// Policy decides which tools each turn is offered and which calls need an approval; nil
	// allows every tool (the allow-lists and AdminOnly still apply).
	Policy *Policy
	// ElicitationTimeout is how long a tool's question waits for an answer before it is
	// answered cancel; 0 means DefaultElicitationTimeout.
	ElicitationTimeout time.Duration
	// Parallel says which rounds run their calls side by side: ParallelReadOnly (the zero
	// value) when every call is safe, ParallelOff never.
	Parallel ParallelMode
	// MaxParallel bounds the calls of a round running at once; 0 means DefaultMaxParallel.
	MaxParallel int
	// ParallelTools are tool names (or path.Match globs) configured safe to run side by side.
	ParallelTools []string
	// MaxFileBytes caps one file a tool returns; larger ones are left out of the reply (and
	// the model and the user are told). 0 means DefaultMaxFileBytes.
	MaxFileBytes int64
	// Consents keeps "always allow" answers where every replica sees them (the store); nil
	// means approval questions offer no "always".
	Consents audit.Consents
	// AlwaysAllowFor is how long an "always allow" answer holds; 0 means DefaultAlwaysAllowFor.
	AlwaysAllowFor time.Duration
	// MaxFilesPerTurn caps the files the tools of one turn return, over all its rounds; later
	// ones are left out likewise. 0 means DefaultMaxFilesPerTurn.
	MaxFilesPerTurn int
	// Claim, when several replicas serve the bot, claims each call of turn turnID (0: outside a
	// turn) for this replica right before it runs (coord.Replica.ClaimToolCall); an error
	// keeps the call from running (ErrNotClaimed). It may wait for the database, within ctx.
	// Nil runs every call.
	Claim func(ctx context.Context, turnID int64) error
}

// Defaults of the file caps: 10 MiB is what every platform takes from a bot (Discord's limit
// without a boosted server), and ten files fill one Discord message.
const (
	DefaultMaxFileBytes    = 10 << 20
	DefaultMaxFilesPerTurn = 10
)

// Manager offers the tools of its loaders to the agent, runs the calls in dispatch order
// (native → plugin → MCP → skill) and reports each call to a Recorder. It is safe for
// concurrent use.
type Manager struct {
	loaders  []Loader // in dispatch order
	rec      Recorder
	maxRes   int
	maxFile  int64
	maxFiles int
	log      *slog.Logger
	policy   *Policy
	claim    func(ctx context.Context, turnID int64) error

	elicitTimeout time.Duration
	parallel      ParallelMode
	maxParallel   int
	parallelTools []string
	consents      audit.Consents
	alwaysFor     time.Duration

	mu     sync.Mutex
	warned map[string]bool // collisions already logged, so a warning appears once, not every turn

	calls inflight // calls running, until their audit rows are finished (Wait)
}

// NewManager returns a Manager over loaders, sorted into the dispatch order of Sources (loaders of
// the same source keep their given order). It lists the tools once and logs a warning for each
// name offered by two loaders; the later loader's tool is not offered.
func NewManager(loaders []Loader, rec Recorder, opts ManagerOptions) (*Manager, error) {
	if rec == nil {
		return nil, errors.New("tools: NewManager: a Recorder is required (every call is audited)")
	}
	ls := make([]Loader, 0, len(loaders))
	for i, l := range loaders {
		if l == nil {
			return nil, fmt.Errorf("tools: NewManager: loader %d is nil", i)
		}
		if sourceRank(l.Source()) < 0 {
			return nil, fmt.Errorf("tools: NewManager: loader %d has unknown source %q", i, l.Source())
		}
		ls = append(ls, l)
	}
	slices.SortStableFunc(ls, func(a, b Loader) int {
		return sourceRank(a.Source()) - sourceRank(b.Source())
	})
	m := &Manager{
		loaders:   ls,
		rec:       rec,
		maxRes:    opts.ResultMaxChars,
		log:       opts.Logger,
		policy:    opts.Policy,
		claim:     opts.Claim,
		warned:    make(map[string]bool),
		consents:  opts.Consents,
		alwaysFor: opts.AlwaysAllowFor,
	}
	if m.alwaysFor <= 0 {
		m.alwaysFor = DefaultAlwaysAllowFor
	}
	if m.maxRes == 0 {
		m.maxRes = DefaultResultMaxChars
	}
	if err := m.setParallel(opts); err != nil {
		return nil, err
	}
	m.elicitTimeout = opts.ElicitationTimeout
	if m.elicitTimeout <= 0 {
		m.elicitTimeout = DefaultElicitationTimeout
	}
	m.maxFile, m.maxFiles = opts.MaxFileBytes, opts.MaxFilesPerTurn
	if m.maxFile <= 0 {
		m.maxFile = DefaultMaxFileBytes
	}
	if m.maxFiles <= 0 {
		m.maxFiles = DefaultMaxFilesPerTurn
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	m.catalog(context.Background())
	return m, nil
}

func sourceRank(s audit.Source) int {
	for i, x := range audit.Sources {
		if x == s {
			return i
		}
	}
	return -1
}

// entry is a tool together with the loader that runs it.
type entry struct {
	spec   Spec
	loader Loader
}

func (e entry) label() string {
	if e.spec.Server != "" {
		return fmt.Sprintf("%s (MCP server %q)", e.spec.Name, e.spec.Server)
	}
	return fmt.Sprintf("%s (%s)", e.spec.Name, e.loader.Source())
}

// catalog asks every loader for its tools and resolves names in dispatch order: the first loader
// offering a name owns it. Collisions are logged once each.
func (m *Manager) catalog(ctx context.Context) ([]entry, map[string]int) {
	var list []entry
	index := make(map[string]int)
	for _, l := range m.loaders {
		for _, s := range l.Tools(ctx) {
			if s.Name == "" {
				continue
			}
			e := entry{spec: s, loader: l}
			if i, ok := index[s.Name]; ok {
				m.warnCollision(list[i], e)
				continue
			}
			index[s.Name] = len(list)
			list = append(list, e)
		}
	}
	return list, index
}

func (m *Manager) warnCollision(kept, dropped entry) {
	key := kept.label() + "\x00" + dropped.label()
	m.mu.Lock()
	seen := m.warned[key]
	m.warned[key] = true
	m.mu.Unlock()
	if seen {
		return
	}
	m.log.Warn("tools: name collision: the later tool is not offered",
		"tool", kept.spec.Name, "kept", kept.label(), "dropped", dropped.label())
}

// Turn is the set of tools offered in one turn and the way to call them. Execute may be called
// concurrently.
type Turn struct {
	m       *Manager
	info    TurnInfo
	all     []entry        // every tool the loaders have, collisions resolved
	index   map[string]int // name → position in all
	offered map[string]bool
	// decisions holds the policy's word on every tool the catalog has (absent: allow).
	decisions map[string]Decision
	specs     []Spec
	approver  Approver
	elicitor  Elicitor
	progress  ProgressFunc
	meter     Meter
	// askMu puts the turn's tool questions to the chat one at a time.
	askMu sync.Mutex

	filesMu sync.Mutex
	files   int // files kept for the reply so far, against MaxFilesPerTurn
}

// SetMeter makes the turn's tools account for their own model calls (an embedding) with m, the
// turn's meter, so they count for the person who asked. Call it before the turn's calls run.
func (t *Turn) SetMeter(m Meter) {
	t.meter = m
}

// TurnScoped is a Loader whose tools depend on where a turn happens (a knowledge base serves
// the chats it names): ForTurn offers each of its tools as the spec it returns (a description
// naming what this chat may use), or not at all when it returns false. A call of a tool left
// out is refused like that of any tool not offered. It must not block.
type TurnScoped interface {
	ForTurn(spec Spec, info TurnInfo) (Spec, bool)
}

// ForTurn lists the tools available now and returns the ones offered in a turn: those allowed
// (nil allowed means all), not denied by the policy and, unless info.Admin, not AdminOnly.
func (m *Manager) ForTurn(info TurnInfo, allowed func(name string) bool) *Turn {
	all, index := m.catalog(context.Background())
	t := &Turn{m: m, info: info, all: all, index: index, offered: make(map[string]bool, len(all)),
		decisions: make(map[string]Decision)}
	for _, e := range all {
		d := m.policy.Decide(e.spec, e.loader.Source(), info)
		if d.Action != policy.ActionAllow {
			t.decisions[e.spec.Name] = d
		}
		if e.spec.AdminOnly && !info.Admin {
			continue
		}
		if allowed != nil && !allowed(e.spec.Name) {
			continue
		}
		if d.Action == policy.ActionDeny {
			continue
		}
		spec := e.spec
		if sc, ok := e.loader.(TurnScoped); ok {
			if spec, ok = sc.ForTurn(spec, info); !ok {
				continue
			}
		}
		t.offered[e.spec.Name] = true
		t.specs = append(t.specs, spec)
	}
	return t
}

// Specs returns the tools offered in this turn, in dispatch order.
func (t *Turn) Specs() []Spec {
	return slices.Clone(t.specs)
}

// Execute runs one call the model made and returns what goes back to it. Every call, refused or
// failed ones included, is reported to the Recorder once: Start before it runs, Finish after. A
// panicking tool is recovered here, so its audit row is finished like any other.
func (t *Turn) Execute(ctx context.Context, call Call) Outcome {
	t.m.calls.add()
	defer t.m.calls.done()
	p := t.prepare(ctx, call)
	if p.out == nil {
		out := t.invoke(p.ctx, p)
		p.out = &out
	}
	return t.complete(p.ctx, p)
}

// prepared is a call whose audit row is started and whose fate before its tool is decided: out
// is set when it will not reach the tool (unknown, refused, bad arguments, denied).
type prepared struct {
	ctx   context.Context // the call's context (Recorder's CallContexter), from prepare on
	call  Call
	start time.Time
	rec   *audit.Record
	args  string
	e     entry
	run   *running
	out   *Outcome
}

// prepare starts the call's audit row, checks the call and asks its approval.
func (t *Turn) prepare(ctx context.Context, call Call) *prepared {
	start := time.Now()
	rec, args := t.record(call, start)
	p := &prepared{call: call, start: start, rec: rec, args: args}
	i, known := t.index[call.Name]
	if known {
		p.e = t.all[i]
		rec.Source = p.e.loader.Source()
		rec.Server = p.e.spec.Server
		rec.ServerTool = p.e.spec.ServerTool
		rec.ApprovalRequired = t.offered[call.Name] && t.decisions[call.Name].Action == policy.ActionAsk
	}
	var gone error // why a tool the turn does not list is unavailable, when a loader knows it
	var unknownTo []string
	if !known {
		rec.Source, rec.Server, gone = t.m.unavailable(call.Name)
		if gone == nil {
			unknownTo = t.m.unknownServers()
		}
	}
	t.m.start(ctx, rec)
	// The call's own context (a tracing span) carries the call from here on.
	p.ctx = ctx
	if cc, ok := t.m.rec.(CallContexter); ok {
		p.ctx = cc.CallContext(ctx, rec)
	}
	p.run = newRunning(t, call, p.e.spec.Server)
	switch {
	case gone != nil:
		out := Failed(audit.StatusUnavailable, gone)
		p.out = &out
	case !known:
		out := Failed(audit.StatusNotFound, NotFoundError{Name: call.Name, Unavailable: unknownTo})
		p.out = &out
	default:
		if out, refused := t.check(p.ctx, rec, call.Name, args, p.e); refused {
			p.out = &out
		}
	}
	return p
}

// complete finishes the call's audit row with its outcome and returns what goes to the model.
func (t *Turn) complete(ctx context.Context, p *prepared) Outcome {
	out, rec := *p.out, p.rec
	out.Duration = time.Since(p.start)
	rec.Status = out.Status
	rec.Duration = out.Duration
	rec.FinishedAt = rec.StartedAt.Add(out.Duration)
	last, asked := p.run.end()
	rec.Progress = Truncate(RedactJSONText(last), progressMaxChars)
	if len(asked) > 0 {
		b, _ := json.Marshal(asked)
		rec.Elicitation = string(b)
	}
	out.Files, out.FilesLeftOut = t.capFiles(p.call.Name, out.Files)
	note := withNote(filesNote(out.Files), leftOutNote(out.FilesLeftOut))
	if out.Err != nil {
		rec.Error = Truncate(RedactJSONText(out.Err.Error()), AuditMaxChars)
		out.Content = Truncate(out.Content, t.m.maxRes)
	} else {
		rec.ResultSize = utf8.RuneCountInString(out.Content)
		rec.Result = withNote(Truncate(RedactJSONText(out.Content), AuditMaxChars), note)
		out.Content = withNote(Truncate(out.Content, t.m.maxRes), note)
	}
	t.m.finish(ctx, rec)
	return out
}

// progressMaxChars caps the last progress message an audit row keeps.
const progressMaxChars = 500

// Skip answers a call that will not run (the turn ended first, or its arguments were cut off) and
// records it: an audit row with status cancelled and reason as its error, so the audit log knows
// every call the model made. The outcome carries reason to the model; the tool never runs.
func (t *Turn) Skip(ctx context.Context, call Call, reason error) Outcome {
	t.m.calls.add()
	defer t.m.calls.done()
	rec, _ := t.record(call, time.Now())
	if i, ok := t.index[call.Name]; ok {
		rec.Source = t.all[i].loader.Source()
		rec.Server = t.all[i].spec.Server
		rec.ServerTool = t.all[i].spec.ServerTool
	}
	t.m.start(ctx, rec)
	rec.Status = audit.StatusCancelled
	rec.Error = Truncate(RedactJSONText(reason.Error()), AuditMaxChars)
	rec.FinishedAt = rec.StartedAt
	t.m.finish(ctx, rec)
	out := NotRun(reason)
	out.Content = Truncate(out.Content, t.m.maxRes)
	return out
}

// record starts the audit record of a call; args are its arguments, "{}" when empty.
func (t *Turn) record(call Call, start time.Time) (*audit.Record, string) {
	args := strings.TrimSpace(call.Arguments)
	if args == "" {
		args = "{}"
	}
	return &audit.Record{
		TurnID:         t.info.TurnID,
		ConversationID: t.info.ConversationID,
		Platform:       t.info.Platform,
		ChatID:         t.info.ChatID,
		UserID:         t.info.UserID,
		Round:          call.Round,
		ToolCallID:     call.ID,
		ToolName:       call.Name,
		Status:         audit.StatusRunning,
		StartedAt:      start.UTC(),
		Arguments:      Truncate(RedactJSONText(args), AuditMaxChars),
		ArgumentsSize:  utf8.RuneCountInString(args),
	}, args
}

// check decides whether the call of a tool the turn knows reaches it, asking its approval if a
// rule says so; refused is true with the outcome when it does not.
func (t *Turn) check(ctx context.Context, rec *audit.Record, name, args string, e entry) (out Outcome, refused bool) {
	if !t.offered[name] {
		if d := t.decisions[name]; d.Action == policy.ActionDeny {
			return Failed(audit.StatusDenied, fmt.Errorf("tool %s is denied by %s", name, d.Rule)), true
		}
		return Failed(audit.StatusDenied, fmt.Errorf("tool %s is not available in this chat", name)), true
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err != nil {
		return Failed(audit.StatusBadArgs, fmt.Errorf("arguments of %s are not a JSON object: %w", name, err)), true
	}
	if obj == nil { // the JSON text "null"
		return Failed(audit.StatusBadArgs, fmt.Errorf("arguments of %s are not a JSON object: got null", name)), true
	}
	if err := ctx.Err(); err != nil {
		return Failed(audit.StatusCancelled, fmt.Errorf("tool %s was not run: %w", name, context.Cause(ctx))), true
	}
	if rec.ApprovalRequired {
		if err := t.approve(ctx, rec, name, args, t.decisions[name], e.spec.Server); err != nil {
			return Failed(audit.StatusDenied, err), true
		}
	}
	return Outcome{}, false
}

// invoke runs a prepared call's tool; Content is the untruncated text on success, ErrorText
// otherwise.
func (t *Turn) invoke(ctx context.Context, p *prepared) Outcome {
	name := p.call.Name
	if t.m.claim != nil {
		// Right before the call, after its approval: the claim is what a replica that lost its
		// turn to another cannot get.
		if err := t.m.claim(ctx, t.info.TurnID); err != nil {
			t.m.log.Warn("tools: call not started: its claim was refused", "tool", name, "tool_call_id", p.call.ID, "err", err)
			return NotRun(fmt.Errorf("%w: %w", ErrNotClaimed, err))
		}
	}
	res, err := callLoader(ctx, p.e.loader, Invocation{Name: name, Arguments: json.RawMessage(p.args), Turn: t.info, Server: p.e.spec.Server, Running: p.run, Meter: t.meter})
	switch {
	case err == nil:
		return Outcome{Content: res.Text, Files: res.Files, Sources: res.Sources, Status: audit.StatusOK}
	case ctx.Err() != nil:
		return Failed(audit.StatusCancelled, fmt.Errorf("tool %s was cancelled: %w", name, cancelCause(ctx, err)))
	case IsTimeout(err):
		if !errors.Is(err, ErrTimeout) {
			// A transport's or the loader's own timer fired: the same thing to the user and the
			// audit log as the loader's deadline.
			err = fmt.Errorf("%w (%w)", err, ErrTimeout)
		}
		return Failed(audit.StatusTimeout, err)
	case errors.Is(err, ErrUnavailable):
		// The tool's server went down or lost its login since the turn started.
		return Failed(audit.StatusUnavailable, err)
	case errors.Is(err, ErrNotFound):
		// The loader lost the tool since the turn started (an MCP server went away).
		return Failed(audit.StatusNotFound, NotFoundError{Name: name})
	default:
		return Failed(audit.StatusError, err)
	}
}

// cancelCause is the error a cancelled call reports: the loader's, and the reason the context
// ended when it was given one (a sibling's failure) and the loader's error does not say it.
func cancelCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) && !errors.Is(cause, ctx.Err()) {
		return fmt.Errorf("%w: %w", cause, err)
	}
	return err
}

// callLoader runs the loader and turns a panic in it into an error, so one broken tool cannot
// take the bot down.
func callLoader(ctx context.Context, l Loader, inv Invocation) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError(inv.Name, p)
		}
	}()
	return l.Call(ctx, inv)
}

// unavailable asks the loaders that can tell (UnavailableTeller) why a tool no loader lists
// now is unavailable: its source, server and reason, or a nil reason when none knows it.
func (m *Manager) unavailable(name string) (audit.Source, string, error) {
	for _, l := range m.loaders {
		if ut, ok := l.(UnavailableTeller); ok {
			if server, why := ut.Unavailable(name); why != nil {
				return l.Source(), server, why
			}
		}
	}
	return "", "", nil
}

// unknownServers are the servers, of the loaders that can tell (UnknownToolTeller), that are
// unavailable with tools the bot does not know.
func (m *Manager) unknownServers() []string {
	var out []string
	for _, l := range m.loaders {
		if ut, ok := l.(UnknownToolTeller); ok {
			out = append(out, ut.UnknownServers()...)
		}
	}
	return out
}

// NotFoundError is the error of a call to a tool no loader has; its text is "Tool not found: NAME"
// and it matches ErrNotFound with errors.Is. Unavailable names the servers whose tools are not
// known because they are unavailable (UnknownToolTeller): the text then says the tool may be
// one of theirs.
type NotFoundError struct {
	Name        string
	Unavailable []string
}

func (e NotFoundError) Error() string {
	if len(e.Unavailable) == 0 {
		return "Tool not found: " + e.Name
	}
	return "Tool not found: " + e.Name + "; it may be a tool of these MCP servers, which are unavailable and whose tools are not known yet: " +
		strings.Join(e.Unavailable, ", ")
}

// Unwrap makes errors.Is(err, ErrNotFound) true.
func (e NotFoundError) Unwrap() error { return ErrNotFound }

// recording is the context of a Recorder call of a call made with ctx: ctx's values without its
// cancellation (a cancelled call is recorded too), until ctx's deadline (the turn's limit, within
// which the recorder tries again while the database is away) or recorderTimeout from now,
// whichever is later.
func recording(ctx context.Context) (context.Context, context.CancelFunc) {
	end := time.Now().Add(recorderTimeout)
	if d, ok := ctx.Deadline(); ok && d.After(end) {
		end = d
	}
	return context.WithDeadline(context.WithoutCancel(ctx), end)
}

func (m *Manager) start(ctx context.Context, rec *audit.Record) {
	ctx, cancel := recording(ctx)
	defer cancel()
	if err := m.rec.Start(ctx, rec); err != nil {
		m.log.Error("tools: audit record not started; the call goes on", "tool", rec.ToolName, "tool_call_id", rec.ToolCallID, "err", err)
	}
}

func (m *Manager) finish(ctx context.Context, rec *audit.Record) {
	ctx, cancel := recording(ctx)
	defer cancel()
	if err := m.rec.Finish(ctx, rec); err != nil {
		m.log.Error("tools: audit record not finished", "tool", rec.ToolName, "tool_call_id", rec.ToolCallID, "id", rec.ID, "status", rec.Status, "err", err)
	}
}

func withNote(s, note string) string {
	switch {
	case note == "":
		return s
	case s == "":
		return note
	default:
		return s + "\n" + note
	}
}

// filesNote tells the model about files a tool produced: "[1 image attached to the reply: chart.png]".
// capFiles keeps the files of a call that fit the caps and says which were left out.
func (t *Turn) capFiles(tool string, files []chat.File) ([]chat.File, string) {
	if len(files) == 0 {
		return files, ""
	}
	t.filesMu.Lock()
	defer t.filesMu.Unlock()
	kept := files[:0:0]
	var out []string
	for _, f := range files {
		name := f.Name
		if name == "" {
			name = "unnamed"
		}
		switch {
		case int64(len(f.Data)) > t.m.maxFile:
			out = append(out, fmt.Sprintf("%s (%s; at most %s a file)", name, byteSize(int64(len(f.Data))), byteSize(t.m.maxFile)))
		case t.files >= t.m.maxFiles:
			unit := "files"
			if t.m.maxFiles == 1 {
				unit = "file"
			}
			out = append(out, fmt.Sprintf("%s (at most %d %s an answer)", name, t.m.maxFiles, unit))
		default:
			t.files++
			kept = append(kept, f)
		}
	}
	if len(out) == 0 {
		return kept, ""
	}
	what := "file"
	if len(out) > 1 {
		what = "files"
	}
	return kept, fmt.Sprintf("%d %s from %s left out: %s.", len(out), what, tool, strings.Join(out, ", "))
}

// leftOutNote tells the model which files were left out, so it does not promise them.
func leftOutNote(s string) string {
	if s == "" {
		return ""
	}
	return "[" + s + " They do not reach the user.]"
}

// byteSize renders n bytes for people: "31.2 MB", "512 KB".
func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MB"
	case n >= 1<<10:
		return strconv.FormatInt(n>>10, 10) + " KB"
	default:
		return strconv.FormatInt(n, 10) + " bytes"
	}
}

func filesNote(files []chat.File) string {
	if len(files) == 0 {
		return ""
	}
	images := 0
	names := make([]string, len(files))
	for i, f := range files {
		if strings.HasPrefix(f.MIME, "image/") {
			images++
		}
		names[i] = f.Name
		if names[i] == "" {
			names[i] = "unnamed"
		}
	}
	kind := "file"
	if images == len(files) {
		kind = "image"
	}
	if len(files) > 1 {
		kind += "s"
	}
	return fmt.Sprintf("[%d %s attached to the reply: %s]", len(files), kind, strings.Join(names, ", "))
}
