package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"relaybot/admin"
	"relaybot/agent"
	"relaybot/chat"
	"relaybot/config"
	"relaybot/coord"
	"relaybot/internal/lifecycle"
	"relaybot/metrics"
	"relaybot/pipeline"
	"relaybot/pipeline/knowledge"
	"relaybot/pipeline/memory"
	"relaybot/tools"
	"relaybot/tools/mcp"
)

// liveParts are what a reload rebuilds the turns' parts from (decisions 054, 062): the running
// config, the tool loaders built once (plugins, skills), the parts rebuilt when their sections
// change (turnParts), and every tool manager built, whose calls shutdown waits for.
type liveParts struct {
	// reloading keeps reloads one at a time (SIGHUP and the Settings page's button).
	reloading sync.Mutex
	cfg       atomic.Pointer[config.Config]

	// fixed are the plugins' and the skills' loaders, in dispatch order.
	fixed       []tools.Loader
	rec         tools.Recorder
	metrics     *metrics.Metrics
	skillPrompt func() string
	// modelClient and speechClient are kept across reloads: their idle connections stay warm.
	modelClient, speechClient *http.Client
	// reindex runs memory's and the knowledge bases' background re-embedding: the latest handle's
	// of each, the one it replaced cancelled.
	reindex *lifecycle.Latest
	// reloaded tell the parts built once of a reload's config (the platforms' allow lists).
	reloaded []func(*config.Config)

	mu       sync.Mutex
	parts    turnParts
	manager  *tools.Manager
	managers []*tools.Manager
}

// turnParts are the parts the turns' tools and options are built over that a reload builds anew
// when their sections change; a turn keeps the ones it began with.
type turnParts struct {
	// native are the built-in tools ([tools] native, fetch_allow_private, [tools.web_search],
	// [tools.images]).
	native tools.Loader
	// memory is nil when [memory] is off; knowledge nil without [[knowledge.bases]]; mcp nil
	// without [[mcp.servers]].
	memory    *memory.Memory
	knowledge *knowledge.Knowledge
	mcp       *mcp.Loader
}

// loaders are the tool loaders over p in dispatch order: native, the knowledge bases', memory's,
// fixed (plugins, skills), MCP.
func (p turnParts) loaders(fixed []tools.Loader) []tools.Loader {
	out := []tools.Loader{p.native}
	if p.knowledge != nil {
		out = append(out, p.knowledge.Tools())
	}
	if p.memory != nil {
		out = append(out, p.memory.Tools())
	}
	out = append(out, fixed...)
	if p.mcp != nil {
		out = append(out, p.mcp)
	}
	return out
}

// start keeps what the first build made.
func (l *liveParts) start(cfg *config.Config, tl toolSet, rec tools.Recorder, m *metrics.Metrics) {
	l.cfg.Store(cfg)
	l.fixed, l.skillPrompt, l.rec, l.metrics = tl.loaders, tl.skillPrompt, rec, m
	l.modelClient = modelHTTPClient(cfg.Chat.MaxTurnsInFlight)
	l.speechClient = modelHTTPClient(cfg.Chat.MaxTurnsInFlight)
	l.reindex = lifecycle.NewLatest()
}

// onReload has fn told of each config a reload applies.
func (l *liveParts) onReload(fn func(*config.Config)) { l.reloaded = append(l.reloaded, fn) }

// turnParts are the parts the next turn uses.
func (l *liveParts) turnParts() turnParts {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.parts
}

// mcpLoader is the MCP servers' loader the next turn uses; nil when none is configured.
func (l *liveParts) mcpLoader() *mcp.Loader { return l.turnParts().mcp }

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

// recall is the memory and the knowledge bases of the running config as the admin's pages take
// them.
func (l *liveParts) recall() admin.Recall {
	p := l.turnParts()
	return admin.Recall{Memory: p.memory, Knowledge: p.knowledge,
		// An upload's body: the file and the form around it.
		KnowledgeUploadBytes: l.cfg.Load().Knowledge.MaxFileBytes + 64<<10}
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

// use makes mgr and p the tool manager and the parts of the next turns.
func (l *liveParts) use(mgr *tools.Manager, p turnParts) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.manager, l.parts = mgr, p
	l.managers = append(l.managers, mgr)
}

// newManager builds the tool manager of cfg over the loaders of p and the fixed ones.
func (b *bot) newManager(cfg *config.Config, p turnParts) (*tools.Manager, error) {
	policy, err := tools.NewPolicy(cfg.Tools.Policy)
	if err != nil {
		return nil, err
	}
	mopts := managerOptions(cfg)
	mopts.Logger, mopts.Policy, mopts.Consents, mopts.Claim = b.log, policy, b.store.Consents, b.claimToolCall()
	return tools.NewManager(p.loaders(b.live.fixed), b.live.rec, mopts)
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

// apply builds the turns' parts of cfg and hands them to the pipeline: the parts whose sections
// changed are built anew (rebuild), and those they replace are closed once no turn uses them.
func (b *bot) apply(ctx context.Context, cfg *config.Config, ch config.Changes) error {
	l := &b.live
	old := l.turnParts()
	p, err := b.rebuild(ctx, cfg, ch, old)
	if err != nil {
		return err
	}
	mgr, err := b.newManager(cfg, p)
	if err == nil {
		var runner *agent.Runner
		var opts pipeline.Options
		if runner, opts, err = b.turnOptions(cfg, p); err == nil {
			err = b.pipe.Reconfigure(runner, mgr, opts, func() { retire(old, p) })
		}
	}
	if err != nil {
		retire(p, old)
		return err
	}
	l.use(mgr, p)
	for _, fn := range l.reloaded {
		fn(cfg)
	}
	b.reindex(cfg, old, p)
	l.metrics.KnowModels(metricsModels(cfg))
	return nil
}

// rebuild builds anew the parts of old whose sections ch changed; the others are old's.
func (b *bot) rebuild(ctx context.Context, cfg *config.Config, ch config.Changes, old turnParts) (turnParts, error) {
	p := old
	obs := b.tracing.Models(b.live.metrics)
	var err error
	if ch.Touches("tools.native", "tools.fetch_allow_private", "tools.web_search.", "tools.images.") {
		if p.native, err = b.newNative(cfg); err != nil {
			return old, err
		}
	}
	// memory.model names a [[models]] entry: a change of the models may change its endpoint.
	if ch.Touches("memory.", "embeddings.", "models") {
		if p.memory, err = b.newMemory(ctx, cfg, obs); err != nil {
			return old, err
		}
	}
	if ch.Touches("knowledge.", "embeddings.") {
		if p.knowledge, err = b.newKnowledge(ctx, cfg, obs); err != nil {
			return old, err
		}
	}
	if ch.Touches("mcp.servers") {
		p.mcp = nil
		if len(cfg.MCP.Servers) > 0 {
			p.mcp = b.startMCP(ctx, cfg.MCP.Servers, old.mcp, unchangedServers(b.live.cfg.Load().MCP.Servers, cfg.MCP.Servers))
		}
	}
	return p, nil
}

// unchangedServers are the names of the MCP servers next configures as running does: a reload
// keeps their connections.
func unchangedServers(running, next []config.MCPServer) []string {
	var out []string
	for _, n := range next {
		i := slices.IndexFunc(running, func(r config.MCPServer) bool { return r.Name == n.Name })
		if i >= 0 && reflect.DeepEqual(running[i], n) {
			out = append(out, n.Name)
		}
	}
	return out
}

// retire closes what old holds that next does not: the MCP servers' loader replaced, which
// disconnects the servers the new one does not hold.
func retire(old, next turnParts) {
	if old.mcp != nil && old.mcp != next.mcp {
		old.mcp.Close()
	}
}

// reindex starts the background re-embedding of the memory and the knowledge bases of p built
// anew since old (at the start, every one), replacing the one the old handle ran; a part turned
// off, or left without [embeddings], has none.
func (b *bot) reindex(cfg *config.Config, old, p turnParts) {
	embeds := len(cfg.Embeddings.Candidates()) > 0
	if mem := p.memory; mem != old.memory {
		var run func(context.Context)
		if mem != nil && embeds {
			run = func(ctx context.Context) { reindexMemory(ctx, mem, b.log) }
		}
		b.live.reindex.Start("memory", run)
	}
	if k := p.knowledge; k != old.knowledge {
		var run func(context.Context)
		if k != nil && embeds {
			run = func(ctx context.Context) { reindexKnowledge(ctx, k, b.log) }
		}
		b.live.reindex.Start("knowledge", run)
	}
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
