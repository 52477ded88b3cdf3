package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"relaybot/adapters"
	"relaybot/agent"
	"relaybot/chat"
	"relaybot/pipeline/access"
	"relaybot/pipeline/asking"
	"relaybot/pipeline/history"
	"relaybot/pipeline/quota"
	"relaybot/store"
	"relaybot/tools"
)

// errTurnTimeout is the cause of a turn that ran past TurnTimeout.
var errTurnTimeout = errors.New("the answer took too long")

// turn is one turn of a conversation. Its methods are its stages, in the order runTurn calls
// them: the quota, the start (history read, the user's message saved), the transcript and the
// response view, the agent's run, the delivery of the answer, and the turn's record.
type turn struct {
	parts *turnParts
	r     *request
	ctx   context.Context // ends at /stop, an interrupt, the shutdown or TurnTimeout
	log   *slog.Logger
	begun time.Time
	// in is the message answered: a /retry's is the earlier message it answers again.
	in   adapters.Inbound
	hist *history.History
	// meter holds the turn's model calls to the quotas and keeps them.
	meter *quota.Meter
	id    int64
	// begin is the turn's start while it waits to ride in the first model call's reservation;
	// nil when it was written on its own.
	begin *turnStart
	req   agent.Request
	resp  *response
	// media is what the message's attachments gave (media.go); spoken the call that spoke the
	// answer, if any, and voice the voice message it delivered.
	media  readMedia
	spoken []chat.ModelCall
	voice  []chat.File
	// remembered is the block of the speaker's facts the request carries (remember.go);
	// recalled says it was looked up.
	remembered string
	recalled   bool
	// known is the block of the "auto" knowledge bases' chunks the request carries
	// (knowledge.go); looked says it was looked up.
	known  string
	looked bool
	// knownSources are the places of the block's passages, [1] first.
	knownSources []string
	// attached is the block of the MCP resources attached to the chat (attached.go);
	// attachedRead says they were read.
	attached     string
	attachedRead bool
}

// turnParts are what a turn is run with: the agent, the store, the tools, and the pipeline's
// parts (history, quota, asking, media), which the pipeline hands it.
type turnParts struct {
	runner  Runner
	store   Store
	tools   Toolbox
	opts    *Options
	access  *access.Rules
	history *history.Keeper
	quotas  *quota.Guard
	asking  *asking.Questions
	media   *mediaReader
	outbox  *outbox
}

// runTurn runs one turn of a conversation: it saves the user's message, runs the agent with the
// history, shows the answer as it grows, delivers the final text, and saves the turn.
func (p *turnParts) runTurn(ctx context.Context, r *request) {
	if p.opts.Stamper != nil {
		ctx = p.opts.Stamper.Stamp(ctx)
	}
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, p.opts.Queue.TurnTimeout, errTurnTimeout)
	defer cancelTimeout()
	t := &turn{parts: p, r: r, ctx: ctx, log: r.log, begun: time.Now(), in: r.in}
	if !t.withinQuota() || !t.readMedia() || !t.start() {
		return
	}
	// The reply outlives the turn's context: a cancelled turn still delivers its partial answer.
	// It keeps the context's values (the turn's trace span).
	replyCtx, cancelReply := context.WithCancel(context.WithoutCancel(t.ctx))
	defer cancelReply()
	t.prepare(replyCtx)
	res := t.run()
	saved := t.saveStart()
	end := t.deliver(res)
	t.speak(res, end.status)
	t.title(res, end.status)
	t.record(res, end, saved)
	t.learn(end.status)
}

// ending is how a turn ended, as deliver found it and record saves it.
type ending struct {
	status chat.Status
	// errText is the error saved with the turn (the real cause, for the audit trail).
	errText string
	// failure is why the model did not answer a failed turn; such a turn leaves the history.
	failure chat.Failure
	// partial is the answer of a cut round, not among the agent's messages.
	partial string
}

// saveStart writes the turn's start alone when no model call carried it (the turn was stopped
// before its first call) and reports whether the turn's row exists, which its end needs.
func (t *turn) saveStart() bool {
	if t.begin == nil {
		return true
	}
	if err := t.begin.Ensure(); err != nil {
		t.log.Error("pipeline: turn not started", "err", err)
		return false
	}
	return true
}

// withinQuota refuses the turn when the sender or the chat has used up a quota.
func (t *turn) withinQuota() bool {
	text, over := t.parts.quotas.Over(t.ctx, t.in, nil, t.log)
	if over {
		t.log.Info("pipeline: turn refused: over quota", "message", t.in.MessageID)
		t.parts.outbox.notice(t.r.out, text, t.log)
	}
	return !over
}

// start finds the conversation (a fresh one after IdleReset of quiet), reads the rounds after
// its summary and saves the user's message, even when the turn is cancelled right away: it takes
// the turn's id ahead, and the message is saved with the turn's first model call's
// reservation, before the call, or by saveStart after a run without one. A
// /retry first takes the last turn out of history and answers its message again; a /prompt
// first gets its prompt, whose messages are the turn's input.
func (t *turn) start() bool {
	if t.in.Command == "prompt" {
		if refused := t.prompted(); refused != "" {
			t.parts.outbox.notice(t.r.out, refused, t.log)
			return false
		}
	}
	err := t.saving("start", t.open)
	switch {
	case errors.Is(err, store.ErrNothingToRetry):
		t.parts.outbox.notice(t.r.out, "There is no earlier message of yours to answer again.", t.log)
		return false
	case errors.Is(err, errRetryRefused):
		t.parts.outbox.notice(t.r.out, "Only bot admins can use /retry last; /retry answers your own last message again.", t.log)
		return false
	}
	if err != nil {
		t.log.Error("pipeline: turn not started", "conversation", t.r.key.String(), "err", err)
		if text := t.parts.opts.failureText(err); text != "" {
			t.parts.outbox.notice(t.r.out, text, t.log)
		}
		return false
	}
	t.log = t.log.With("conversation_id", t.hist.Conv.ID, "turn", t.id)
	t.meter = t.parts.quotas.Meter(t.in, t.id, t.log)
	t.hist.Meter = t.meter.ForSummary()
	t.hist.BeforeCompact = t.parts.learnRounds(t.in, t.log)
	if t.begin != nil {
		t.begin.alone = func(st store.TurnStart) error {
			return t.saving("start", func(ctx context.Context) error {
				_, err := t.parts.store.Turns.StartTurn(ctx, st)
				return err
			})
		}
		t.meter.Carry(t.begin)
	}
	if obs := t.parts.opts.Observer; obs != nil {
		t.ctx = obs.TurnStarted(t.ctx, TurnStart{TurnID: t.id, ConversationID: t.hist.Conv.ID, Chat: t.in.Chat,
			UserID: t.in.UserID, Text: t.in.Text, Begun: t.begun})
	}
	return true
}

// saving runs fn, one store write of the turn, through store.Retry: each try within
// store.WriteAttempt, tried again with back-off while the database is away (store.Transient)
// until the turn's limit (Queue.TurnTimeout from the turn's start, and one try at least), so a
// turn that ends during a database outage is saved once it is back, never dropped.
func (t *turn) saving(what string, fn func(ctx context.Context) error) error {
	limit := max(time.Until(t.begun.Add(t.parts.opts.Queue.TurnTimeout)), store.WriteAttempt)
	lctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), limit)
	defer cancel()
	return store.Retry(lctx, store.Write{What: "the turn's " + what, Log: t.log}, fn)
}

// open reads the turn's history and saves the user's message, or takes the turn's id for its
// first model call to save it with: start's store work.
func (t *turn) open(ctx context.Context) error {
	p, key := t.parts, t.r.key
	conv, err := p.store.Conversations.Conversation(ctx, key)
	if err != nil {
		return fmt.Errorf("conversation %s: %w", key, err)
	}
	if t.in.Command == "retry" {
		if err := t.retried(ctx, conv.ID); err != nil {
			return err
		}
	}
	if t.hist, err = p.history.Load(ctx, key, conv); err != nil {
		return err
	}
	if err := p.history.ResetIfIdle(ctx, t.hist); err != nil {
		return err
	}
	start := store.TurnStart{
		ConversationID:   t.hist.Conv.ID,
		UserID:           t.in.UserID,
		UserName:         t.in.UserName,
		InboundMessageID: t.in.MessageID,
		UserMessage:      chat.Message{Role: chat.RoleUser, Content: t.in.Text, Name: t.in.UserName, Images: p.history.Images(t.in)},
	}
	// The start rides in the first model call's reservation (or is written alone by then).
	if start.ID, err = p.store.Turns.NewTurnID(ctx); err != nil {
		return fmt.Errorf("new turn in conversation %d: %w", t.hist.Conv.ID, err)
	}
	start.StartedAt = time.Now()
	t.id, t.begin = start.ID, &turnStart{start: start}
	return nil
}

// retryAnyone is the argument of an admin's /retry that answers the conversation's last
// message again whoever sent it.
const retryAnyone = "last"

// errRetryRefused: /retry last by someone who is not a bot admin.
var errRetryRefused = errors.New("only bot admins can answer another member's message again")

// retried takes the message a /retry answers again out of the history and makes it the turn's:
// the sender's own last message, or with "/retry last" (bot admins) the conversation's last,
// whoever sent it. A message of another member runs as theirs: their id and name, so their
// rights (admin or not, the asker of its approvals, their quota), and no roles or chat-admin
// standing, which the platform reported for the retrier only: never more than they had.
func (t *turn) retried(ctx context.Context, convID int64) error {
	by := t.in.UserID
	if strings.EqualFold(strings.TrimSpace(t.in.Args), retryAnyone) {
		if !t.parts.access.IsAdmin(t.in) {
			return errRetryRefused
		}
		by = ""
	}
	rt, err := t.parts.store.Turns.RetryLastTurn(ctx, convID, by)
	if err != nil {
		return err
	}
	t.in.Command, t.in.Args, t.in.Text, t.in.Images = "", "", rt.Message.Content, nil
	if rt.UserID != "" && rt.UserID != t.in.UserID {
		t.log.Info("pipeline: /retry answers another member's message with their rights", "member", rt.UserID)
		t.in.UserID, t.in.UserName, t.in.Roles, t.in.ChatAdmin = rt.UserID, rt.UserName, nil, false
		t.parts.outbox.notice(t.r.out, "Answering "+cmp.Or(rt.UserName, rt.UserID)+"'s message again, with their rights.", t.log)
	}
	if rt.Message.Name != "" {
		t.in.UserName = rt.Message.Name
	}
	return nil
}

// prepare builds the agent's request (the tools of the chat, the transcript within the model's
// budget) and the response view that shows the answer in a reply made with replyCtx.
func (t *turn) prepare(replyCtx context.Context) {
	p, in, out := t.parts, t.in, t.r.out
	info := tools.TurnInfo{
		TurnID:         t.id,
		ConversationID: t.hist.Conv.ID,
		Platform:       string(in.Chat.Platform),
		ChatID:         in.Chat.ChatID,
		UserID:         in.UserID,
		Admin:          p.access.IsAdmin(in),
		Private:        in.Kind == adapters.Private,
		Roles:          in.Roles,
		ChatAdmin:      in.ChatAdmin,
		RuleChats:      in.RuleChats(),
	}
	t.req = agent.Request{Stream: out.SupportsStreaming(), Model: t.hist.Conv.Model, Estimate: p.history.Estimate, Meter: t.meter}
	var tt *tools.Turn
	if p.tools != nil {
		tt = p.tools.ForTurn(info, p.allowedTools(in))
		t.req.Tools = tt.Specs()
		t.req.Executor = tt
		tt.SetMeter(t.meter)
	}
	t.req.Messages = t.withAttached(t.withKnowledge(t.withMemory(t.transcript(false))))
	if t.hist.Compacted {
		p.outbox.notice(out, history.CompactedNotice, t.log)
	}
	reply := out.NewReply(replyCtx)
	reply.Working(true)
	if asker, ok := out.(adapters.Asker); ok && tt != nil {
		// The turn's "ask" tool calls are approved in the chat, and its tools' questions
		// answered there, when the platform can post buttons; without that, such calls are
		// denied and such questions answered cancel.
		admins := p.access.Admins()
		qt := asking.Turn{In: in, Out: out, Asker: asker, Reply: reply, Notice: func(text string) { p.outbox.notice(out, text, t.log) },
			Admins: &admins}
		if t.r.slot != nil {
			qt.Slot = t.r.slot
		}
		ca := p.asking.Approver(qt)
		tt.SetApprover(ca)
		tt.SetElicitor(ca)
	}
	t.resp = newResponse(replyCtx, out, reply, t.req.Stream, p.opts.Output, in.Chat.Platform, p.outbox, t.log)
	t.resp.view.addSources(t.knownSources)
	if tt != nil && t.req.Stream {
		t.resp.watch(tt)
	}
}

// transcript is the turn's transcript (compacting every round with all): the history within the
// model's budget, the user's message, and the tool calls a cut turn of the message finished.
func (t *turn) transcript(all bool) []chat.Message {
	return append(t.parts.history.Transcript(t.ctx, t.hist, t.in, t.req.Tools, all, t.log), t.r.resumed...)
}

// run runs the agent. When the model refuses the context as too long (it counts more than the
// estimate), every round is summarised and the turn tried once more.
func (t *turn) run() *agent.Result {
	p, ctx, h := t.parts, t.ctx, t.hist
	calls := append(append([]chat.ModelCall(nil), t.media.calls...), h.Calls...) // transcription and compaction first, as they happened
	res := p.runner.Run(ctx, t.req, t.resp.emit)
	p.history.Observe(res.LLMCalls, h.Estimate)
	calls = append(calls, res.LLMCalls...)
	if res.Status == chat.StatusError && errors.Is(res.Err, agent.ErrContextTooLong) && ctx.Err() == nil && len(h.Rounds) > 0 {
		t.log.Warn("pipeline: the model refused the context as too long; compacting and retrying", "err", res.Err)
		first, n := res, len(h.Calls)
		h.Compacted = false
		t.req.Messages = t.withAttached(t.withKnowledge(t.withMemory(t.transcript(true))))
		calls = append(calls, h.Calls[n:]...)
		if h.Compacted {
			p.outbox.notice(t.r.out, history.CompactedNotice, t.log)
			res = p.runner.Run(ctx, t.req, t.resp.emit)
			calls = append(calls, res.LLMCalls...)
			res.Usage.TokensIn += first.Usage.TokensIn
			res.Usage.TokensOut += first.Usage.TokensOut
		}
	}
	for _, c := range h.Calls {
		res.Usage.TokensIn += c.TokensIn
		res.Usage.TokensOut += c.TokensOut
	}
	res.LLMCalls = calls
	return res
}

// deliver delivers the final answer, with the note of how the turn ended, and returns how the
// turn ended. An answer the platform did not take makes the turn an error: its record says the
// user did not get it, whatever the model did.
func (t *turn) deliver(res *agent.Result) ending {
	e, note := t.outcome(res)
	if e.status == store.TurnOK && res.Truncated {
		note = LengthCutNote
	}
	var err error
	e.partial, err = t.resp.finish(res, note, e.status == store.TurnCancelled || e.status == store.TurnInterrupted)
	if err != nil {
		t.log.Error("pipeline: answer not delivered", "status", e.status, "err", err)
		if e.status == store.TurnOK {
			e.status = store.TurnError
		}
		e.errText = joinErr(e.errText, "delivery failed: "+err.Error())
	}
	return e
}

// record saves the turn's end (its messages and model calls) and tells the observer; a turn
// whose start was never saved has no row to end.
func (t *turn) record(res *agent.Result, e ending, saved bool) {
	status, errText, partial := e.status, e.errText, e.partial
	end := store.TurnEnd{
		TurnID:      t.id,
		QuotaChatID: quota.ChatOf(t.in),
		Status:      status,
		Model:       modelOf(res.LLMCalls),
		Rounds:      roundsOf(res.LLMCalls),
		TokensIn:    res.Usage.TokensIn,
		TokensOut:   res.Usage.TokensOut,
		Error:       errText,
		Failure:     e.failure,
		Messages:    namedToolMessages(slices.Concat(t.r.resumed, res.Messages)),
		// The metered calls are saved already; the transcriptions (made before the turn's
		// meter) and the spoken answer's call are saved with the turn.
		LLMCalls: slices.Concat(t.media.calls, t.meter.Unsaved(), t.spoken),
		Settle:   t.meter.TakeSettles(),
		Files:    slices.Concat(t.media.files, botFiles(t.resp.sent(), t.voice)),
	}
	if strings.TrimSpace(partial) != "" {
		// The shown text may start with the reasoning in a <think> block; history keeps it apart
		// from the content, as on a completed answer, so it never goes back to the model as text.
		pm := chat.Message{Role: chat.RoleAssistant, Content: res.Partial.Content, Reasoning: res.Partial.Reasoning}
		if pm.Content == "" && pm.Reasoning == "" {
			pm.Content = partial
		}
		end.Messages = append(end.Messages, pm)
	}
	if obs := t.parts.opts.Observer; obs != nil {
		fin := TurnFinish{TurnID: end.TurnID, Status: end.Status, Model: end.Model, Rounds: end.Rounds,
			TokensIn: end.TokensIn, TokensOut: end.TokensOut, Error: end.Error, Answer: lastAnswer(end.Messages)}
		obs.TurnFinished(t.ctx, &fin, time.Since(t.begun))
		end.TraceID, end.Deliveries = fin.TraceID, fin.Deliveries
	}
	if !saved {
		t.log.Error("pipeline: turn not saved: its start could not be written", "status", status)
		return
	}
	if err := t.saving("end", func(ctx context.Context) error { return t.parts.store.Turns.FinishTurn(ctx, end) }); err != nil {
		t.log.Error("pipeline: turn not saved", "status", status, "err", err)
		// The calls' ends went with the refused write; each is tried on its own, so none keeps
		// its reservation.
		if len(end.Settle) > 0 {
			sctx, cancel := store.Bound(t.ctx, store.WriteAttempt)
			t.meter.WriteSettles(sctx, end.Settle)
			cancel()
		}
		return
	}
	attrs := []any{"status", status, "rounds", end.Rounds, "model", end.Model, "duration", time.Since(t.begun).Round(time.Millisecond)}
	if errText != "" {
		attrs = append(attrs, "err", errText)
	}
	if e.failure != "" {
		attrs = append(attrs, "failure", e.failure)
	}
	t.log.Info("pipeline: turn done", attrs...)
}

// LengthCutNote is appended, as a paragraph of its own, to an answer the model's length limit
// cut short (finish_reason "length"): the answer is delivered and the turn stays ok.
const LengthCutNote = "[answer cut: the model reached its length limit]"

// joinErr appends more to an error text.
func joinErr(text, more string) string {
	if text == "" {
		return more
	}
	return text + "; " + more
}

// outcome maps how the agent's run ended to how the turn ended (its status, the error saved
// with it, why the model did not answer) and the note the user sees after the partial answer.
func (t *turn) outcome(res *agent.Result) (ending, string) {
	p, ctx := t.parts, t.ctx
	if res.Status == chat.StatusOK {
		return ending{status: store.TurnOK}, ""
	}
	cause := context.Cause(ctx)
	if ctx.Err() != nil || res.Status == chat.StatusCancelled {
		switch {
		case errors.Is(cause, ErrStopped):
			return ending{status: store.TurnCancelled, errText: cause.Error()}, p.opts.Texts.Stopped
		case errors.Is(cause, ErrInterrupted), errors.Is(cause, ErrShutdown):
			return ending{status: store.TurnInterrupted, errText: cause.Error()}, p.opts.Texts.Stopped
		case errors.Is(cause, errTurnTimeout):
			err := fmt.Errorf("%w (limit %s)", errTurnTimeout, p.opts.Queue.TurnTimeout)
			return t.failed(err, chat.FailureUnavailable)
		}
		if cause == nil {
			cause = res.Err
		}
		if cause == nil {
			cause = context.Canceled
		}
		return ending{status: store.TurnCancelled, errText: cause.Error()}, p.opts.Texts.Stopped
	}
	err := res.Err
	if err == nil {
		err = fmt.Errorf("the model run ended with status %q", res.Status)
	}
	return t.failed(err, failureOf(err))
}

// failed is the ending of a turn the model did not answer, and the line its user is told.
func (t *turn) failed(err error, f chat.Failure) (ending, string) {
	return ending{status: store.TurnError, errText: err.Error(), failure: f}, t.parts.opts.failureNote(f, err)
}

// partialText returns the text of the round a failed or cancelled turn was in the middle of, or
// "" when there is none or that round's message is already among the turn's messages (a turn
// cancelled while its tools ran). roundShown is the text shown of the latest round that ended with
// tool calls; it differs from that round's stored content when reasoning is shown.
func partialText(res *agent.Result, roundShown string) string {
	if res.Status == chat.StatusOK || res.PartialText == "" {
		return ""
	}
	if roundShown != "" && res.PartialText == roundShown && len(res.Messages) > 0 &&
		res.Messages[len(res.Messages)-1].Role == chat.RoleTool {
		return ""
	}
	for i := len(res.Messages) - 1; i >= 0; i-- {
		m := res.Messages[i]
		if m.Role == chat.RoleTool {
			continue
		}
		if m.Role == chat.RoleAssistant && m.Content == res.PartialText {
			return ""
		}
		break
	}
	return res.PartialText
}

// allowedTools returns the tool filter of a message's chat: the per-chat list of the most
// specific of its rule chats that has one (a thread's or topic's own, else its chat's, else a
// Discord thread's parent channel's), else the global list, else nil (all tools).
func (p *turnParts) allowedTools(in adapters.Inbound) func(string) bool {
	var list []string
	ok := false
	for _, c := range in.RuleChats() {
		if list, ok = p.opts.Tools.PerChat[c.String()]; ok {
			break
		}
	}
	if !ok {
		if len(p.opts.Tools.Allow) == 0 {
			return nil
		}
		list = p.opts.Tools.Allow
	}
	set := make(map[string]bool, len(list))
	for _, n := range list {
		set[n] = true
	}
	return func(name string) bool { return set[name] }
}

// modelOf returns the model that answered: the last successful call's, else the last tried.
func modelOf(calls []chat.ModelCall) string {
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Status == chat.StatusOK {
			return calls[i].Model
		}
	}
	if len(calls) > 0 {
		return calls[len(calls)-1].Model
	}
	return ""
}

// roundsOf returns the number of model rounds of a turn.
func roundsOf(calls []chat.ModelCall) int {
	n := 0
	for _, c := range calls {
		n = max(n, c.Round)
	}
	return n
}

// lastAnswer is the text of the last assistant message of msgs; empty when none has text.
func lastAnswer(msgs []chat.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == chat.RoleAssistant && msgs[i].Content != "" {
			return msgs[i].Content
		}
	}
	return ""
}

// namedToolMessages names each tool message of a turn after the tool that answered it, as the
// history keeps them (the model is not sent the name: it knows its calls by id).
func namedToolMessages(ms []chat.Message) []chat.Message {
	names := map[string]string{} // tool call id → tool name
	for i, m := range ms {
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Name
		}
		if m.Role == chat.RoleTool && m.Name == "" {
			ms[i].Name = names[m.ToolCallID]
		}
	}
	return ms
}
