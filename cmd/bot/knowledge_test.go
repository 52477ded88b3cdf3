package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"relaybot/internal/testkit/files"
	"relaybot/internal/testkit/llm"
	tgkit "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
	"relaybot/pipeline/knowledge"
)

// knowledgeModel is the fake model of the knowledge tests: it calls search_knowledge with query
// (and base, when set) when a turn offers it (or always, with force), answers a tool result of
// passages with an answer citing [1] (and any other with "No passage: " and what it said), and
// keeps every request, so a test reads what each carried.
type knowledgeModel struct {
	mu    sync.Mutex
	query string
	base  string
	force bool
	turns []llm.Request
}

func (m *knowledgeModel) handle(req llm.Request) llm.Reply {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.turns = append(m.turns, req)
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "tool" {
		if strings.HasPrefix(last.Content, "[1] ") {
			return llm.Text("Sixteen weeks at full pay [1].")
		}
		return llm.Text("No passage: " + last.Content)
	}
	if m.query != "" && (m.force || slices.Contains(req.Tools, knowledge.ToolSearch)) {
		a := map[string]string{"query": m.query}
		if m.base != "" {
			a["base"] = m.base
		}
		args, _ := json.Marshal(a)
		return llm.ToolCalls(llm.Call{ID: "call_1", Name: knowledge.ToolSearch, Args: []string{string(args)}})
	}
	return llm.Text("ok")
}

// setBase makes the model's calls name base.
func (m *knowledgeModel) setBase(base string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.base = base
}

func (m *knowledgeModel) requests() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.turns)
}

const handbookMD = `# Handbook

Welcome to the company.

## Leave

### Parental leave

Parents get sixteen weeks of parental leave at full pay.

## Expenses

Receipts are filed within thirty days through the expenses portal.
`

// knowledgeEnv is a bot with one base, "handbook", of mode and chats as given, holding
// handbook.md (added with bot knowledge add).
func knowledgeEnv(t *testing.T, mode string, chats []string, query string) (*env, *knowledgeModel, *tomlConfig) {
	e := newEnv(t)
	km := &knowledgeModel{query: query}
	e.llm.SetHandler(km.handle)
	c := e.toml().set("embeddings", "base_url", e.llm.URL, "model", "embed-a").
		set("knowledge.bases", "name", "handbook", "description", "the staff handbook", "chats", chats, "mode", mode, "max_tokens", 400)
	path := filepath.Join(t.TempDir(), "handbook.md")
	if err := os.WriteFile(path, []byte(handbookMD), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runMigrate(context.Background(), c.parse(t), nil, &out); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runKnowledge(context.Background(), c.parse(t), []string{"add", "-base", "handbook", path}, &out); err != nil {
		t.Fatalf("bot knowledge add: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "added as document 1 of handbook (markdown") {
		t.Fatalf("bot knowledge add printed %q", out.String())
	}
	return e, km, c
}

func TestAMarkdownFactIsFoundWithItsHeadingAndTheSearchIsAudited(t *testing.T) {
	e, km, c := knowledgeEnv(t, "tool", []string{"telegram:42"}, "parental leave weeks")
	stop := e.start(c.parse(t))
	e.say(42, "how long is parental leave?")
	e.waitBotText(42, "the cited answer", contains("Sixteen weeks at full pay [1]."))
	// The final answer ends with its Sources, folded in an expandable quote.
	wait.For(t, "the answer's folded Sources", func() bool {
		for _, m := range e.tg.BotMessages(42) {
			i := strings.Index(m.Text, "📚 Sources\n[1] handbook.md › Handbook › Leave › Parental leave")
			if i > 0 && slices.ContainsFunc(m.Entities, func(en tgkit.Entity) bool {
				return en.Type == "expandable_blockquote" && en.Offset >= utf16Len(m.Text[:i])-1
			}) {
				return true
			}
		}
		return false
	})
	var tool string
	for _, r := range km.requests() {
		if m := r.Messages[len(r.Messages)-1]; m.Role == "tool" {
			tool = m.Content
		}
	}
	if !strings.HasPrefix(tool, "[1] handbook.md › Handbook › Leave › Parental leave (chunk ") || !strings.Contains(tool, "sixteen weeks") {
		t.Fatalf("search_knowledge returned %q, want the passage numbered with its heading path", tool)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	_, r := e.openStore().Pools()
	var status, args, result string
	if err := r.QueryRow(`SELECT status, arguments, result FROM tool_calls WHERE tool_name = 'search_knowledge'`).Scan(&status, &args, &result); err != nil {
		t.Fatalf("the search's audit row: %v", err)
	}
	if status != "ok" || !strings.Contains(args, "parental leave weeks") || !strings.Contains(result, "(chunk ") {
		t.Fatalf("the audit row is %s, arguments %s, result %q: want the query and the chunk ids", status, args, result)
	}
}

func TestAPDFFactIsFoundWithItsPage(t *testing.T) {
	e, km, c := knowledgeEnv(t, "tool", nil, "visitor badges office")
	path := filepath.Join(t.TempDir(), "policies.pdf")
	pdf := files.PDF([][]string{
		{"Travel policy", "Book trains for journeys under four hours."},
		{"Security policy", "Visitor badges are worn at all times in the office."},
		{"Printing policy", "Print on both sides of the paper."},
	})
	if err := os.WriteFile(path, pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runKnowledge(context.Background(), c.parse(t), []string{"add", "-base", "handbook", path}, &out); err != nil ||
		!strings.Contains(out.String(), "added as document 2 of handbook (pdf, 3 pages") {
		t.Fatalf("bot knowledge add of a PDF: %v\n%s", err, out.String())
	}
	stop := e.start(c.parse(t))
	e.say(42, "do visitors wear badges?")
	e.waitBotText(42, "the answer's Sources", contains("[1] policies.pdf, page 2"))
	var tool string
	for _, r := range km.requests() {
		if m := r.Messages[len(r.Messages)-1]; m.Role == "tool" {
			tool = m.Content
		}
	}
	if !strings.HasPrefix(tool, "[1] policies.pdf, page 2 (chunk ") || !strings.Contains(tool, "Visitor badges are worn") {
		t.Fatalf("search_knowledge returned %q, want the security page first, cited by its page", tool)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestAChatOutsideEveryBaseIsNeitherOfferedTheToolNorServedWhenItCallsIt(t *testing.T) {
	e, km, c := knowledgeEnv(t, "tool", []string{"telegram:-100123"}, "parental leave")
	km.force = true
	stop := e.start(c.parse(t))
	e.say(42, "how long is parental leave?")
	wait.For(t, "the tool's answer", func() bool {
		for _, r := range km.requests() {
			if m := r.Messages[len(r.Messages)-1]; m.Role == "tool" {
				return true
			}
		}
		return false
	})
	for _, r := range km.requests() {
		if slices.Contains(r.Tools, knowledge.ToolSearch) {
			t.Fatal("search_knowledge was offered in a chat no base serves")
		}
		if m := r.Messages[len(r.Messages)-1]; m.Role == "tool" && strings.Contains(m.Content, "sixteen") {
			t.Fatalf("a chat outside the base's scope read its chunk: %q", m.Content)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	_, r := e.openStore().Pools()
	var status string
	if err := r.QueryRow(`SELECT status FROM tool_calls WHERE tool_name = 'search_knowledge'`).Scan(&status); err != nil {
		t.Fatalf("the refused call's audit row: %v", err)
	}
	if status == "ok" {
		t.Fatal("the call of a tool not offered in the chat ran")
	}
}

func TestAnAutoBasePutsItsChunksIntoTheTurnWithoutAToolCall(t *testing.T) {
	e, km, c := knowledgeEnv(t, "auto", nil, "")
	stop := e.start(c.parse(t))
	e.say(42, "how long is parental leave?")
	e.waitBotText(42, "the answer", contains("ok"))
	reqs := km.requests()
	msgs := reqs[len(reqs)-1].Messages
	n := len(msgs)
	if n < 3 || msgs[n-1].Role != "user" || msgs[n-2].Role != "system" || !strings.HasPrefix(msgs[n-2].Content, knowledge.BlockStart) {
		t.Fatalf("the turn's request does not end with the knowledge block before the user's message: %+v", msgs)
	}
	if !strings.Contains(msgs[n-2].Content, "[1] handbook.md › Handbook › Leave › Parental leave") {
		t.Fatalf("the block holds %q, want the parental leave passage numbered", msgs[n-2].Content)
	}
	if slices.Contains(reqs[0].Tools, knowledge.ToolSearch) {
		t.Fatal("an auto base offered search_knowledge too")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestBotKnowledgeRefusesWhatIsOverALimitAndRemovesDocuments(t *testing.T) {
	e, _, c := knowledgeEnv(t, "tool", nil, "")
	c.set("knowledge", "max_file_bytes", 400)
	cfg := c.parse(t)
	ctx := context.Background()
	dir := t.TempDir()
	big := filepath.Join(dir, "big.md")
	odd := filepath.Join(dir, "tool.exe")
	huge := filepath.Join(dir, "huge.md")
	os.WriteFile(big, bytes.Repeat([]byte("sixteen weeks "), 100), 0o600)
	os.WriteFile(odd, []byte("MZ\x90\x00\x03\x00\x00\x00\x04\x00binary"), 0o600)
	// 1 GB that takes no disk (a sparse file): refused from its size, none of it read.
	if err := os.WriteFile(huge, nil, 0o600); err != nil || os.Truncate(huge, 1<<30) != nil {
		t.Fatal("cannot make a sparse file of 1 GB")
	}
	var out bytes.Buffer
	err := runKnowledge(ctx, cfg, []string{"add", "-base", "handbook", big, odd, huge}, &out)
	if err == nil || !strings.Contains(out.String(), "big.md: the file has 1400 bytes, more than knowledge.max_file_bytes (400 bytes)") ||
		!strings.Contains(out.String(), "tool.exe: refused") ||
		!strings.Contains(out.String(), "huge.md: refused: huge.md: the file has 1024 MB, more than knowledge.max_file_bytes (400 bytes)") {
		t.Fatalf("bot knowledge add of an oversized, an unknown and a 1 GB file: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := runKnowledge(ctx, cfg, []string{"list", "-json"}, &out); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 1 || !strings.Contains(lines[0], `"name":"handbook.md"`) {
		t.Fatalf("after the refusals bot knowledge list printed %q, want handbook.md alone", out.String())
	}
	out.Reset()
	if err := runKnowledge(ctx, cfg, []string{"search", "-base", "handbook", "parental", "leave"}, &out); err != nil || !strings.Contains(out.String(), "[1] handbook.md › Handbook › Leave › Parental leave") {
		t.Fatalf("bot knowledge search: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := runKnowledge(ctx, cfg, []string{"remove", "-base", "handbook", "1"}, &out); err != nil || !strings.Contains(out.String(), "removed document 1 (handbook.md") {
		t.Fatalf("bot knowledge remove: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := runKnowledge(ctx, cfg, []string{"search", "-base", "handbook", "parental", "leave"}, &out); err != nil || strings.TrimSpace(out.String()) != "nothing found" {
		t.Fatalf("after the remove bot knowledge search: %v\n%s", err, out.String())
	}
	_ = e
}

func TestAChangedEmbeddingModelReembedsTheChunks(t *testing.T) {
	e, _, c := knowledgeEnv(t, "tool", nil, "")
	e.llm.SetEmbeddingDims("embed-b", 24)
	stop := e.start(c.set("embeddings", "model", "embed-b").parse(t))
	e.waitLog(`knowledge: every chunk has a vector" space=embed-b/24`)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	_, r := e.openStore().Pools()
	var models string
	if err := r.QueryRow(`SELECT group_concat(DISTINCT model) FROM retrieval_vectors`).Scan(&models); err != nil {
		t.Fatal(err)
	}
	if models != "embed-b" {
		t.Fatalf("the chunks' vectors are of %q, want embed-b only", models)
	}
}

// utf16Len is the length of s in UTF-16 units, as Telegram's entity offsets count.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r > 0xFFFF {
			n++
		}
	}
	return n
}

// An admin renames a base in config.toml: bot knowledge list shows its documents as the old
// base's, not in config.toml, with the command that moves them; bot knowledge rename moves them,
// and the bot answers from them under the new name; removed, they are found no more.
func TestARenamedBasesDocumentsAreListedThenMovedByBotKnowledgeRename(t *testing.T) {
	e, _, c := knowledgeEnv(t, "tool", nil, "parental leave weeks")
	cfg := c.set("knowledge.bases", "name", "staff").parse(t)
	ctx := context.Background()
	var out bytes.Buffer
	if err := runKnowledge(ctx, cfg, []string{"list"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "handbook (not in config.toml)  handbook.md") ||
		!strings.Contains(out.String(), "bot knowledge rename -from handbook -to NEW_NAME") {
		t.Fatalf("bot knowledge list after the base was renamed printed:\n%s\nwant handbook.md under handbook, not in config.toml, and the rename command", out.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rename", "-from", "handbook", "-to", "nope"}, `no base "nope" in config.toml`},
		{[]string{"rename", "-from", "staff", "-to", "staff"}, `base "staff" is still in config.toml`},
		{[]string{"rename", "-from", "gone", "-to", "staff"}, `no document is filed under base "gone"`},
	} {
		out.Reset()
		if err := runKnowledge(ctx, cfg, tc.args, &out); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bot knowledge %s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	out.Reset()
	if err := runKnowledge(ctx, cfg, []string{"rename", "-from", "handbook", "-to", "staff"}, &out); err != nil ||
		!strings.Contains(out.String(), "moved 1 documents (") {
		t.Fatalf("bot knowledge rename: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := runKnowledge(ctx, cfg, []string{"list", "-json"}, &out); err != nil || strings.Contains(out.String(), "orphan") ||
		!strings.Contains(out.String(), `"base":"staff","name":"handbook.md"`) {
		t.Fatalf("bot knowledge list -json after the rename: %v\n%s", err, out.String())
	}
	stop := e.start(cfg)
	e.say(42, "how long is parental leave?")
	e.waitBotText(42, "the answer from the renamed base", contains("Sixteen weeks at full pay [1]."))
	// Removed by the CLI while the bot runs (another process, as an admin would), the document
	// is no longer found in the chat.
	out.Reset()
	if err := runKnowledge(ctx, cfg, []string{"remove", "-base", "staff", "1"}, &out); err != nil {
		t.Fatalf("bot knowledge remove: %v\n%s", err, out.String())
	}
	e.say(42, "and parental leave again?")
	e.waitBotText(42, "the answer once the document is removed", contains("No passage: Nothing in the knowledge bases matches."))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(e.logs.String(), "a base config.toml does not name holds documents") {
		t.Fatalf("after the rename the bot still warned of orphaned documents:\n%s", e.logs.String())
	}
}
