package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"relaybot/audit"
	"relaybot/chat"
	"relaybot/provider"
	"relaybot/tools"
)

// Defaults of Options.
const (
	DefaultMaxToolRounds = 128
	DefaultFlushChunks   = 8
)

// errNoFinish is the error of a stream that ended without a finish_reason (go-openai reports it
// as a plain io.EOF, which must not pass for success).
var errNoFinish = errors.New("stream ended without a finish_reason")

// errContentFilter is the error of an answer the provider's content filter ended
// (finish_reason "content_filter"): the answer is withheld or cut, which must not pass for success.
var errContentFilter = errors.New("the provider's content filter stopped the answer (finish_reason content_filter)")

// errCutByLength is why a tool call whose arguments the model's length limit cut off is not run.
var errCutByLength = errors.New("arguments cut off by the length limit")

// Runner runs turns against an ordered list of candidate models. It is safe for concurrent use;
// each Run is independent.
type Runner struct {
	models []candidate
	opts   Options
	log    *slog.Logger
}

type candidate struct {
	Model
	index  int
	client *openai.Client
}

// NewRunner checks the models and options and returns a Runner. The first model is the primary;
// the others are fallbacks in order.
func NewRunner(models []Model, opts Options) (*Runner, error) {
	if len(models) == 0 {
		return nil, errors.New("agent: no models: at least one candidate is required")
	}
	switch {
	case opts.MaxToolRounds < 0:
		return nil, fmt.Errorf("agent: MaxToolRounds must not be negative, got %d", opts.MaxToolRounds)
	case opts.MaxToolRounds == 0:
		opts.MaxToolRounds = DefaultMaxToolRounds
	}
	switch {
	case opts.FlushChunks < 0:
		return nil, fmt.Errorf("agent: FlushChunks must not be negative, got %d", opts.FlushChunks)
	case opts.FlushChunks == 0:
		opts.FlushChunks = DefaultFlushChunks
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	// The runner's copy of the client speaks through wireTransport, which decodes the provider
	// shapes go-openai cannot and carries their extra fields both ways.
	hc := *opts.HTTPClient
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &wireTransport{base: base}
	r := &Runner{opts: opts, log: opts.Logger}
	for i, m := range models {
		if m.Name == "" {
			m.Name = m.Model
		}
		switch {
		case m.BaseURL == "":
			return nil, fmt.Errorf("agent: model %d (%s): empty BaseURL", i, m.Name)
		case m.Model == "":
			return nil, fmt.Errorf("agent: model %d (%s): empty Model id", i, m.Name)
		case m.Timeout < 0:
			return nil, fmt.Errorf("agent: model %d (%s): negative Timeout %s", i, m.Name, m.Timeout)
		}
		r.models = append(r.models, candidate{Model: m, index: i, client: m.Client(&hc)})
	}
	return r, nil
}

// Run runs one turn: model call, tool round, model call, … until the model answers without tool
// calls, the round cap is reached (then one last call with tool_choice "none"), an error ends the turn or
// ctx is cancelled. It always returns a Result; Result.Status says how the turn ended.
//
// Events go to emit, in order, from the goroutine that called Run; nil drops them. The runner waits
// for emit to return before it reads on, so the consumer decides how long a slow display may hold
// the model's stream back: a consumer that must never slow the model hands the event off and
// returns at once (Chunk texts are full texts, so it may keep just the latest one), but must not
// drop Final chunks, ToolStart, ToolResult or RoundCapHit.
//
// Cancelling ctx stops the stream and a running tool at once (the runner stops waiting for the
// executor, which gets the cancelled context); the turn ends cancelled with the text shown so far
// in PartialText, and every tool call in Result.Messages has its tool message.
func (r *Runner) Run(ctx context.Context, req Request, emit func(Event)) *Result {
	if emit == nil {
		emit = func(Event) {}
	}
	t := &turn{
		r:         r,
		req:       req,
		emit:      emit,
		res:       &Result{},
		committed: -1,
		history:   append([]chat.Message(nil), req.Messages...),
		specs:     toolSpecs(req.Tools),
	}
	t.run(ctx)
	return t.res
}

// ordered returns the candidates with the one named first (Request.Model).
func (r *Runner) ordered(first string) []candidate {
	if first == "" {
		return r.models
	}
	for i, c := range r.models {
		if c.Name == first {
			out := make([]candidate, 0, len(r.models))
			out = append(out, c)
			out = append(out, r.models[:i]...)
			return append(out, r.models[i+1:]...)
		}
	}
	return r.models
}

// toolMode is how a model call offers the turn's tools.
type toolMode int

const (
	// toolsOffered sends the tools; the model may call them.
	toolsOffered toolMode = iota
	// toolsListedNotCallable sends the tools with tool_choice "none" (the round-cap call):
	// Anthropic- and Bedrock-style gateways reject a history holding tool calls when the request
	// declares no tools, so the tools stay listed while the model is told not to call them.
	toolsListedNotCallable
	// toolsOmitted sends no tools (the turn has none).
	toolsOmitted
)

// turn is the state of one Run.
type turn struct {
	r         *Runner
	req       Request
	emit      func(Event)
	res       *Result
	committed int // candidate index fixed by the first chunk; -1 before
	history   []chat.Message
	specs     []openai.Tool
	shown     string       // text shown of the latest round
	acc       *accumulator // the latest round's answer, for Result.Partial
	cutID     string       // id of the latest round's tool call cut by the length limit
}

func (t *turn) run(ctx context.Context) {
	maxRounds := t.r.opts.MaxToolRounds
	for round := 1; ; round++ {
		mode := toolsOffered
		switch {
		case len(t.specs) == 0:
			mode = toolsOmitted
		case t.req.ToolsListedOnly:
			mode = toolsListedNotCallable
		}
		if round > maxRounds && mode == toolsOffered {
			mode = toolsListedNotCallable
			t.res.RoundCapHit = true
			t.r.log.Warn("agent: tool round cap reached; asking for a final answer with tool_choice none",
				slog.Int("max_tool_rounds", maxRounds), slog.Int("round", round))
			t.emit(RoundCapHit{Round: round, MaxToolRounds: maxRounds})
		}
		msg, err := t.callModel(ctx, round, mode)
		if err != nil {
			t.fail(ctx, err)
			return
		}
		t.add(msg)
		if len(msg.ToolCalls) == 0 {
			t.res.Status = chat.StatusOK
			t.res.Truncated = t.acc != nil && t.acc.finish == openai.FinishReasonLength
			return
		}
		if err := t.runTools(ctx, round, msg.ToolCalls); err != nil {
			t.fail(ctx, err)
			return
		}
	}
}

func (t *turn) add(m chat.Message) {
	t.history = append(t.history, m)
	t.res.Messages = append(t.res.Messages, m)
}

func (t *turn) fail(ctx context.Context, err error) {
	t.res.Err = err
	t.res.Status = chat.StatusError
	if ctx.Err() != nil {
		t.res.Status = chat.StatusCancelled
	}
	t.res.PartialText = t.shown
	if t.shown != "" && t.acc != nil {
		m := t.acc.message()
		m.ToolCalls = nil
		t.res.Partial = m
	}
}

// callModel makes one round's model call: over all candidates in order until one answers (before
// the turn's model is fixed), or only the fixed model afterwards.
//
// A candidate that fails before its first chunk is left for the next only when the failure may
// pass (provider.ErrorKind.Transient, or an unclassified failure such as a stream cut before its first
// chunk): an auth error or a bad request fails the turn at once, since a fallback would hide a
// misconfiguration, and a context-length refusal is returned as ErrContextTooLong for the caller
// to shorten the history.
func (t *turn) callModel(ctx context.Context, round int, mode toolMode) (chat.Message, error) {
	cands := t.r.ordered(t.req.Model)
	if t.committed >= 0 {
		cands = t.r.models[t.committed : t.committed+1]
	}
	var (
		reason  string
		lastErr error
	)
	for _, c := range cands {
		msg, started, err := t.attempt(ctx, c, round, mode, reason)
		if err == nil {
			t.committed = c.index
			return msg, nil
		}
		if r, ok := errors.AsType[*refusedError](err); ok {
			return chat.Message{}, r.err
		}
		kind := provider.ErrorKindOf(err)
		if !started && ctx.Err() == nil && !movesOn(kind) {
			return chat.Message{}, &ModelError{Kind: kind, Err: err}
		}
		if started || t.committed >= 0 || ctx.Err() != nil {
			if started {
				t.committed = c.index
			}
			return chat.Message{}, err
		}
		lastErr = err
		reason = err.Error()
		if c.index != cands[len(cands)-1].index {
			t.r.log.Warn("agent: model candidate failed before its first chunk; trying the next",
				slog.String("model", c.Name), slog.Int("candidate", c.index), slog.Int("round", round),
				slog.String("error", reason))
		}
	}
	if len(cands) > 1 {
		return chat.Message{}, fmt.Errorf("all %d model candidates failed, the last with: %w", len(cands), lastErr)
	}
	return chat.Message{}, lastErr
}

// attempt calls one candidate. started reports that the stream delivered its first chunk (the
// model is then fixed for the turn); errors before that allow a fallback.
func (t *turn) attempt(ctx context.Context, c candidate, round int, mode toolMode, reason string) (msg chat.Message, started bool, err error) {
	mc := t.newModelCall(c, round, mode, reason)
	end, err := t.meterStart(ctx, mc.rec, mc.prompt)
	if err != nil {
		return chat.Message{}, false, err
	}
	callCtx, cancel := context.WithCancelCause(withWireCall(ctx, mc.wc))
	defer cancel(nil)
	if c.Timeout > 0 {
		mc.deadline = startDataDeadline(c.Timeout, func() {
			cancel(fmt.Errorf("%w within %s", provider.ErrNoData, c.Timeout))
		})
		defer mc.deadline.stop()
	}
	defer func() { mc.finish(ctx, err, end) }()
	mc.acc = newAccumulator(round, t.r.opts.FlushChunks, t.r.opts.RemoveThink)
	t.acc = mc.acc
	if !t.req.Stream {
		msg, err = mc.whole(ctx, callCtx)
	} else {
		msg, err = mc.stream(ctx, callCtx)
	}
	return msg, mc.started, err
}

// modelCall is one attempt's state: its candidate and request, and what the answer gave so far.
// It lives on the heap, so the turn's goroutine, which reads the whole stream under it, keeps a
// small frame for it.
type modelCall struct {
	t          *turn
	c          candidate
	round      int
	offerTools bool
	creq       openai.ChatCompletionRequest
	wc         *wireCall
	rec        chat.ModelCall
	prompt     int
	start      time.Time
	deadline   *dataDeadline // the candidate's Timeout without data; nil without one
	acc        *accumulator
	started    bool // the first chunk arrived
	reported   bool // the provider reported the call's usage
}

// newModelCall builds the request of a call to candidate c and the record of the call.
func (t *turn) newModelCall(c candidate, round int, mode toolMode, reason string) *modelCall {
	upstream, extras := toUpstream(t.history, c.SupportsVision)
	mc := &modelCall{t: t, c: c, round: round, offerTools: mode == toolsOffered && c.SupportsTools,
		creq: openai.ChatCompletionRequest{Model: c.Model.Model, Messages: upstream}, wc: &wireCall{send: extras}}
	if c.CacheBreakpoints {
		mc.wc.breakpoints = breakpoints(upstream, t.history)
	}
	if c.SupportsTools {
		switch mode {
		case toolsOffered:
			mc.creq.Tools = t.specs
		case toolsListedNotCallable:
			mc.creq.Tools = t.specs
			mc.creq.ToolChoice = "none"
		}
	}
	t.shown = ""
	t.cutID = ""
	mc.start = time.Now()
	mc.rec = chat.ModelCall{Model: c.Name, RequestModel: c.Model.Model, Candidate: c.index, Round: round, FallbackReason: reason, StartedAt: mc.start}
	var sent []tools.Spec
	if c.SupportsTools && mode != toolsOmitted {
		sent = t.req.Tools
	}
	mc.prompt = t.estimatePrompt(c, sent)
	return mc
}

// wrapErr names the model and prefers our own timeout over the context error it caused.
func (mc *modelCall) wrapErr(ctx, callCtx context.Context, err error) error {
	if ctx.Err() == nil {
		if cause := context.Cause(callCtx); cause != nil && callCtx.Err() != nil {
			err = cause
		}
	}
	return fmt.Errorf("model %s (candidate %d): %w", mc.c.Name, mc.c.index, err)
}

// finish records how the call ended (err) and settles it with the meter (end).
func (mc *modelCall) finish(ctx context.Context, err error, end func(chat.ModelCall)) {
	t, rec := mc.t, &mc.rec
	rec.Duration = time.Since(mc.start)
	rec.FinishReason = string(t.acc.finish)
	rec.Status = chat.StatusOK
	if err != nil {
		rec.Err = err
		rec.Status = chat.StatusError
		if ctx.Err() != nil {
			rec.Status = chat.StatusCancelled
		}
	}
	t.estimateUsage(rec, mc.c, mc.prompt, mc.reported, mc.started, t.acc)
	t.res.Usage.TokensIn += rec.TokensIn
	t.res.Usage.TokensOut += rec.TokensOut
	t.res.LLMCalls = append(t.res.LLMCalls, *rec)
	if t.r.opts.Observer != nil {
		t.r.opts.Observer.ModelCallFinished(ctx, *rec)
	}
	end(*rec)
}

// flush shows the answer so far.
func (mc *modelCall) flush() {
	acc := mc.acc
	ev := Chunk{Round: mc.round, Text: acc.text(), Final: acc.finish != ""}
	if ev.Final && mc.offerTools {
		ev.ToolCalls = acc.toolCalls()
	}
	mc.t.shown = ev.Text
	mc.t.emit(ev)
}

// message is the answer's message once it is complete.
func (mc *modelCall) message() chat.Message {
	m := mc.acc.message()
	mc.acc.attachExtras(&m, mc.wc.got, mc.wc.gotReasoningContent)
	if !mc.offerTools && len(m.ToolCalls) > 0 {
		mc.t.r.log.Warn("agent: model called tools that were not offered; ignoring the calls",
			slog.String("model", mc.c.Name), slog.Int("round", mc.round), slog.Int("calls", len(m.ToolCalls)))
		m.ToolCalls = nil
	}
	if len(m.ToolCalls) > 0 {
		mc.t.cutID = mc.acc.cutCall()
	}
	return m
}

// whole asks for the answer in one piece.
func (mc *modelCall) whole(ctx, callCtx context.Context) (chat.Message, error) {
	resp, err := mc.c.client.CreateChatCompletion(callCtx, mc.creq)
	mc.rec.TimeToFirstToken = time.Since(mc.start)
	if err != nil {
		return chat.Message{}, mc.wrapErr(ctx, callCtx, err)
	}
	if len(resp.Choices) == 0 {
		return chat.Message{}, mc.wrapErr(ctx, callCtx, errors.New("response has no choices"))
	}
	mc.started = true
	setUsage(&mc.rec, &resp.Usage, mc.wc.cache)
	mc.rec.ResponseModel = resp.Model
	mc.reported = resp.Usage.PromptTokens > 0 || resp.Usage.CompletionTokens > 0
	mc.acc.add(wholeChoice(&resp.Choices[0]))
	mc.flush()
	if mc.acc.finish == openai.FinishReasonContentFilter {
		return chat.Message{}, mc.wrapErr(ctx, callCtx, errContentFilter)
	}
	return mc.message(), nil
}

// stream reads the answer as it streams.
func (mc *modelCall) stream(ctx, callCtx context.Context) (chat.Message, error) {
	mc.creq.Stream = true
	mc.creq.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	stream, err := mc.c.client.CreateChatCompletionStream(callCtx, mc.creq)
	if err != nil {
		return chat.Message{}, mc.wrapErr(ctx, callCtx, err)
	}
	defer stream.Close()
	recv := func(resp *openai.ChatCompletionStreamResponse) (err error) {
		*resp, err = stream.Recv()
		return err
	}
	if mc.wc.stream != nil {
		// The answer's chunks are read from the transport's normaliser, without go-openai's
		// copies (stream.Recv stays for a body that is not an event stream).
		recv = mc.wc.stream.next
	}
	// One response for the whole stream, not one on the heap per chunk; what it holds is valid
	// until the next recv (next reuses the choices), and chunk keeps none of it.
	resp := new(openai.ChatCompletionStreamResponse)
	for {
		*resp = openai.ChatCompletionStreamResponse{}
		err := recv(resp)
		if err != nil {
			if mc.acc.finish != "" {
				break // the answer is complete; a missing [DONE] or usage chunk does not spoil it
			}
			if errors.Is(err, io.EOF) {
				err = errNoFinish
			}
			if mc.started {
				mc.t.shown = mc.acc.text()
			}
			return chat.Message{}, mc.wrapErr(ctx, callCtx, err)
		}
		mc.chunk(resp)
	}
	if mc.acc.finish == openai.FinishReasonContentFilter {
		return chat.Message{}, mc.wrapErr(ctx, callCtx, errContentFilter)
	}
	return mc.message(), nil
}

// chunk takes one streamed chunk.
func (mc *modelCall) chunk(resp *openai.ChatCompletionStreamResponse) {
	if !mc.started {
		mc.started = true
		mc.rec.TimeToFirstToken = time.Since(mc.start)
		mc.rec.ResponseModel = resp.Model
	}
	if mc.deadline != nil {
		mc.deadline.touch()
	}
	if resp.Usage != nil {
		setUsage(&mc.rec, resp.Usage, mc.wc.cache)
		mc.reported = true
	}
	mc.wc.cache = cacheReport{} // what one chunk's usage said is not the next one's
	for i := range resp.Choices {
		if resp.Choices[i].Index == 0 && mc.acc.add(&resp.Choices[i]) {
			mc.flush()
		}
	}
}

// wholeChoice turns a non-streamed answer into one final stream choice, so both paths share the
// accumulator's handling of think blocks, ids and arguments.
func wholeChoice(ch *openai.ChatCompletionChoice) *openai.ChatCompletionStreamChoice {
	calls := make([]openai.ToolCall, len(ch.Message.ToolCalls))
	for i, tc := range ch.Message.ToolCalls {
		calls[i] = tc
		calls[i].Index = &i
	}
	finish := ch.FinishReason
	if finish == "" {
		finish = openai.FinishReasonStop
	}
	return &openai.ChatCompletionStreamChoice{
		Delta: openai.ChatCompletionStreamChoiceDelta{
			Role:             ch.Message.Role,
			Content:          ch.Message.Content,
			ReasoningContent: ch.Message.ReasoningContent,
			ToolCalls:        calls,
		},
		FinishReason: finish,
	}
}

// runTools runs a round's calls in order (side by side when the executor says the round may:
// runParallel) and appends their tool messages. On cancellation the
// calls that did not run are handed to the executor's Skip, which answers them (so the transcript
// stays valid) and records them for the audit log.
//
// A call whose arguments the length limit cut off (finish_reason "length" in the middle of them)
// is not run: the executor never sees half-formed arguments. It is skipped with errCutByLength and
// the turn goes on, so the model can retry with a shorter call or answer.
// No ToolStart or ToolResult is emitted for a skipped call (it did not run).
func (t *turn) runTools(ctx context.Context, round int, calls []chat.ToolCall) error {
	var shown toolImages
	if t.parallel(round, calls) {
		t.runParallel(ctx, round, calls, &shown)
		t.showImages(ctx, shown)
		return ctx.Err()
	}
	for i, call := range calls {
		if ctx.Err() != nil {
			t.skipTools(ctx, round, calls[i:])
			return ctx.Err()
		}
		if t.cutID != "" && call.ID == t.cutID {
			t.r.log.Warn("agent: tool call cut off by the length limit; not running it",
				slog.String("tool", call.Name), slog.String("tool_call_id", call.ID), slog.Int("round", round))
			out := t.skip(ctx, round, call, errCutByLength)
			t.add(chat.Message{Role: chat.RoleTool, Content: out.Content, ToolCallID: call.ID})
			continue
		}
		t.emit(ToolStart{Round: round, Call: call})
		out, done := t.execute(ctx, round, call)
		if out.Content == "" && out.Err != nil {
			out.Content = tools.ErrorText(out.Err)
		}
		t.add(chat.Message{Role: chat.RoleTool, Content: out.Content, ToolCallID: call.ID})
		t.emit(ToolResult{Round: round, Call: call, Outcome: out})
		if !done {
			t.skipTools(ctx, round, calls[i+1:])
			return ctx.Err()
		}
		shown.add(call.Name, out.Files)
	}
	t.showImages(ctx, shown)
	return ctx.Err()
}

// showImages lets a vision model see the images the round's tools made.
func (t *turn) showImages(ctx context.Context, shown toolImages) {
	if ctx.Err() == nil && t.committed >= 0 && t.r.models[t.committed].SupportsVision {
		if m, ok := shown.message(); ok {
			// For the rest of this turn only: the images' bytes are not kept in history.
			t.history = append(t.history, m)
		}
	}
}

// parallel reports whether the round's calls run side by side: the executor can (a
// ParallelExecutor) and says so for these calls, and none was cut by the length limit.
func (t *turn) parallel(round int, calls []chat.ToolCall) bool {
	px, ok := t.req.Executor.(ParallelExecutor)
	if !ok || len(calls) < 2 || hasCall(t.cutID, calls) {
		return false
	}
	return px.Parallel(toolsCalls(round, calls))
}

func hasCall(id string, calls []chat.ToolCall) bool {
	for _, c := range calls {
		if id != "" && c.ID == id {
			return true
		}
	}
	return false
}

func toolsCalls(round int, calls []chat.ToolCall) []tools.Call {
	out := make([]tools.Call, len(calls))
	for i, c := range calls {
		out[i] = tools.Call{ToolCall: c, Round: round}
	}
	return out
}

// runParallel runs a round's calls side by side through the executor: every call's ToolStart
// first, then each ToolResult as its call ends; the tool messages go into the history in the
// model's order. When ctx ends the runner stops waiting at once, as for one call: the calls not
// ended yet are answered cancelled (the executor still ends and records them).
func (t *turn) runParallel(ctx context.Context, round int, calls []chat.ToolCall, shown *toolImages) {
	px := t.req.Executor.(ParallelExecutor)
	for _, call := range calls {
		t.emit(ToolStart{Round: round, Call: call})
	}
	type ended struct {
		i   int
		out tools.Outcome
	}
	ch := make(chan ended, len(calls))
	go func() {
		defer func() {
			if p := recover(); p != nil {
				for i, c := range calls {
					ch <- ended{i, tools.Panicked(c.Name, p)}
				}
			}
		}()
		px.RunParallel(ctx, toolsCalls(round, calls), func(i int, out tools.Outcome) { ch <- ended{i, out} })
	}()
	outs := make([]*tools.Outcome, len(calls))
	for n := 0; n < len(calls); {
		select {
		case e := <-ch:
			if outs[e.i] != nil {
				continue
			}
			n++
			if e.out.Content == "" && e.out.Err != nil {
				e.out.Content = tools.ErrorText(e.out.Err)
			}
			outs[e.i] = &e.out
			t.emit(ToolResult{Round: round, Call: calls[e.i], Outcome: e.out})
		case <-ctx.Done():
			for i, o := range outs {
				if o == nil {
					out := tools.Failed(audit.StatusCancelled, fmt.Errorf("cancelled: %w", ctx.Err()))
					outs[i] = &out
					t.emit(ToolResult{Round: round, Call: calls[i], Outcome: out})
				}
			}
			n = len(calls)
		}
	}
	for i, call := range calls {
		t.add(chat.Message{Role: chat.RoleTool, Content: outs[i].Content, ToolCallID: call.ID})
		shown.add(call.Name, outs[i].Files)
	}
}

// skipTools answers the calls a cancelled turn never ran.
func (t *turn) skipTools(ctx context.Context, round int, calls []chat.ToolCall) {
	reason := fmt.Errorf("not run: %w", context.Cause(ctx))
	for _, call := range calls {
		out := t.skip(ctx, round, call, reason)
		t.add(chat.Message{Role: chat.RoleTool, Content: out.Content, ToolCallID: call.ID})
	}
}

// skip hands a call that will not run to the executor's Skip (which records it), or answers it
// without one.
func (t *turn) skip(ctx context.Context, round int, call chat.ToolCall, reason error) tools.Outcome {
	if t.req.Executor == nil {
		return tools.NotRun(reason)
	}
	return t.req.Executor.Skip(ctx, tools.Call{ToolCall: call, Round: round}, reason)
}

// execute runs one call and waits for it or for ctx. done is false when ctx ended first; the
// executor then still holds the cancelled context and is expected to return soon.
func (t *turn) execute(ctx context.Context, round int, call chat.ToolCall) (out tools.Outcome, done bool) {
	if t.req.Executor == nil {
		return tools.Failed(audit.StatusNotFound, tools.NotFoundError{Name: call.Name}), true
	}
	tc := tools.Call{ToolCall: call, Round: round}
	ch := make(chan tools.Outcome, 1)
	go func() {
		// tools.Manager recovers its tools' panics itself (and finishes their audit rows); this
		// keeps any other executor's panic from taking the bot down.
		defer func() {
			if p := recover(); p != nil {
				ch <- tools.Panicked(call.Name, p)
			}
		}()
		ch <- t.req.Executor.Execute(ctx, tc)
	}()
	select {
	case out := <-ch:
		return out, true
	case <-ctx.Done():
		return tools.Failed(audit.StatusCancelled, fmt.Errorf("cancelled: %w", ctx.Err())), false
	}
}
