package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"relaybot/chat"

	"gorm.io/gorm"
)

// Statuses of a model call row besides the runner's ok, error and cancelled.
const (
	// LLMCallRunning: the call was started and has not ended; its tokens are what it reserved.
	LLMCallRunning = chat.StatusRunning
	// LLMCallInterrupted: the replica that made the call stopped before it ended (Recover).
	LLMCallInterrupted = chat.StatusInterrupted
)

// LLMCallStart opens the row of a model call before its request is sent.
type LLMCallStart struct {
	// TurnID is the turn the call belongs to; 0 for a call outside a turn (/compact). Seq is
	// the call's place among the turn's calls.
	TurnID int64
	Seq    int
	// Platform, ChatID and UserID are whom the call is counted against; QuotaChatID is the chat
	// whose chat quota it counts toward (a Discord thread's parent channel), ChatID when empty.
	Platform, ChatID, UserID string
	QuotaChatID              string
	// Call is the call as far as known when it starts: Round, Model, Candidate, FallbackReason,
	// StartedAt, and in TokensIn and TokensOut the tokens it reserves (its prompt's estimate and
	// the most it may answer) until FinishLLMCall settles it.
	Call chat.ModelCall
	// Checks are the quotas the call must be under to start; Prices price their cost.
	Checks []QuotaCheck
	Prices map[string]chat.Price
	// Settle are the ends of the turn's earlier calls not settled yet: they are written first,
	// in the same transaction, so the checks count them at what they cost.
	Settle []LLMCallSettle
	// Turn is the start of the call's turn when it is not written yet (its ID, from NewTurnID,
	// is TurnID): the turn and the user's message are written first, in the same transaction,
	// and stay written when a check refuses the call.
	Turn *TurnStart
}

// LLMCallSettle is the end of a call StartLLMCall opened (ID), written with a later write of
// its turn (the next call's start, or the turn's end) instead of in a commit of its own.
type LLMCallSettle struct {
	ID   int64
	Call chat.ModelCall
}

// QuotaCheck is one quota a model call must be under: the calls matching Filter (running calls
// at what they reserved) must total fewer than Tokens tokens and cost less than Cost; zero
// means no cap of that kind.
type QuotaCheck struct {
	Filter UsageFilter
	Tokens int64
	Cost   float64
}

// OverQuotaError is StartLLMCall's refusal: the quota Checks[Check] is used up (Used).
type OverQuotaError struct {
	Check int
	Used  UsageTotal
}

func (e *OverQuotaError) Error() string {
	return fmt.Sprintf("store: model call refused: quota %d used up (%d tokens, cost %.4f)",
		e.Check, e.Used.TokensIn+e.Used.TokensOut, e.Used.Cost)
}

// StartLLMCall checks the call's quotas and writes its row (status running, with the tokens it
// reserves) in one transaction, and returns the row's id; a used-up quota returns an
// *OverQuotaError and writes nothing but c.Turn (and c.Settle with it). The check and the write are atomic per subject of the
// checks across every replica: on PostgreSQL under a transaction advisory lock per user and per
// chat checked, on SQLite (one process) through its single writer connection, whose
// transactions run one at a time.
func (s *ModelCallQuery) StartLLMCall(ctx context.Context, c LLMCallStart) (int64, error) {
	row := newLLMCallRow(c.Call)
	row.Status, row.Estimated, row.InstanceID = LLMCallRunning, true, s.instance
	row.Platform, row.ChatID, row.UserID, row.Seq = c.Platform, c.ChatID, c.UserID, c.Seq
	row.QuotaChatID = cmp.Or(c.QuotaChatID, c.ChatID)
	if c.TurnID != 0 {
		row.TurnID = &c.TurnID
	}
	if row.StartedAt.IsZero() {
		row.StartedAt = now()
	}
	row.StartedAt = dbTime(row.StartedAt)
	turn, msg, err := s.carriedTurnStart(c)
	if err != nil {
		return 0, fmt.Errorf("store: start model call of turn %d: %w", c.TurnID, err)
	}
	var over *OverQuotaError
	// The writes of concurrent turns share a commit (and its fsync), except on PostgreSQL when
	// advisory locks are taken: a shared transaction would hold the locks of several subjects
	// in no single order, which two replicas could deadlock on.
	run := s.turns.do
	if s.driver == DriverPostgres && len(c.Checks) > 0 {
		run = func(ctx context.Context, fn func(tx *gorm.DB) error) error {
			return s.w.WithContext(ctx).Transaction(fn)
		}
	}
	err = run(ctx, func(tx *gorm.DB) error {
		over = nil
		if s.driver == DriverPostgres {
			for _, k := range quotaLocks(c.Checks) {
				if err := tx.Exec("SELECT pg_advisory_xact_lock(CAST(? AS integer), CAST(? AS integer))", quotaLockSpace, k).Error; err != nil {
					return fmt.Errorf("lock quota: %w", err)
				}
			}
		}
		if c.Turn != nil {
			if err := writeTurnStart(tx, &turn, msg); err != nil {
				return fmt.Errorf("start turn: %w", err)
			}
		}
		if err := settleLLMCalls(tx, c.Settle); err != nil {
			return err
		}
		var err error
		if over, err = checkQuotas(tx, c.Checks, c.Prices); err != nil {
			return err
		}
		if over != nil {
			if c.Turn != nil {
				return nil // the turn's start is kept: commit it
			}
			return over
		}
		return tx.Raw(insertLLMCall, row.TurnID, row.Seq, row.Round, row.Model, row.Candidate, row.FallbackReason,
			row.Status, row.TTFTMs, row.DurationMs, row.TokensIn, row.TokensOut, row.Error, row.StartedAt,
			row.Platform, row.ChatID, row.UserID, row.Estimated, row.InstanceID, row.AudioMs, row.QuotaChatID, row.Images).
			Row().Scan(&row.ID)
	})
	if err == nil && c.Turn != nil {
		s.started.add(c.TurnID, c.Turn.ConversationID)
	}
	if err == nil && over != nil {
		return 0, over
	}
	if err != nil {
		if _, ok := errors.AsType[*OverQuotaError](err); ok {
			return 0, err
		}
		return 0, fmt.Errorf("store: start model call of turn %d: %w", c.TurnID, err)
	}
	return row.ID, nil
}

// carriedTurnStart is the rows of the turn's start a call carries (none when it carries none).
func (s *conn) carriedTurnStart(c LLMCallStart) (turnRow, messageRow, error) {
	if c.Turn == nil {
		return turnRow{}, messageRow{}, nil
	}
	if c.Turn.ID == 0 || c.Turn.ID != c.TurnID {
		return turnRow{}, messageRow{}, fmt.Errorf("its turn's start has id %d", c.Turn.ID)
	}
	return s.turnStartRows(*c.Turn)
}

// checkQuotas runs a call's quota checks in tx and returns the first one used up (nil when none
// is).
func checkQuotas(tx *gorm.DB, checks []QuotaCheck, prices map[string]chat.Price) (*OverQuotaError, error) {
	for i, q := range checks {
		rows, err := usageQuery(tx, q.Filter)
		if err != nil {
			return nil, err
		}
		var used UsageTotal
		if t := RollUp(rows, ByAll, prices); len(t) > 0 {
			used = t[0]
		}
		if q.Tokens > 0 && used.TokensIn+used.TokensOut >= q.Tokens || q.Cost > 0 && used.Cost >= q.Cost {
			return &OverQuotaError{Check: i, Used: used}, nil
		}
	}
	return nil, nil
}

// insertLLMCall is StartLLMCall's row, plain for the reason insertTurn is.
const insertLLMCall = `INSERT INTO llm_calls (turn_id, seq, round, model, candidate, fallback_reason, status,
	ttft_ms, duration_ms, tokens_in, tokens_out, error, started_at, platform, chat_id, user_id, estimated,
	instance_id, audio_ms, quota_chat_id, images) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`

// FinishLLMCall settles a call StartLLMCall opened with how it ended: its status, tokens
// (reported or estimated), timings and error. A call Recover already settled is left as it is.
func (s *ModelCallQuery) FinishLLMCall(ctx context.Context, id int64, c chat.ModelCall) error {
	err := s.turns.do(ctx, func(tx *gorm.DB) error {
		return settleLLMCalls(tx, []LLMCallSettle{{ID: id, Call: c}})
	})
	if err != nil {
		return fmt.Errorf("store: finish model call %d: %w", id, err)
	}
	return nil
}

// settleLLMCall is FinishLLMCall's statement: one plain UPDATE (no GORM statement to build),
// which the statement cache keeps prepared.
const settleLLMCall = `UPDATE llm_calls SET status = ?, model = ?, candidate = ?, ttft_ms = ?,
	duration_ms = ?, tokens_in = ?, tokens_out = ?, cached_in = ?, cache_write_in = ?, estimated = ?, error = ?, images = ?
	WHERE id = ? AND status = ?`

// settleLLMCalls writes the ends of running calls in tx.
func settleLLMCalls(tx *gorm.DB, ss []LLMCallSettle) error {
	for _, st := range ss {
		c := st.Call
		if err := tx.Exec(settleLLMCall, string(c.Status), c.Model, c.Candidate, c.TimeToFirstToken.Milliseconds(),
			c.Duration.Milliseconds(), c.TokensIn, c.TokensOut, c.CachedIn, c.CacheWriteIn, c.Estimated, validText(c.ErrorText()),
			c.Images, st.ID, LLMCallRunning).Error; err != nil {
			return fmt.Errorf("settle model call %d: %w", st.ID, err)
		}
	}
	return nil
}

// quotaLockSpace is the first key of the advisory locks of quota checks (the second is the
// subject's hash), apart from any other advisory lock of the database.
const quotaLockSpace = 0x51554f54 // "QUOT"

// quotaLocks returns the advisory lock keys of the subjects of checks, each once, in one order,
// so two calls locking the same subjects never wait for each other in a cycle.
func quotaLocks(checks []QuotaCheck) []int32 {
	var keys []int32
	for _, q := range checks {
		h := fnv.New32a()
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s", q.Filter.Platform, q.Filter.ChatID, q.Filter.UserID, q.Filter.QuotaChatID)
		k := int32(h.Sum32())
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// newLLMCallRow is the row of a finished call (the caller sets the turn, seq and subject).
func newLLMCallRow(c chat.ModelCall) llmCallRow {
	return llmCallRow{Round: c.Round, Model: c.Model, Candidate: c.Candidate,
		FallbackReason: validText(c.FallbackReason), Status: c.Status,
		TTFTMs: c.TimeToFirstToken.Milliseconds(), DurationMs: c.Duration.Milliseconds(),
		TokensIn: c.TokensIn, TokensOut: c.TokensOut, CachedIn: c.CachedIn, CacheWriteIn: c.CacheWriteIn, Estimated: c.Estimated,
		Error: validText(c.ErrorText()), StartedAt: c.StartedAt, AudioMs: c.Audio.Milliseconds(), Images: c.Images}
}
