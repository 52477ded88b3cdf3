package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"relaybot/adapters"
	"relaybot/agent"
	"relaybot/chat"
	"relaybot/pipeline/history"
	"relaybot/store"
)

// Limits caps tokens (prompt and completion together) and cost per UTC day and month; zero means
// no cap of that kind.
type Limits struct {
	TokensPerDay   int64
	TokensPerMonth int64
	CostPerDay     float64
	CostPerMonth   float64
}

func (l Limits) empty() bool { return l == Limits{} }

// QuotaOverride replaces the per-user limits for the users and roles it lists.
type QuotaOverride struct {
	// Users are "platform:user_id" entries ("*:id" for any platform).
	Users []string
	// Roles are platform role ids ("discord_role:ID") or "chat_admins".
	Roles  []string
	Limits Limits
}

// Quotas cap what each user and each chat may spend. Admins are exempt unless AdminsCounted.
type Quotas struct {
	User          Limits
	Chat          Limits
	Overrides     []QuotaOverride
	AdminsCounted bool
}

// userLimits returns the limits of the sender: the first override listing them, else User.
func (q Quotas) userLimits(in adapters.Inbound) Limits {
	for _, o := range q.Overrides {
		if newIDSet(o.Users).has(in.Chat.Platform, in.UserID) {
			return o.Limits
		}
		for _, r := range o.Roles {
			if r == "chat_admins" && in.ChatAdmin {
				return o.Limits
			}
			if id, ok := cutRole(r, in.Chat.Platform); ok && slices.Contains(in.Roles, id) {
				return o.Limits
			}
		}
	}
	return q.User
}

// cutRole returns the role id of a "platform_role:ID" entry for platform.
func cutRole(role string, p chat.Platform) (string, bool) {
	prefix := string(p) + "_role:"
	if len(role) > len(prefix) && role[:len(prefix)] == prefix {
		return role[len(prefix):], true
	}
	return "", false
}

// quotaError ends a turn whose quota ran out before one of its model calls; its text tells the
// user when the quota resets.
type quotaError struct{ text string }

func (e *quotaError) Error() string { return "over quota: " + e.text }

// quotaRule is one quota over a message's sender or chat in one period (a UTC day or month).
type quotaRule struct {
	who, period string
	resets      time.Time
	check       store.QuotaCheck
}

// refusal is what the user is told when the rule's quota is used up.
func (r quotaRule) refusal(used store.UsageTotal) string {
	return fmt.Sprintf("%s used up %s quota (%s). It resets %s UTC.", r.who, r.period,
		quotaUsed(used, r.check.Tokens, r.check.Cost), r.resets.Format("Jan 2 15:04"))
}

// over reports whether used reaches the rule's quota.
func (r quotaRule) over(used store.UsageTotal) bool {
	return r.check.Tokens > 0 && used.TokensIn+used.TokensOut >= r.check.Tokens || r.check.Cost > 0 && used.Cost >= r.check.Cost
}

// quotaGuard holds the turns to the quotas: it checks them before a turn, and checks them and
// reserves each model call's tokens before its request (meter).
type quotaGuard struct {
	opts    *Options
	access  *accessRules
	history *history.Keeper
	// ledger keeps model calls from their start; nil when the Store is not a CallLedger (the
	// calls are then saved with the turn, and the quotas checked without a reservation).
	ledger CallLedger
}

// rules returns the quotas a message of in is held to now; none for an exempt admin.
func (g *quotaGuard) rules(in adapters.Inbound) []quotaRule {
	q := g.opts.Quotas
	if g.opts.Usage == nil || !q.AdminsCounted && g.access.isAdmin(in) {
		return nil
	}
	now := g.opts.Now()
	var rules []quotaRule
	for _, c := range []struct {
		who    string
		limits Limits
		f      store.UsageFilter
	}{
		{"You have", q.userLimits(in), store.UsageFilter{Platform: string(in.Chat.Platform), UserID: in.UserID}},
		{"This chat has", q.Chat, store.UsageFilter{Platform: string(in.Chat.Platform), QuotaChatID: quotaChat(in)}},
	} {
		for _, period := range []struct {
			name          string
			since, resets time.Time
			tokens        int64
			cost          float64
		}{
			{"today's", dayStart(now), dayStart(now).AddDate(0, 0, 1), c.limits.TokensPerDay, c.limits.CostPerDay},
			{"this month's", monthStart(now), monthStart(now).AddDate(0, 1, 0), c.limits.TokensPerMonth, c.limits.CostPerMonth},
		} {
			if period.tokens == 0 && period.cost == 0 {
				continue
			}
			f := c.f
			f.Since = period.since
			rules = append(rules, quotaRule{who: c.who, period: period.name, resets: period.resets,
				check: store.QuotaCheck{Filter: f, Tokens: period.tokens, Cost: period.cost}})
		}
	}
	return rules
}

// over reports whether the sender or the chat has used up a quota, with the message that
// tells them when it resets; pending is usage not saved yet. Calls running anywhere count with
// what they reserved. A failed usage query lets the message through (logged).
func (g *quotaGuard) over(ctx context.Context, in adapters.Inbound, pending []store.UsageRow, log *slog.Logger) (string, bool) {
	return g.overRules(ctx, g.rules(in), pending, log)
}

// overRules is over with the rules given.
func (g *quotaGuard) overRules(ctx context.Context, rules []quotaRule, pending []store.UsageRow, log *slog.Logger) (string, bool) {
	if len(rules) == 0 {
		return "", false
	}
	// One try within a write's: a database that does not answer leaves the turn unchecked, not
	// waiting.
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), store.WriteAttempt)
	defer cancel()
	for _, r := range rules {
		rows, err := g.opts.Usage.Usage(qctx, r.check.Filter)
		if err != nil {
			log.Error("pipeline: quota not checked: usage query failed", "err", err)
			return "", false
		}
		if t := total(append(rows, pending...), g.opts.Models.Prices); r.over(t) {
			return r.refusal(t), true
		}
	}
	return "", false
}

func quotaUsed(t store.UsageTotal, tokens int64, cost float64) string {
	if tokens > 0 && t.TokensIn+t.TokensOut >= tokens {
		return fmt.Sprintf("%d of %d tokens", t.TokensIn+t.TokensOut, tokens)
	}
	return fmt.Sprintf("cost %.4f of %.4f", t.Cost, cost)
}

// CallLedger keeps model calls from the moment they start (store.Store): StartLLMCall checks
// the quotas and reserves the call's tokens in one atomic step across replicas (an
// *store.OverQuotaError when one is used up), FinishLLMCall settles the call with what it cost.
// With it a turn's calls are saved as they happen, never with the turn's final write.
type CallLedger interface {
	StartLLMCall(ctx context.Context, c store.LLMCallStart) (int64, error)
	FinishLLMCall(ctx context.Context, id int64, c store.LLMCall) error
}

// meter is the agent.Meter of one turn (or /compact): before each model call it checks the
// quotas and reserves the call's prompt estimate and max_output_tokens, and when the call ends
// it settles it. Calls the ledger did not take (no ledger, or it failed) are kept for the
// turn's final write (unsaved). The runner uses a meter from one goroutine at a time.
type meter struct {
	g      *quotaGuard
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
	unsaved []agent.LLMCall
	// settles are the ends of a turn's calls the ledger took and not settled yet: they go with
	// the turn's next write (the next call's start, or the turn's end) rather than each in a
	// commit of its own.
	settles []store.LLMCallSettle
	// settling counts the settles still being written on their own (the calls outside a turn):
	// they run beside the answer's delivery, not before it.
	settling sync.WaitGroup
	// start is the turn's start when it rides in the turn's first call's reservation; nil when
	// the turn was started on its own (StartTurn).
	start *turnStart
}

// meter returns the meter of a turn of in (turnID 0: calls outside a turn).
func (g *quotaGuard) meter(in adapters.Inbound, turnID int64, log *slog.Logger) *meter {
	return &meter{g: g, in: in, turnID: turnID, ledger: g.ledger, log: log, state: &meterState{}}
}

// forSummary returns the meter of the turn's compaction calls.
func (m *meter) forSummary() *meter {
	s := *m
	s.summary = true
	return &s
}

// Start implements agent.Meter. The turn's earlier calls are settled first, in the new call's
// transaction, so they count at what they cost, not at what they reserved.
func (m *meter) Start(ctx context.Context, call agent.LLMCall, prompt int) (func(agent.LLMCall), error) {
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
			return nil, &quotaError{text: text}
		}
		return m.keep, nil
	}
	checks := make([]store.QuotaCheck, len(rules))
	for i, r := range rules {
		checks[i] = r.check
	}
	start := store.LLMCallStart{TurnID: m.turnID, Seq: seq, Platform: string(m.in.Chat.Platform),
		ChatID: m.in.Chat.ChatID, QuotaChatID: quotaChat(m.in), UserID: m.in.UserID, Checks: checks, Prices: m.g.opts.Models.Prices,
		Call: store.LLMCall{Round: m.round(call), Model: call.Model, Candidate: call.Candidate,
			FallbackReason: call.FallbackReason, StartedAt: call.StartedAt,
			TokensIn: prompt, TokensOut: m.g.history.Budget(call.Model).MaxOutputTokens},
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
		if serr := m.state.start.ensure(); serr != nil {
			return nil, fmt.Errorf("the turn could not be saved: %w", serr)
		}
	}
	if over, ok := errors.AsType[*store.OverQuotaError](err); ok && over.Check < len(rules) {
		return nil, &quotaError{text: rules[over.Check].refusal(over.Used)}
	}
	if err != nil {
		// The call runs (a failed usage query never blocks a turn) and is saved with the turn.
		m.log.Error("pipeline: model call not reserved; it is saved with the turn", "err", err)
		return m.keep, nil
	}
	return func(c agent.LLMCall) { m.settle(ctx, id, c) }, nil
}

// reserve writes the call's reservation in the ledger, one try (a call the ledger did not take
// runs all the same and is saved with the turn), carrying the turn's start while it is not
// written.
func (m *meter) reserve(ctx context.Context, start store.LLMCallStart) (id int64, err error) {
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
		m.state.start.with(write)
	}
	return id, err
}

// settle records how the call id ended. A turn's call is settled with the turn's next write; a
// call outside a turn (/compact) has none, so it is written at once, beside the answer.
func (m *meter) settle(ctx context.Context, id int64, c agent.LLMCall) {
	c.Round = m.round(c)
	end := store.LLMCallSettle{ID: id, Call: toStoreLLMCalls([]agent.LLMCall{c})[0]}
	if m.turnID != 0 {
		m.deferSettles([]store.LLMCallSettle{end})
		return
	}
	m.state.settling.Go(func() {
		sctx, cancel := store.Bound(ctx, store.WriteAttempt)
		defer cancel()
		m.writeSettles(sctx, []store.LLMCallSettle{end})
	})
}

// deferSettles keeps settles for the turn's next write.
func (m *meter) deferSettles(ss []store.LLMCallSettle) {
	if len(ss) == 0 {
		return
	}
	m.state.mu.Lock()
	defer m.state.mu.Unlock()
	m.state.settles = append(ss, m.state.settles...)
}

// writeSettles writes settles each in a write of its own (the calls outside a turn, and a
// turn's whose final write was refused), each tried again until ctx ends: a settle is by id,
// so it may land twice.
func (m *meter) writeSettles(ctx context.Context, ss []store.LLMCallSettle) {
	for _, st := range ss {
		err := store.Retry(ctx, store.Write{What: "a model call's usage", Idempotent: true, Log: m.log}, func(ctx context.Context) error {
			return m.ledger.FinishLLMCall(ctx, st.ID, st.Call)
		})
		if err != nil {
			m.log.Error("pipeline: model call not settled; it keeps its reservation", "call", st.ID, "err", err)
		}
	}
}

// takeSettles returns the settles not written yet, for the turn's final write, and forgets them.
func (m *meter) takeSettles() []store.LLMCallSettle {
	m.state.mu.Lock()
	defer m.state.mu.Unlock()
	ss := m.state.settles
	m.state.settles = nil
	return ss
}

// quotaChat is the chat whose chat quota a message's model calls count toward: a Discord
// thread's or forum post's parent channel (quotas.chat caps a channel with its threads), else
// its own chat. A Telegram forum topic's chat is its group already.
func quotaChat(in adapters.Inbound) string {
	return cmp.Or(in.ParentChatID, in.Chat.ChatID)
}

// keep records a call the ledger did not take, for the turn's final write.
func (m *meter) keep(c agent.LLMCall) {
	c.Round = m.round(c)
	m.state.mu.Lock()
	defer m.state.mu.Unlock()
	m.state.unsaved = append(m.state.unsaved, c)
}

func (m *meter) round(c agent.LLMCall) int {
	if m.summary {
		return 0
	}
	return c.Round
}

// pendingLocked is the usage of the calls not saved yet, which count with what is stored.
func (m *meter) pendingLocked() []store.UsageRow {
	var rows []store.UsageRow
	for _, c := range m.state.unsaved {
		rows = append(rows, store.UsageRow{Platform: string(m.in.Chat.Platform), ChatID: m.in.Chat.ChatID,
			UserID: m.in.UserID, Model: c.Model, Calls: 1, TokensIn: int64(c.TokensIn), TokensOut: int64(c.TokensOut)})
	}
	return rows
}

// unsaved waits until the turn's calls are settled and returns those the ledger did not take,
// in order. The turn calls it at its end.
func (m *meter) unsaved() []agent.LLMCall {
	m.state.settling.Wait()
	m.state.mu.Lock()
	defer m.state.mu.Unlock()
	return append([]agent.LLMCall(nil), m.state.unsaved...)
}
