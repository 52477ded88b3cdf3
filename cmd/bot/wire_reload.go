package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"relaybot/agent"
	"relaybot/chat"
	"relaybot/config"
	"relaybot/coord"
	"relaybot/internal/lifecycle"
	"relaybot/metrics"
	"relaybot/pipeline"
	"relaybot/tools"
	"relaybot/tools/mcp"
)

// liveParts are what a reload rebuilds the turns' parts from (decision 054): the running config,
// the tool loaders that stay (native, plugins, memory's, skills), the MCP servers' loader, which a
// change of [[mcp.servers]] replaces, and every tool manager built, whose calls shutdown waits for.
type liveParts struct {
	// reloading keeps reloads one at a time (SIGHUP and the Settings page's button).
	reloading sync.Mutex
	cfg       atomic.Pointer[config.Config]

	loaders     []tools.Loader
	rec         tools.Recorder
	metrics     *metrics.Metrics
	skillPrompt func() string
	// modelClient and speechClient are kept across reloads: their idle connections stay warm.
	modelClient, speechClient *http.Client

	mu       sync.Mutex
	mcp      *mcp.Loader // nil: no MCP server
	manager  *tools.Manager
	managers []*tools.Manager
}

// start keeps what the first build made.
func (l *liveParts) start(cfg *config.Config, tl toolSet, rec tools.Recorder, m *metrics.Metrics) {
	l.cfg.Store(cfg)
	l.loaders, l.mcp, l.skillPrompt, l.rec, l.metrics = tl.loaders, tl.mcp, tl.skillPrompt, rec, m
	l.modelClient = modelHTTPClient(cfg.Chat.MaxTurnsInFlight)
	l.speechClient = modelHTTPClient(cfg.Chat.MaxTurnsInFlight)
}

// mcpLoader is the MCP servers' loader the next turn uses; nil when none is configured.
func (l *liveParts) mcpLoader() *mcp.Loader {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mcp
}

// closeMCP closes the MCP servers of the running config (at shutdown).
func (l *liveParts) closeMCP() {
	if ml := l.mcpLoader(); ml != nil {
		ml.Close()
	}
}

// health is the MCP servers' health (the admin's Servers page).
func (l *liveParts) health() []tools.ServerHealth {
	if ml := l.mcpLoader(); ml != nil {
		return ml.Health()
	}
	return nil
}

// mcpUp says which MCP servers are up (the metrics).
func (l *liveParts) mcpUp() map[string]bool {
	up := map[string]bool{}
	for _, h := range l.health() {
		up[h.Name] = h.State == tools.ServerUp
	}
	return up
}

// hasTool and toolNames answer for the tool manager of the running config (the metrics).
func (l *liveParts) hasTool(name string) bool { return l.current().Has(name) }
func (l *liveParts) toolNames() []string      { return l.current().Names() }

func (l *liveParts) current() *tools.Manager {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.manager
}

// allManagers are the tool managers ever built, the running one last.
func (l *liveParts) allManagers() []*tools.Manager {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.managers)
}

// use makes mgr and ml the tool manager and MCP loader of the next turns.
func (l *liveParts) use(mgr *tools.Manager, ml *mcp.Loader) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.manager, l.mcp = mgr, ml
	l.managers = append(l.managers, mgr)
}

// newManager builds the tool manager of cfg over the loaders that stay and ml (nil: no MCP).
func (b *bot) newManager(cfg *config.Config, ml *mcp.Loader) (*tools.Manager, error) {
	policy, err := tools.NewPolicy(cfg.Tools.Policy)
	if err != nil {
		return nil, err
	}
	loaders := slices.Clone(b.live.loaders)
	if ml != nil {
		loaders = append(loaders, ml)
	}
	mopts := managerOptions(cfg)
	mopts.Logger, mopts.Policy, mopts.Consents, mopts.Claim = b.log, policy, b.store.Consents, b.claimToolCall()
	return tools.NewManager(loaders, b.live.rec, mopts)
}

// errNoFile is a reload's error when the config was not read from a file.
var errNoFile = errors.New("the config was not read from a file: nothing to reload")

// reload reads the config file again (SIGHUP, the Settings page's Reload): a file config
// refuses is refused with its key and reason and the running config stays; otherwise the keys
// that may change live are taken by the next turns (the running ones end with what they began
// with), and those that need a restart keep their running value and are named.
func (b *bot) reload(ctx context.Context) (config.Changes, error) {
	l := &b.live
	l.reloading.Lock()
	defer l.reloading.Unlock()
	running := l.cfg.Load()
	if running.File == "" {
		b.log.Error("config reload refused", "err", errNoFile)
		return config.Changes{}, errNoFile
	}
	next, err := config.Load(running.File)
	if err != nil {
		b.log.Error("config reload refused; the running config stays", "err", err)
		return config.Changes{}, err
	}
	cfg, ch := config.Reconcile(running, next)
	if len(ch.Restart) > 0 {
		b.log.Warn("config reload: these keys need a restart; their running values stay", "keys", ch.Restart)
	}
	if len(ch.Applied) == 0 {
		b.log.Info("config reloaded: nothing to change live", "digest", cfg.Digest())
		return ch, nil
	}
	if err := b.apply(ctx, cfg, ch); err != nil {
		b.log.Error("config reload refused; the running config stays", "err", err)
		return config.Changes{}, err
	}
	l.cfg.Store(cfg)
	b.log.Info("config reloaded", "applied", ch.Applied, "digest", cfg.Digest())
	b.recordDigest(ctx, cfg)
	return ch, nil
}

// reloadAll reloads the config (reload) and announces it to the other replicas, which read
// their own files again; alone, it is reload.
func (b *bot) reloadAll(ctx context.Context) (config.Changes, error) {
	ch, err := b.reload(ctx)
	if r := b.replica; r != nil {
		if perr := r.PublishReload(ctx); perr != nil {
			b.log.Error("config reload: the other replicas were not told", "err", perr)
		}
	}
	return ch, err
}

// recordDigest writes the digest of the config this replica runs with where the Replicas page
// reads it; alone, nothing.
func (b *bot) recordDigest(ctx context.Context, cfg *config.Config) {
	if r := b.replica; r != nil {
		if err := r.SetConfigDigest(ctx, cfg.Digest()); err != nil {
			b.log.Warn("config digest not recorded; the next heartbeat writes it", "err", err)
		}
	}
}

// reloadOnAnnouncement is the part that reloads the config when another replica announces a
// reload (coord.Replica.ListenReloads).
func (b *bot) reloadOnAnnouncement(r *coord.Replica) lifecycle.Part {
	return lifecycle.Part{Name: "reload announcements", Run: func(ctx context.Context) error {
		return r.ListenReloads(ctx, func(from string) {
			b.log.Info("another replica reloaded its config; reading this one's again", "from", from)
			_, _ = b.reload(ctx) // logged by reload
		})
	}}
}

// apply builds the turns' parts of cfg and hands them to the pipeline: a change of
// [[mcp.servers]] starts the new servers' loader, and the old one is closed once no turn uses it.
func (b *bot) apply(ctx context.Context, cfg *config.Config, ch config.Changes) error {
	l := &b.live
	ml, retire := l.mcpLoader(), func() {}
	if slices.Contains(ch.Applied, "mcp.servers") {
		old := ml
		ml = nil
		if len(cfg.MCP.Servers) > 0 {
			ml = b.startMCP(ctx, cfg.MCP.Servers)
		}
		if old != nil {
			retire = old.Close
		}
	}
	mgr, err := b.newManager(cfg, ml)
	if err == nil {
		var runner *agent.Runner
		var opts pipeline.Options
		if runner, opts, err = b.turnOptions(cfg, ml); err == nil {
			err = b.pipe.Reconfigure(runner, mgr, opts, retire)
		}
	}
	if err != nil {
		if ml != nil && ml != l.mcpLoader() {
			ml.Close()
		}
		return err
	}
	l.use(mgr, ml)
	l.metrics.KnowModels(metricsModels(cfg))
	return nil
}

// reloadOnSignal is the part that reloads the config at each value of hup (SIGHUP).
func (b *bot) reloadOnSignal(hup <-chan os.Signal) lifecycle.Part {
	return lifecycle.Part{Name: "reload", Run: func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-hup:
				b.log.Info("SIGHUP: reloading the config")
				_, _ = b.reloadAll(ctx) // logged by reload
			}
		}
	}}
}

// botSettings is the bot's running config and its reload as the admin's Settings page takes them.
type botSettings struct{ b *bot }

// Running returns the config the bot runs with.
func (s botSettings) Running() *config.Config { return s.b.live.cfg.Load() }

// Prices are the running config's prices.
func (s botSettings) Prices() map[string]chat.Price { return prices(s.Running()) }

// Reload reloads the config file as SIGHUP does.
func (s botSettings) Reload(ctx context.Context) (config.Changes, error) { return s.b.reloadAll(ctx) }
