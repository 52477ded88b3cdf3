package deps

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"
)

// module is the module path every rule below is relative to.
const module = "relaybot"

// mayImport says, for every package of the module, which packages of the module it may import
// (its own tests excepted). A key ending in "/..." covers the packages below it that have no
// key of their own. A package the map does not cover fails the test: a new package states its
// place in the layers when it is added. The layers, bottom up: the nouns (chat, audit), the
// contracts (adapters, tools), the parts (agent, store, coord, delivery, the platforms), the
// pipeline and its observers, and cmd/bot, the only place that wires them together.
var mayImport = map[string][]string{
	// Nouns and leaves: they import nothing of the module.
	"chat":               nil,
	"audit":              nil,
	"migrations":         nil,
	"media":              nil,
	"media/audio":        nil,
	"internal/deps":      nil,
	"internal/ellipsis":  nil,
	"internal/lifecycle": nil,
	"internal/logredact": nil,
	"internal/outbound":  nil, // the guarded client for HTTP to servers we do not control

	// The admin's rules as one value each (a tool policy rule, a quota's limits): written in
	// config.toml, obeyed by tools and pipeline/quota.
	"policy": {"audit"},
	// The file's shape: the values that are one thing in the file and in a part are the nouns'
	// own types (a model endpoint, a policy rule, a quota's limits), so config sits on the noun
	// leaves; what is a part's options stays the part's, copied in cmd/bot.
	"config": {"chat", "policy", "provider"},

	// The platforms: they know nothing of the agent, the store, the pipeline or the tools.
	"adapters":                       {"chat"},
	"adapters/markdown":              nil,
	"adapters/adapterstest":          {"adapters", "chat"},
	"adapters/delivery":              {"adapters", "chat", "internal/ellipsis"},
	"adapters/delivery/deliverytest": {"adapters", "adapters/delivery", "chat"},
	"adapters/telegram":              platform,
	"adapters/discord":               platform,
	"adapters/web":                   platform,

	// The reader process of untrusted bytes: the readers it runs, nothing else.
	"media/sandbox": {"media", "media/audio"},
	// A knowledge base's documents into chunks: a leaf over the readers of untrusted bytes.
	"knowledge/extract": {"media", "media/sandbox"},

	// The tools know no platform, no pipeline and no store: they report to an audit recorder.
	"tools":           {"audit", "chat", "policy"},
	"tools/...":       {"audit", "chat", "policy", "tools", "tools/...", "internal/logredact", "internal/outbound"},
	"tools/toolstest": {"audit", "chat", "policy", "tools"},

	// The agent and the store know no platform; the store knows no agent, pipeline or tools.
	// provider is the model client noun: every caller of a model (the agent's runner, speech)
	// speaks to its endpoint through it, and none of them through another's loop.
	"provider": {"chat"},
	"agent":    {"audit", "chat", "provider", "tools"},
	"speech":   {"audit", "chat", "provider"},
	// The retrieval layer (embeddings, vectors, keyword search) that memory and knowledge
	// bases share; it owns its tables and takes the store's pools from its caller.
	"retrieval":       {"chat", "provider"},
	"store":           {"audit", "chat", "migrations"},
	"store/storetest": {"audit", "chat", "migrations", "store", "store/internal/testdb"},
	// A test's own database (a file or a PostgreSQL schema), for store's tests and storetest.
	"store/internal/testdb": {},

	// The deployment: the platforms' contract (adapters) and the nouns, no platform and no
	// delivery engine; its consumers own the roles it plays.
	"coord": {"adapters", "chat", "migrations", "store"},

	// Reminders and scheduled tasks: their rows (store), the tools' turn info (tools), and the
	// adapters' contract to deliver a run or hand a prompt to the pipeline's Handler; no
	// platform, no delivery engine and no pipeline of their own.
	"tasks": {"adapters", "chat", "store", "tools"},

	// The pipeline takes its own options (cmd/bot converts the config) and knows no platform
	// but through the adapters' contract. Its parts (history, quota, asking) may use each
	// other, never the pipeline package itself.
	"pipeline":     append(slices.Clone(pipeline), "pipeline/..."),
	"pipeline/...": append(slices.Clone(pipeline), "pipeline/..."),
	// Knowledge bases read the admins' documents through the reader of untrusted documents.
	"pipeline/knowledge": append(slices.Clone(pipeline), "pipeline/...", "knowledge/extract"),

	// Observers of the pipeline: they take its events and the nouns, never the store.
	"metrics": observer,
	"tracing": observer,

	// The audit log's pages and API read the store, list coord's replicas and show the tool
	// servers' health (tools.ServerHealth, as the MCP loader reports it); the memory pages read
	// and delete memory's facts; the knowledge pages and API add, list, delete and search the
	// knowledge bases' documents; the Settings page shows config's settings of the running config
	// (config.Setting, decision 054).
	"admin": {"audit", "chat", "config", "coord", "internal/ellipsis", "pipeline/knowledge", "pipeline/memory", "store", "tools"},

	// Binaries wire everything.
	"cmd/bot":      {"..."},
	"cmd/loadtest": {"..."},

	// The fakes speak the platforms' wire protocols; they import none of the bot.
	"internal/testkit/...": {"internal/testkit/..."},
}

var (
	platform = []string{"adapters", "adapters/delivery", "adapters/markdown", "chat", "internal/ellipsis", "internal/logredact"}
	pipeline = []string{"adapters", "adapters/markdown", "agent", "audit", "chat", "internal/ellipsis", "media", "media/sandbox", "policy", "provider", "retrieval", "speech", "store", "tools"}
	observer = []string{"adapters", "adapters/delivery", "agent", "audit", "chat", "pipeline", "pipeline/...", "provider", "tools"}
)

// exceptions are imports that break a rule today, each with why it still stands. The test
// fails when one of them is gone, so the list only shrinks.
var exceptions = map[[2]string]string{}

// pkg is what go list tells of a package.
type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Error      *struct{ Err string }
}

// listModule lists the packages of the module with their imports.
func listModule(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Dir,GoFiles,Imports,Error", module+"/...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no package")
	}
	return pkgs
}

// rel returns p relative to the module, and whether it is in the module.
func rel(p string) (string, bool) {
	if p == module {
		return "", true
	}
	r, ok := strings.CutPrefix(p, module+"/")
	return r, ok
}

// rule returns the allowed imports of pkg, and whether the map covers it: its own key, or
// the longest "dir/..." above it.
func rule(p string) ([]string, bool) {
	if may, ok := mayImport[p]; ok {
		return may, true
	}
	for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
		if may, ok := mayImport[dir+"/..."]; ok {
			return may, true
		}
	}
	return nil, false
}

// allowed reports whether imp matches one of may's entries: a package, "dir/..." (the
// packages below dir) or "..." (any).
func allowed(may []string, imp string) bool {
	for _, m := range may {
		switch {
		case m == "..." || m == imp:
			return true
		case strings.HasSuffix(m, "/..."):
			if strings.HasPrefix(imp, strings.TrimSuffix(m, "...")) {
				return true
			}
		}
	}
	return false
}

func TestEveryPackageImportsOnlyWhatItsLayerMay(t *testing.T) {
	seen := map[[2]string]bool{}
	for _, p := range listModule(t) {
		from, _ := rel(p.ImportPath)
		may, ok := rule(from)
		if !ok {
			t.Errorf("package %s is not in the import rules (internal/deps/deps_test.go): say what it may import", from)
			continue
		}
		for _, imp := range p.Imports {
			to, inModule := rel(imp)
			if !inModule || allowed(may, to) {
				continue
			}
			edge := [2]string{from, to}
			if _, ok := exceptions[edge]; ok {
				seen[edge] = true
				continue
			}
			t.Errorf("%s imports %s, which its layer may not (it may import: %s)", from, to, list(may))
		}
	}
	for edge, why := range exceptions {
		if !seen[edge] {
			t.Errorf("%s no longer imports %s: remove the exception (%s)", edge[0], edge[1], why)
		}
	}
}

func list(may []string) string {
	if len(may) == 0 {
		return "nothing of the module"
	}
	s := slices.Clone(may)
	sort.Strings(s)
	return strings.Join(s, ", ")
}
