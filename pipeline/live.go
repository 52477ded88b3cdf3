package pipeline

import (
	"errors"
	"sync"

	"relaybot/pipeline/access"
	"relaybot/pipeline/history"
	"relaybot/pipeline/quota"
)

// live is the pipeline's configuration and the parts built from it: the runner, the tools, the
// access rules, the history, the quotas and the commands. Reconfigure replaces it whole; a turn
// keeps the one it began with to its end, and the next turn takes the new one (decision 054).
type live struct {
	opts   Options
	access access.Rules
	parts  *turnParts
	cmds   *commands

	mu      sync.Mutex
	running int    // turns begun with it and not yet ended
	retired bool   // a newer one replaced it
	retire  func() // run once it is retired and no turn of it runs
}

// now returns what a message is answered with now.
func (p *Pipeline) now() *live { return p.live.Load() }

// begin returns the configuration a turn starting now runs with, counting the turn in it until
// end: a configuration retired in between is skipped for the newer one.
func (p *Pipeline) begin() *live {
	for {
		l := p.live.Load()
		l.mu.Lock()
		if !l.retired {
			l.running++
			l.mu.Unlock()
			return l
		}
		l.mu.Unlock()
	}
}

// end counts a turn begun with l out; the last turn of a retired configuration runs its retire.
func (l *live) end() {
	l.mu.Lock()
	l.running--
	done := l.retired && l.running == 0
	l.mu.Unlock()
	if done && l.retire != nil {
		go l.retire()
	}
}

// build returns the parts of opts (filled).
func (p *Pipeline) build(runner Runner, toolbox Toolbox, opts Options) (*live, error) {
	l := &live{opts: opts, access: access.Compile(opts.Access)}
	hst := history.Store{Conversations: p.store.Conversations, Messages: p.store.Messages}
	hist, err := history.New(runner, hst, opts.History, opts.Models.Budgets, opts.Now)
	if err != nil {
		return nil, err
	}
	quotas := quota.New(quota.Options{Policy: opts.Quotas, Usage: opts.Usage, Ledger: p.store.ModelCalls, Prices: opts.Models.Prices,
		Admins: l.access.Admins(), Now: opts.Now,
		MaxOutput: func(model string) int { return hist.Budget(model).MaxOutputTokens }})
	l.parts = &turnParts{runner: runner, store: p.store, tools: toolbox, opts: &l.opts, access: &l.access, history: hist,
		quotas: quotas, asking: p.asking, media: newMediaReader(&l.opts, p.outbox), outbox: p.outbox}
	l.cmds = &commands{store: p.store, history: hist, quotas: quotas, access: &l.access, opts: &l.opts, say: p.outbox.notice, fail: l.opts.failureText}
	return l, nil
}

// Reconfigure answers every message from now on with runner, toolbox and opts, as New would
// have built them; the turns running keep what they began with to their end. opts' Queue,
// Scope, RateLimitPerMinute, Tools.ApprovalTimeout, Tools.MaxOpenQuestions and
// ShutdownDeliverWait are New's for the pipeline's life (the queue and the questions are not
// rebuilt): the caller names a change of them as needing a restart. retire, when not nil, runs
// on its own goroutine once no turn runs with the configuration replaced (a tool server the new
// one dropped can be closed then without cutting a call).
func (p *Pipeline) Reconfigure(runner Runner, toolbox Toolbox, opts Options, retire func()) error {
	if runner == nil {
		return errors.New("pipeline: a Runner is required")
	}
	if opts.Media.Reader == nil {
		opts.Media.Reader = p.first.Media.Reader
	}
	if err := opts.fill(); err != nil {
		return err
	}
	l, err := p.build(runner, toolbox, opts)
	if err != nil {
		return err
	}
	old := p.live.Swap(l)
	old.mu.Lock()
	old.retired, old.retire = true, retire
	done := old.running == 0
	old.mu.Unlock()
	if done && retire != nil {
		go retire()
	}
	return nil
}
