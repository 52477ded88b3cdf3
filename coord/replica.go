package coord

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"relaybot/adapters"
)

// ledgerKeep is how long the inbound ledger remembers a message: well past the 24 hours
// Telegram keeps resending an update.
const ledgerKeep = 48 * time.Hour

// budgetsKeep is how long a chat's shared budget outlives its last delivery, and how often the
// ledger and the budgets are purged.
const budgetsKeep = time.Hour

// Store is what a replica needs of the store's turns (*store.TurnQuery): the turns and tool calls
// of replicas that are gone end interrupted. The replicas' own tables are coord's.
type Store interface {
	// Recover ends the turns and tool calls of replicas that are gone, and reports how many.
	Recover(ctx context.Context) (turns, calls int, err error)
	TurnEnder
}

// ReplicaOptions configure NewReplica.
type ReplicaOptions struct {
	// ID is this replica's id, from NewID: the one the store stamps on its turns.
	ID string
	// Store is the bot's database, migrated.
	Store Store
	// TTL is the replica's lease; 0 means DefaultTTL.
	TTL time.Duration
	// Logger receives what the deployment does; nil discards it.
	Logger *slog.Logger
}

// Replica is this process's place among the replicas of a bot on one PostgreSQL database. Its
// heartbeat renews its lease and sweeps up after replicas that are gone: their turns and tool
// calls end interrupted, the replies they were streaming are ended with a note, their messages
// leave the conversations' queues, and once an hour the inbound ledger and the chat budgets are
// purged. Its methods are safe for concurrent use.
type Replica struct {
	db     *sql.DB
	st     Store
	log    *slog.Logger
	member *Member
	turns  *Turns
	ledger *Ledger
	stops  *Signals
	book   *LeaseBook
	relay  *WebRelay
	asks   *Questions
	share  share

	mu      sync.Mutex
	engines map[Bot]Engine
	closers map[Bot]adapters.QuestionCloser
	replies []*Replies

	purged time.Time // the last purge of the ledger and budgets; the heartbeat's alone

	marks      sync.WaitGroup // replies being marked interrupted
	markCtx    context.Context
	stopMarks  context.CancelFunc
	closeOnce  sync.Once
	closeError error
}

// NewReplica joins the replicas of the bot on db, after the store's migrations, and returns
// once the others count it: it divides the bot-wide budgets by the replicas live now and, when
// others are, waits one heartbeat period, since until their next heartbeat they each spend
// their share as if it were not there.
func NewReplica(ctx context.Context, db *sql.DB, opts ReplicaOptions) (*Replica, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	markCtx, stopMarks := context.WithCancel(context.WithoutCancel(ctx))
	r := &Replica{db: db, st: opts.Store, log: log, turns: NewTurns(db, opts.ID, log), ledger: &Ledger{db: db, instance: opts.ID, log: log},
		stops: NewSignals(db, log), book: NewLeaseBook(db), relay: NewWebRelay(db, opts.ID, log), share: share{log: log},
		engines: map[Bot]Engine{}, closers: map[Bot]adapters.QuestionCloser{}, markCtx: markCtx, stopMarks: stopMarks}
	m, err := Join(ctx, db, Options{ID: opts.ID, TTL: opts.TTL, Logger: log, Members: r.share.set, Sweep: r.sweep})
	if err != nil {
		stopMarks()
		return nil, err
	}
	r.member = m
	r.ledger = r.ledger.fenced(m)
	r.asks = NewQuestions(db, m, log)
	if err := r.awaitCounted(ctx); err != nil {
		r.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	log.Info("replica joined", "instance", m.ID(), "lease", m.TTL())
	return r, nil
}

// awaitCounted shares the budgets among the replicas live now and, when there are others,
// waits until they have counted this one.
func (r *Replica) awaitCounted(ctx context.Context) error {
	live, err := Instances(ctx, r.db)
	if err != nil {
		return fmt.Errorf("replicas: count the live replicas: %w", err)
	}
	r.share.set(max(len(live), 1))
	if len(live) < 2 {
		return nil
	}
	wait := r.member.TTL()/3 + 250*time.Millisecond
	r.log.Info("waiting for the other replicas to count this one", "replicas", len(live), "wait", wait)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("replicas: waiting to be counted: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}

// sweep runs after every heartbeat, on the heartbeat's goroutine. It takes over the work of a
// replica only once this one has itself been back for the grace period (TakeOver).
func (r *Replica) sweep(ctx context.Context) error {
	if r.member == nil {
		return nil // still joining
	}
	grace := TakeoverGrace(r.member.TTL())
	if r.member.LiveFor() >= grace {
		gone, err := TakeOver(ctx, r.db, r.member.ID(), grace, r.st)
		if len(gone) > 0 {
			r.log.Warn("took over the work of replicas whose lease stayed expired", "replicas", gone)
		}
		if err != nil {
			return err
		}
	}
	turns, calls, err := r.st.Recover(ctx)
	if turns+calls > 0 {
		r.log.Warn("reclaimed the work of a replica that is gone", "turns", turns, "tool_calls", calls)
	}
	if err != nil {
		return err
	}
	if err := r.markInterrupted(ctx); err != nil {
		return err
	}
	if err := r.closeQuestions(ctx); err != nil {
		return err
	}
	if _, err := r.turns.Purge(ctx); err != nil {
		return err
	}
	if err := r.stops.Purge(ctx); err != nil {
		return err
	}
	if time.Since(r.purged) < budgetsKeep {
		return nil
	}
	r.purged = time.Now()
	if _, err := PurgeChatBudgets(ctx, r.db, budgetsKeep); err != nil {
		return err
	}
	if _, err := PurgeQuestions(ctx, r.db, questionKeep); err != nil {
		return err
	}
	_, err = r.ledger.Purge(ctx, ledgerKeep)
	return err
}

// markInterrupted takes the replies that replicas which are gone were streaming and ends each
// message with a note, each on a goroutine of its own (the heartbeat must not wait for the
// platform) that Close waits for. A message the platform no longer lets the bot edit is skipped
// and logged.
func (r *Replica) markInterrupted(ctx context.Context) error {
	r.mu.Lock()
	engines := make(map[Bot]Engine, len(r.engines))
	for bot, e := range r.engines {
		engines[bot] = e
	}
	r.mu.Unlock()
	for bot, e := range engines {
		taken, err := Interrupted(ctx, r.db, bot, 100)
		if err != nil {
			return err
		}
		for _, ir := range taken {
			r.marks.Go(func() { r.mark(e, ir) })
		}
	}
	return nil
}

// mark ends one interrupted reply, within a minute.
func (r *Replica) mark(e Engine, ir InterruptedReply) {
	ctx, cancel := context.WithTimeout(r.markCtx, time.Minute)
	defer cancel()
	attrs := []any{"chat", ir.Message.Chat.String(), "message", ir.Message.ID, "replica", ir.Instance}
	if err := e.MarkInterrupted(ctx, ir.Message, ir.Text); err != nil {
		r.log.Warn("partial reply of a replica that is gone not marked interrupted", append(attrs, "err", err)...)
		return
	}
	r.log.Info("marked the partial reply of a replica that is gone as interrupted", attrs...)
}

// ID is this replica's id, the one its turns carry (store.Options.Instance).
func (r *Replica) ID() string { return r.member.ID() }

// Fence is the fence of the delivery engines and the ledger: it waits while this replica's lease is not confirmed
// (Member.Fence), and refuses work stamped with an epoch that was taken over.
func (r *Replica) Fence(ctx context.Context) error { return r.member.Fence(ctx) }

// Stamp marks ctx with the epoch the turn begins under (pipeline.Stamper; Member.Stamp).
func (r *Replica) Stamp(ctx context.Context) context.Context { return r.member.Stamp(ctx) }

// StampedEpoch is the epoch of the registration Stamp marked ctx with; 0 when it carries none.
func (r *Replica) StampedEpoch(ctx context.Context) int64 {
	epoch, _ := ctx.Value(epochKey{}).(int64)
	return epoch
}

// TakenOver reports whether err refuses work a survivor took over (ErrTakenOver).
func (r *Replica) TakenOver(err error) bool { return errors.Is(err, ErrTakenOver) }

// ClaimToolCall is the tools manager's claim (tools.ManagerOptions.Claim): the call of turn may start only when this replica's
// fence is open, the turn is still running here under the epoch ctx was stamped with, and the
// lease covering it is unexpired on the database's clock (the instance row is locked for share,
// so a takeover of it waits for the claim or is seen by it); the fence is asked again after the
// answer, so a pause between the claim and the call cannot outlast the lease either. While the
// database is away it waits (the fence closes meanwhile), within ctx.
func (r *Replica) ClaimToolCall(ctx context.Context, turnID int64) error {
	epoch, ok := ctx.Value(epochKey{}).(int64)
	if !ok {
		epoch = r.member.Epoch()
	}
	wait := 250 * time.Millisecond
	for {
		if err := r.member.Fence(ctx); err != nil {
			return err
		}
		if turnID == 0 {
			return nil
		}
		err := r.claim(ctx, turnID, epoch)
		if err == nil {
			return r.member.Fence(ctx)
		}
		if errors.Is(err, ErrTakenOver) || ctx.Err() != nil {
			return err
		}
		r.log.Warn("tool call not claimed yet: the database is not answering", "turn", turnID, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(wait*2, 2*time.Second)
	}
}

// errLeaseLapsed is a claim's answer while this replica's lease has expired and nobody took it
// over: the claim waits for the next renewal.
var errLeaseLapsed = errors.New("the lease has expired and is not renewed yet")

// claim is one try of ClaimToolCall's statement, within a third of the lease. The instance row is
// locked for share: a takeover (TakeOver locks it for update) either has happened (no row, or
// another epoch, and the turn interrupted) or waits for the answer.
func (r *Replica) claim(ctx context.Context, turnID, epoch int64) error {
	cctx, cancel := context.WithTimeout(ctx, r.member.TTL()/3)
	defer cancel()
	var status sql.NullString
	var held int64
	var live bool
	err := r.db.QueryRowContext(cctx, `SELECT (SELECT status FROM turns WHERE id = $1 AND instance_id = $2), i.epoch, i.expires_at > now()
		FROM instances i WHERE i.id = $2 FOR SHARE`, turnID, r.member.ID()).Scan(&status, &held, &live)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("replicas: tool call of turn %d: %w", turnID, ErrTakenOver)
	case err != nil:
		return fmt.Errorf("replicas: claim a tool call of turn %d: %w", turnID, err)
	case held != epoch || status.String != "running":
		return fmt.Errorf("replicas: tool call of turn %d (%s): %w", turnID, status.String, ErrTakenOver)
	case !live:
		return fmt.Errorf("replicas: claim a tool call of turn %d: %w", turnID, errLeaseLapsed)
	}
	return nil
}

// Shared reports that other replicas may serve the bot too (pipeline.Replicas).
func (*Replica) Shared() bool { return true }

// Enter enters a message in its conversation's queue across the replicas (pipeline.TurnGate).
func (r *Replica) Enter(ctx context.Context, key string, in adapters.Inbound, limit int, interrupt bool) (int64, bool, error) {
	return r.turns.Enter(ctx, Entry{Key: key, UserID: in.UserID, MessageID: in.MessageID, Sent: in.Time}, limit, interrupt)
}

// Wait waits for the conversation's turn across the replicas (pipeline.TurnGate).
func (r *Replica) Wait(ctx context.Context, key string, ticket int64) (bool, error) {
	return r.turns.Wait(ctx, key, ticket)
}

// Leave takes a message out of its conversation's queue (pipeline.TurnGate).
func (r *Replica) Leave(ctx context.Context, key string, ticket int64) error {
	return r.turns.Leave(ctx, key, ticket)
}

// Elsewhere says whether another replica runs the conversation's turn, and for whom
// (pipeline.TurnGate).
func (r *Replica) Elsewhere(ctx context.Context, key string) (string, bool, error) {
	userID, here, running, err := r.turns.Running(ctx, key)
	return userID, running && !here, err
}

// PublishStop carries a /stop to the replica running the turn (pipeline.StopPublisher).
func (r *Replica) PublishStop(ctx context.Context, key, userID string, admin bool) error {
	return r.stops.PublishStop(ctx, key, userID, admin)
}

// Ledger takes each inbound message once for all replicas (adapters.Ledger).
func (r *Replica) Ledger() adapters.Ledger { return r.ledger }

// PollLease is the lease of bot's Telegram poller (adapters.Lease); its holder is written down for the admin pages.
func (r *Replica) PollLease(bot Bot) adapters.Lease {
	name := bot.lease("poller")
	l := NewLease(r.db, name)
	l.member = r.member // fenced: a takeover of this replica ends it (TakeOver)
	return r.recorded(name, l)
}

// Shards shares bot's gateway shards among the replicas (adapters.Shards); each shard's holder is written down for the admin pages.
func (r *Replica) Shards(bot Bot) adapters.Shards {
	s := NewShards(r.db, bot.lease("shards"))
	s.member = r.member // fenced: a takeover of this replica ends its shards' sessions (TakeOver)
	return sharedShards{s: s, bot: bot, r: r}
}

// Questions records bot's questions with buttons, so that a press another replica receives
// is carried to the turn that asked (adapters.QuestionBook).
func (r *Replica) Questions(bot Bot) adapters.QuestionBook { return r.asks.Book(bot) }

// AddQuestionCloser hands the replica bot's adapter, which then closes the questions that
// replicas taken over left open (their messages say so and lose their buttons). Call it
// before Run.
func (r *Replica) AddQuestionCloser(bot Bot, c adapters.QuestionCloser) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closers[bot] = c
}

// WebRelay shows every open page of a web chat what the turns of other replicas stream
// (web.Relay).
func (r *Replica) WebRelay() *WebRelay { return r.relay }

// SharedChats shares each chat's own budgets of bot (whose platform limits are lim) with the
// other replicas that deliver to it (delivery.SharedChats).
func (r *Replica) SharedChats(bot Bot, lim adapters.Limits) *ChatBudgets {
	return NewChatBudgets(r.db, r.member.ID(), ChatBudgetOptions{Bot: bot,
		Chat: Window{N: lim.PerChat.N, Per: lim.PerChat.Per}, Group: Window{N: lim.PerGroup.N, Per: lim.PerGroup.Per}})
}

// InFlight records the replies bot's delivery engine streams, for a survivor to end should this
// replica die (delivery.InFlight); Run writes them down. Call it before Run.
func (r *Replica) InFlight(bot Bot) *Replies {
	rep := NewReplies(r.db, r.member.ID(), bot, r.log)
	r.mu.Lock()
	r.replies = append(r.replies, rep)
	r.mu.Unlock()
	return rep
}

// AddEngine hands the replica bot's delivery engine, which then takes its share of the
// bot-wide budgets and ends the replies the replicas that died left behind. Call it before
// Run.
func (r *Replica) AddEngine(bot Bot, e Engine) {
	r.share.add(e)
	r.mu.Lock()
	r.engines[bot] = e
	r.mu.Unlock()
}

// Instances lists the live replicas, oldest first, each with the leases it holds.
func (r *Replica) Instances(ctx context.Context) ([]Instance, error) {
	live, err := Instances(ctx, r.db)
	if err != nil {
		return nil, err
	}
	held, err := r.book.Holders(ctx)
	if err != nil {
		return nil, err
	}
	for i := range live {
		live[i].Leases = held[live[i].ID]
		live[i].Self = live[i].ID == r.member.ID()
	}
	return live, nil
}

// Run serves, until ctx ends, the stop requests of other replicas, the conversations they free
// and the writers of the replies in flight, until ctx ends.
func (r *Replica) Run(ctx context.Context, turns Stopper) error {
	r.mu.Lock()
	reps := r.replies
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, rep := range reps {
		wg.Go(func() { rep.Run(ctx) })
	}
	errs := make(chan error, 3)
	wg.Go(func() { errs <- r.turns.Listen(ctx) })
	wg.Go(func() { errs <- r.asks.Listen(ctx) })
	wg.Go(func() { errs <- r.stops.ListenStops(ctx, r.member.ID(), func(st Stop) { r.stop(turns, st) }) })
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// stop hands turns a stop request another replica published.
func (r *Replica) stop(turns Stopper, st Stop) {
	if st.Interrupt {
		if turns.InterruptFromReplica(st.Key) {
			r.log.Info("interrupted a turn: a newer message reached another replica", "conversation", st.Key)
		}
		return
	}
	if turns.StopFromReplica(st.Key, st.UserID, st.Admin) {
		r.log.Info("stopped a turn on another replica's request", "conversation", st.Key)
	}
}

// Close leaves the replicas at once, so the others take over what this one left without
// waiting for its lease to expire: the heartbeat stops, the replies being marked interrupted are
// given up, and this replica's row goes at once.
func (r *Replica) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		r.stopMarks()
		r.closeError = r.member.Leave(ctx)
		r.marks.Wait()
	})
	return r.closeError
}
