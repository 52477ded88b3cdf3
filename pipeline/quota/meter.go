package quota

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"relaybot/adapters"
	"relaybot/chat"
	"relaybot/store"
)

// CallLedger keeps model calls from the moment they start (*store.ModelCallQuery): StartLLMCall checks
// the quotas and reserves the call's tokens in one atomic step across replicas (an
// *store.OverQuotaError when one is used up), FinishLLMCall settles the call with what it cost.
// With it a turn's calls are saved as they happen, never with the turn's final write.
type CallLedger interface {
	StartLLMCall(ctx context.Context, c store.LLMCallStart) (int64, error)
	FinishLLMCall(ctx context.Context, id int64, c chat.ModelCall) error
}

// Meter is the agent.Meter of one turn (or /compact): before each model call it checks the
// quotas and reserves the call's prompt estimate and max_output_tokens, and when the call ends
// it settles it. Calls the ledger did not take (no ledger, or it failed) are kept for the
// turn's final write (unsaved). The runner uses a meter from one goroutine at a time.
type Meter struct {
	g      *Guard
	in     adapters.Inbound
	turnID int64
	ledger CallLedger
	log    *slog.Logger
	// summary makes the calls compaction's (round 0).
	summary bool
	state   *meterState
}

// meterState is shared by the meters of one turn (compaction's and the answer's).
type meterState struct {
	mu      sync.Mutex
	seq     int
	unsaved []chat.ModelCall
	// settles are the ends of a turn's calls the ledger took and not settled yet: they go with
	// the turn's next write (the next call's start, or the turn's end) rather than each in a
	// commit of its own.
	settles []store.LLMCallSettle
	// settling counts the settles still being written on their own (the calls outside a turn):
	// they run beside the answer's delivery, not before it.
	settling sync.WaitGroup
	// start is the turn's start when it rides in the turn's first call's reservation; nil when
	// the turn was started on its own (StartTurn).
	start PendingStart
}

// PendingStart is a turn's start not written yet (its id was taken ahead): the turn's first
// reservation carries it, or it is written alone before the model is called. Its writes run one
// at a time.
type PendingStart interface {
	// With runs write with the start to carry (nil once it is written); write reports whether
	// its write saved the start.
	With(write func(start *store.TurnStart) (saved bool))
	// Ensure writes the start alone unless a write saved it already.
	Ensure() error
}

// Meter returns the meter of a turn of in (turnID 0: calls outside a turn).
func (g *Guard) Meter(in adapters.Inbound, turnID int64, log *slog.Logger) *Meter {
	return &Meter{g: g, in: in, turnID: turnID, ledger: g.opts.Ledger, log: log, state: &meterState{}}
}

// Carry makes start ride in the turn's first reservation (with it, in one commit).
func (m *Meter) Carry(start PendingStart) { m.state.start = start }

// ForSummary returns the meter of the turn's compaction calls (round 0).
func (m *Meter) ForSummary() *Meter {
	s := *m
	s.summary = true
	return &s
}

// Start implements agent.Meter. The turn's earlier calls are settled first, in the new call's
// transaction, so they count at what they cost, not at what they reserved.
func (m *Meter) Start(ctx context.Context, call chat.ModelCall, prompt int) (func(chat.ModelCall), error) {
	m.state.settling.Wait()
	rules := m.g.rules(m.in)
	m.state.mu.Lock()
	seq := m.state.seq
	m.state.seq++
	pending := m.pendingLocked()
	settles := m.state.settles
	m.state.settles = nil
	m.state.mu.Unlock()
	if m.ledger == nil {
		if text, over := m.g.overRules(ctx, rules, pending, m.log); over {
			return nil, &Error{Text: text}
		}
		return m.keep, nil
	}
	checks := make([]store.QuotaCheck, len(rules))
	for i, r := range rules {
		checks[i] = r.check
	}
	start := store.LLMCallStart{TurnID: m.turnID, Seq: seq, Platform: string(m.in.Chat.Platform),
		ChatID: m.in.Chat.ChatID, QuotaChatID: ChatOf(m.in), UserID: m.in.UserID, Checks: checks, Prices: m.g.opts.Prices,
		Call: chat.ModelCall{Round: m.round(call), Model: call.Model, Candidate: call.Candidate,
			FallbackReason: call.FallbackReason, StartedAt: call.StartedAt,
			TokensIn: prompt, TokensOut: m.g.opts.MaxOutput(call.Model), Images: call.Images},
		Settle: settles}
	id, err := m.reserve(ctx, start)
	if err != nil {
		// Nothing of the transaction was written but the turn's start: the settles wait for
		// the turn's next write.
		m.deferSettles(settles)
	}
	if err != nil && m.state.start != nil {
		// The start did not ride in the call (a refusal writes it too): it is written alone,
		// before the model is called, or the call is not made.
		if serr := m.state.start.Ensure(); serr != nil {
			return nil, fmt.Errorf("the turn could not be saved: %w", serr)
		}
	}
	if over, ok := errors.AsType[*store.OverQuotaError](err); ok && over.Check < len(rules) {
		return nil, &Error{Text: rules[over.Check].refusal(over.Used)}
	}
	if err != nil {
		// The call runs (a failed usage query never blocks a turn) and is saved with the turn.
		m.log.Error("quota: model call not reserved; it is saved with the turn", "err", err)
		return m.keep, nil
	}
	return func(c chat.ModelCall) { m.settle(ctx, id, c) }, nil
}

// reserve writes the call's reservation in the ledger, one try (a call the ledger did not take
// runs all the same and is saved with the turn), carrying the turn's start while it is not
// written.
func (m *Meter) reserve(ctx context.Context, start store.LLMCallStart) (id int64, err error) {
	write := func(turn *store.TurnStart) bool {
		start.Turn = turn
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), store.WriteAttempt)
		defer cancel()
		id, err = m.ledger.StartLLMCall(sctx, start)
		_, over := errors.AsType[*store.OverQuotaError](err)
		return err == nil || over
	}
	if m.state.start == nil {
		write(nil)
	} else {
		m.state.start.With(write)
	}
	return id, err
}

// settle records how the call id ended. A turn's call is settled with the turn's next write; a
// call outside a turn (/compact) has none, so it is written at once, beside the answer.
func (m *Meter) settle(ctx context.Context, id int64, c chat.ModelCall) {
	c.Round = m.round(c)
	end := store.LLMCallSettle{ID: id, Call: c}
	if m.turnID != 0 {
		m.deferSettles([]store.LLMCallSettle{end})
		return
	}
	m.state.settling.Go(func() {
		sctx, cancel := store.Bound(ctx, store.WriteAttempt)
		defer cancel()
		m.WriteSettles(sctx, []store.LLMCallSettle{end})
	})
}

// deferSettles keeps settles for the turn's next write.
func (m *Meter) deferSettles(ss []store.LLMCallSettle) {
	if len(ss) == 0 {
		return
	}
	m.state.mu.Lock()
	defer m.state.mu.Unlock()
	m.state.settles = append(ss, m.state.settles...)
}

// WriteSettles writes settles each in a write of its own (the calls outside a turn, and a
// turn's whose final write was refused), each tried again until ctx ends: a settle is by id,
// so it may land twice.
func (m *Meter) WriteSettles(ctx context.Context, ss []store.LLMCallSettle) {
	if m.ledger == nil {
		return
	}
	for _, st := range ss {
		err := store.Retry(ctx, store.Write{What: "a model call's usage", Idempotent: true, Log: m.log}, func(ctx context.Context) error {
			return m.ledger.FinishLLMCall(ctx, st.ID, st.Call)
		})
		if err != nil {
			m.log.Error("quota: model call not settled; it keeps its reservation", "call", st.ID, "err", err)
		}
	}
}

// TakeSettles returns the settles not written yet, for the turn's final write, and forgets them.
func (m *Meter) TakeSettles() []store.LLMCallSettle {
	m.state.mu.Lock()
	defer m.state.mu.Unlock()
	ss := m.state.settles
	m.state.settles = nil
	return ss
}

// ChatOf is the chat whose chat quota a message's model calls count toward: a Discord
// thread's or forum post's parent channel (quotas.chat caps a channel with its threads), else
// its own chat. A Telegram forum topic's chat is its group already.
func ChatOf(in adapters.Inbound) string {
	return cmp.Or(in.ParentChatID, in.Chat.ChatID)
}

// keep records a call the ledger did not take, for the turn's final write.
func (m *Meter) keep(c chat.ModelCall) {
	c.Round = m.round(c)
	m.state.mu.Lock()
	defer m.state.mu.Unlock()
	m.state.unsaved = append(m.state.unsaved, c)
}

func (m *Meter) round(c chat.ModelCall) int {
	if m.summary {
		return 0
	}
	return c.Round
}

// pendingLocked is the usage of the calls not saved yet, which count with what is stored.
func (m *Meter) pendingLocked() []store.UsageRow {
	var rows []store.UsageRow
	for _, c := range m.state.unsaved {
		rows = append(rows, store.UsageRow{Platform: string(m.in.Chat.Platform), ChatID: m.in.Chat.ChatID,
			UserID: m.in.UserID, Model: c.Model, Calls: 1, TokensIn: int64(c.TokensIn), TokensOut: int64(c.TokensOut),
			CachedTokens: int64(c.CachedIn), CacheWriteTokens: int64(c.CacheWriteIn)})
	}
	return rows
}

// Unsaved waits until the turn's calls are settled and returns those the ledger did not take,
// in order. The turn calls it at its end.
func (m *Meter) Unsaved() []chat.ModelCall {
	m.state.settling.Wait()
	m.state.mu.Lock()
	defer m.state.mu.Unlock()
	return append([]chat.ModelCall(nil), m.state.unsaved...)
}
