package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"relaybot/adapters"
	"relaybot/agent"
	"relaybot/chat"
	"relaybot/store"
	"relaybot/tools"
)

// errTurnTimeout is the cause of a turn that ran past TurnTimeout.
var errTurnTimeout = errors.New("the answer took too long")

// runTurn runs one turn of a conversation: it saves the user's message, runs the agent with the
// history, shows the answer as it grows, delivers the final text, and saves the turn.
func (p *Pipeline) runTurn(ctx context.Context, key chat.Key, in adapters.Inbound, out adapters.Responder, log *slog.Logger) {
	begun := time.Now()
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, p.opts.TurnTimeout, errTurnTimeout)
	defer cancelTimeout()
	if text, over := p.overQuota(ctx, in, nil, log); over {
		log.Info("pipeline: turn refused: over quota", "message", in.MessageID)
		p.notice(out, text, log)
		return
	}

	// Voice and files become the message's text first: the store keeps the text.
	read := p.readAttachments(ctx, in, out, log)
	in = read.in
	if in.Command == "" && strings.TrimSpace(in.Text) == "" && len(in.Images) == 0 {
		return // nothing readable came; the user was told why
	}

	// The user's message is saved even when the turn is cancelled right away.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	th, in, turnID, err := p.startTurn(sctx, key, in)
	scancel()
	if errors.Is(err, store.ErrNothingToRetry) {
		p.notice(out, "There is no earlier message to answer again.", log)
		return
	}
	if err != nil {
		log.Error("pipeline: turn not started", "conversation", key.String(), "err", err)
		if text := p.failureText(err); text != "" {
			p.notice(out, text, log)
		}
		return
	}
	conv := th.conv
	log = log.With("conversation_id", conv.ID, "turn", turnID)

	info := tools.TurnInfo{
		TurnID:         turnID,
		ConversationID: conv.ID,
		Platform:       string(in.Chat.Platform),
		ChatID:         in.Chat.ChatID,
		UserID:         in.UserID,
		Admin:          p.access.isAdmin(in),
		Private:        in.Kind == adapters.Private,
		Roles:          in.Roles,
		ChatAdmin:      in.ChatAdmin,
	}
	stream := out.SupportsStreaming()
	req := agent.Request{Stream: stream, Model: conv.Model, BeforeCall: p.quotaCheck(in, log)}
	if p.tools != nil {
		tt := p.tools.ForTurn(info, p.allowedTools(in.Chat))
		req.Tools = tt.Specs()
		req.Executor = tt
	}
	shared := key.UserID == ""
	req.Messages = p.transcriptFor(ctx, th, in, req.Tools, shared, false, log)
	if th.compacted {
		p.notice(out, CompactedNotice, log)
	}

	// The reply outlives the turn's context: a cancelled turn still delivers its partial answer.
	replyCtx, cancelReply := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelReply()
	reply := out.NewReply(replyCtx)
	reply.Working(true)
	if tt, ok := req.Executor.(*tools.Turn); ok {
		p.setApprover(tt, in, out, reply)
	}

	var (
		mu    sync.Mutex
		v     = &view{track: p.opts.TrackFunctionCalls, s: newSurface(in.Chat.Platform, p.opts.Reasoning)}
		files []chat.File
		// roundShown is the text shown of the latest round that ended with tool calls: that
		// round's message is among the turn's messages already.
		roundShown string
		// roundsDone is closed once the latest round message is delivered (non-streaming).
		roundsDone chan struct{}
	)
	// Without streaming, each round's text goes out as a message of its own when the round
	// ends (as LangBot does), in order and without holding up the model, instead of the user
	// waiting for the whole turn.
	sendRound := func(text string) {
		prev, done := roundsDone, make(chan struct{})
		roundsDone = done
		rr := out.NewReply(replyCtx)
		go func() {
			defer close(done)
			if prev != nil {
				<-prev
			}
			dctx, dcancel := p.deliveryContext()
			defer dcancel()
			if err := rr.Finish(dctx, text, nil); err != nil {
				log.Error("pipeline: a round's text not delivered", "err", err)
			}
		}()
	}
	emit := func(e agent.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e := e.(type) {
		case agent.Chunk:
			v.setText(e.Text)
			if e.Final && len(e.ToolCalls) > 0 {
				roundShown = e.Text
				v.endRound()
				if !stream {
					if t := v.sendBlocks(); strings.TrimSpace(t) != "" {
						sendRound(t)
					}
				}
				reply.Working(true)
			} else if strings.TrimSpace(e.Text) != "" {
				reply.Working(false)
			}
		case agent.ToolStart:
			v.startTool(e.Call.ID, e.Call.Name)
			reply.Working(true)
		case agent.ToolResult:
			v.finishTool(e.Call.ID, e.Call.Name, e.Outcome)
			files = append(files, e.Outcome.Files...)
		case agent.RoundCapHit:
			v.note(fmt.Sprintf("(Reached the limit of %d tool rounds; answering without more tools.)", e.MaxToolRounds))
		default:
			return
		}
		if stream {
			reply.Update(v.render())
		}
	}
	calls := append(append([]agent.LLMCall(nil), read.calls...), th.calls...) // transcription and compaction first, as they happened
	res := p.runner.Run(ctx, req, emit)
	p.usage.observeTurn(res.LLMCalls, th.estimate)
	calls = append(calls, res.LLMCalls...)
	if res.Status == agent.StatusError && errors.Is(res.Err, agent.ErrContextTooLong) && ctx.Err() == nil && len(th.rounds) > 0 {
		// The model counts more than the estimate: summarise every round and try once more.
		log.Warn("pipeline: the model refused the context as too long; compacting and retrying", "err", res.Err)
		first, n := res, len(th.calls)
		th.compacted = false
		req.Messages = p.transcriptFor(ctx, th, in, req.Tools, shared, true, log)
		calls = append(calls, th.calls[n:]...)
		if th.compacted {
			p.notice(out, CompactedNotice, log)
			res = p.runner.Run(ctx, req, emit)
			calls = append(calls, res.LLMCalls...)
			res.Usage.TokensIn += first.Usage.TokensIn
			res.Usage.TokensOut += first.Usage.TokensOut
		}
	}
	for _, c := range th.calls {
		res.Usage.TokensIn += c.TokensIn
		res.Usage.TokensOut += c.TokensOut
	}
	res.LLMCalls = calls

	mu.Lock()
	defer mu.Unlock()
	status, note, errText := p.outcome(ctx, res)
	if status == store.TurnOK && res.Truncated {
		note = LengthCutNote
	}
	partial := partialText(res, roundShown)
	if partial != "" {
		v.setText(partial)
	}
	text := v.withNote(note, status == store.TurnCancelled || status == store.TurnInterrupted)
	reply.Working(false)
	if roundsDone != nil {
		<-roundsDone // the rounds' messages come first
	}
	// The final answer waits for the platform (rate limits, a long queue of other finals) as
	// long as the pipeline runs; only the end of the shutdown's grace period bounds it.
	dctx, dcancel := p.deliveryContext()
	derr := reply.Finish(dctx, text, files)
	dcancel()
	var spokenCall []agent.LLMCall
	if derr == nil && status == store.TurnOK {
		if call, ok := p.speakAnswer(ctx, out, read.spoken, text, log); ok {
			spokenCall = append(spokenCall, call)
		}
	}
	if derr != nil {
		// The turn's record says the user did not get the answer, whatever the model did.
		log.Error("pipeline: answer not delivered", "status", status, "err", derr)
		if status == store.TurnOK {
			status = store.TurnError
		}
		errText = joinErr(errText, "delivery failed: "+derr.Error())
	}

	end := store.TurnEnd{
		TurnID:    turnID,
		Status:    status,
		Model:     modelOf(res.LLMCalls),
		Rounds:    roundsOf(res.LLMCalls),
		TokensIn:  res.Usage.TokensIn,
		TokensOut: res.Usage.TokensOut,
		Error:     errText,
		Messages:  toStoreMessages(res.Messages),
		LLMCalls:  toStoreLLMCalls(append(res.LLMCalls, spokenCall...)),
	}
	if strings.TrimSpace(partial) != "" {
		// The shown text may start with the reasoning in a <think> block; history keeps it apart
		// from the content, as on a completed answer, so it never goes back to the model as text.
		pm := store.Message{Role: store.RoleAssistant, Content: res.Partial.Content, Reasoning: res.Partial.ReasoningContent}
		if pm.Content == "" && pm.Reasoning == "" {
			pm.Content = partial
		}
		end.Messages = append(end.Messages, pm)
	}
	if p.opts.Observer != nil {
		p.opts.Observer.TurnFinished(status, time.Since(begun))
	}
	sctx, scancel = context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer scancel()
	if err := p.store.FinishTurn(sctx, end); err != nil {
		log.Error("pipeline: turn not saved", "status", status, "err", err)
		return
	}
	attrs := []any{"status", status, "rounds", end.Rounds, "model", end.Model, "duration", time.Since(begun).Round(time.Millisecond)}
	if errText != "" {
		attrs = append(attrs, "err", errText)
	}
	log.Info("pipeline: turn done", attrs...)
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

// startTurn finds the conversation (a fresh one after IdleReset of quiet), reads the rounds
// after its summary and saves the user's message. A /retry first takes the last turn out of
// history and answers its message again: the returned Inbound carries that message.
func (p *Pipeline) startTurn(ctx context.Context, key chat.Key, in adapters.Inbound) (*turnHistory, adapters.Inbound, int64, error) {
	conv, err := p.store.Conversation(ctx, key)
	if err != nil {
		return nil, in, 0, fmt.Errorf("conversation %s: %w", key, err)
	}
	th := &turnHistory{conv: conv}
	if in.Command == "retry" {
		m, err := p.store.RetryLastTurn(ctx, conv.ID)
		if err != nil {
			return nil, in, 0, err
		}
		in.Command, in.Args, in.Text, in.Images = "", "", m.Content, nil
		if m.Name != "" {
			in.UserName = m.Name
		}
	}
	if p.opts.HistoryRounds > 0 {
		th.rounds, err = p.store.Rounds(ctx, conv.ID, conv.SummaryTurnID, p.opts.HistoryRounds)
		if err != nil {
			return nil, in, 0, fmt.Errorf("history of conversation %d: %w", conv.ID, err)
		}
	}
	if p.idle(th) {
		if th.conv, err = p.store.ResetConversation(ctx, key); err != nil {
			return nil, in, 0, fmt.Errorf("idle reset of conversation %d: %w", conv.ID, err)
		}
		th.rounds = nil
	}
	turnID, err := p.store.StartTurn(ctx, store.TurnStart{
		ConversationID:   th.conv.ID,
		UserID:           in.UserID,
		UserName:         in.UserName,
		InboundMessageID: in.MessageID,
		UserMessage: store.Message{
			Role:    store.RoleUser,
			Content: in.Text,
			Name:    in.UserName,
			Images:  len(p.images(in)),
		},
	})
	if err != nil {
		return nil, in, 0, fmt.Errorf("start turn in conversation %d: %w", th.conv.ID, err)
	}
	return th, in, turnID, nil
}

// idle reports whether the conversation's last round is older than IdleReset.
func (p *Pipeline) idle(th *turnHistory) bool {
	if p.opts.IdleReset <= 0 || len(th.rounds) == 0 {
		return false
	}
	last := th.rounds[len(th.rounds)-1].StartedAt
	return p.opts.Now().Sub(last) > p.opts.IdleReset
}

// outcome maps how the agent's run ended to the turn's status, the note the user sees after the
// partial answer, and the error text saved with the turn.
func (p *Pipeline) outcome(ctx context.Context, res *agent.Result) (status, note, errText string) {
	if res.Status == agent.StatusOK {
		return store.TurnOK, "", ""
	}
	cause := context.Cause(ctx)
	if ctx.Err() != nil || res.Status == agent.StatusCancelled {
		switch {
		case errors.Is(cause, ErrStopped):
			return store.TurnCancelled, p.opts.StoppedMarker, cause.Error()
		case errors.Is(cause, ErrInterrupted), errors.Is(cause, ErrShutdown):
			return store.TurnInterrupted, p.opts.StoppedMarker, cause.Error()
		case errors.Is(cause, errTurnTimeout):
			err := fmt.Errorf("%w (limit %s)", errTurnTimeout, p.opts.TurnTimeout)
			return store.TurnError, p.failureText(err), err.Error()
		}
		if cause == nil {
			cause = res.Err
		}
		if cause == nil {
			cause = context.Canceled
		}
		return store.TurnCancelled, p.opts.StoppedMarker, cause.Error()
	}
	err := res.Err
	if err == nil {
		err = fmt.Errorf("the model run ended with status %q", res.Status)
	}
	if q, ok := errors.AsType[*quotaError](err); ok {
		return store.TurnError, q.text, err.Error()
	}
	return store.TurnError, p.failureText(err), err.Error()
}

// partialText returns the text of the round a failed or cancelled turn was in the middle of, or
// "" when there is none or that round's message is already among the turn's messages (a turn
// cancelled while its tools ran). roundShown is the text shown of the latest round that ended with
// tool calls; it differs from that round's stored content when reasoning is shown.
func partialText(res *agent.Result, roundShown string) string {
	if res.Status == agent.StatusOK || res.PartialText == "" {
		return ""
	}
	if roundShown != "" && res.PartialText == roundShown && len(res.Messages) > 0 &&
		res.Messages[len(res.Messages)-1].Role == agent.RoleTool {
		return ""
	}
	for i := len(res.Messages) - 1; i >= 0; i-- {
		m := res.Messages[i]
		if m.Role == agent.RoleTool {
			continue
		}
		if m.Role == agent.RoleAssistant && m.Content == res.PartialText {
			return ""
		}
		break
	}
	return res.PartialText
}

// images returns the user's images that fit MaxImageBytes.
func (p *Pipeline) images(in adapters.Inbound) []agent.Image {
	var out []agent.Image
	for _, im := range in.Images {
		if p.opts.MaxImageBytes > 0 && len(im.Data) > p.opts.MaxImageBytes {
			continue
		}
		out = append(out, agent.Image{MIME: im.MIME, Data: im.Data})
	}
	return out
}

// systemMessage is the system prompt of a conversation's turn: its own prompt (/system) or the
// configured one, the extra text, the date, and the summary of older rounds.
func (p *Pipeline) systemMessage(conv store.Conversation) agent.Message {
	prompt := p.opts.SystemPrompt
	if strings.TrimSpace(conv.SystemPrompt) != "" {
		prompt = conv.SystemPrompt
	}
	if p.opts.SystemPromptExtra != nil {
		if extra := strings.TrimSpace(p.opts.SystemPromptExtra()); extra != "" {
			prompt = strings.TrimSpace(prompt + "\n\n" + extra)
		}
	}
	now := p.opts.Now().UTC()
	prompt = strings.TrimSpace(prompt + "\n\n" + fmt.Sprintf("Current date: %s (%s), UTC.", now.Format("2006-01-02"), now.Weekday()))
	return agent.Message{Role: agent.RoleSystem, Content: withSummary(prompt, conv.Summary)}
}

// userMessage is the new message of a turn.
func (p *Pipeline) userMessage(in adapters.Inbound, shared bool) agent.Message {
	return agent.Message{
		Role:    agent.RoleUser,
		Content: speaker(shared, in.UserName, in.Text),
		Images:  p.images(in),
	}
}

// allowedTools returns the tool filter of a chat: its per-chat list, else the global list, else
// nil (all tools).
func (p *Pipeline) allowedTools(ref chat.Ref) func(string) bool {
	list, ok := p.opts.ToolsPerChat[ref.Chat().String()]
	if !ok {
		if len(p.opts.ToolAllow) == 0 {
			return nil
		}
		list = p.opts.ToolAllow
	}
	set := make(map[string]bool, len(list))
	for _, n := range list {
		set[n] = true
	}
	return func(name string) bool { return set[name] }
}

// modelOf returns the model that answered: the last successful call's, else the last tried.
func modelOf(calls []agent.LLMCall) string {
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Status == agent.StatusOK {
			return calls[i].Model
		}
	}
	if len(calls) > 0 {
		return calls[len(calls)-1].Model
	}
	return ""
}

// roundsOf returns the number of model rounds of a turn.
func roundsOf(calls []agent.LLMCall) int {
	n := 0
	for _, c := range calls {
		n = max(n, c.Round)
	}
	return n
}
