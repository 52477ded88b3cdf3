package deps

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"relaybot/migrations"
)

// tableOwner says which package owns each table of the schema: its migrations are in the one
// numbered list (package migrations), and only its owner writes to it. Others may read it.
var tableOwner = map[string]string{
	// The conversations and their audit log.
	"conversations":       "store",
	"turns":               "store",
	"messages":            "store",
	"messages_fts":        "store", // SQLite's keyword index of messages, kept by triggers (migration 00037)
	"tool_calls":          "store",
	"llm_calls":           "store",
	"llm_calls_new":       "store", // a SQLite table rebuild's (migration 00018)
	"llm_calls_old":       "store",
	"tool_consents":       "store",
	"web_sessions":        "store",
	"web_messages":        "store",
	"turn_files":          "store", // a turn's files for the conversation page (migration 00049)
	"overview_hours":      "store", // the admin overview's hourly roll-up (migration 00050)
	"overview_rollup":     "store",
	"admin_sessions":      "store",
	"mcp_oauth_tokens":    "store",
	"mcp_oauth_states":    "store",
	"mcp_server_tools":    "store", // the tools each MCP server listed last (mcp.ToolMemory, migration 00052)
	"mcp_tasks_in_flight": "store", // MCP tasks of calls in flight, cancelled after a crash (mcp.TaskBook, migration 00053)
	// Reminders and scheduled tasks (package tasks asks store.TaskQuery).
	"tasks":          "store",
	"task_runs":      "store",
	"user_timezones": "store",

	// The retrieval layer: texts, keyword postings and vectors of every collection.
	"retrieval_docs":       "retrieval",
	"retrieval_vectors":    "retrieval",
	"retrieval_codes":      "retrieval",
	"retrieval_owners":     "retrieval",
	"retrieval_docs_fts":   "retrieval", // SQLite's keyword index (FTS4)
	"retrieval_docs_terms": "retrieval", // its words' counts (fts4aux)

	// Memory: each person's facts and the audit of their writes and deletes.
	"memory_facts": "pipeline/memory",
	"memory_audit": "pipeline/memory",

	// Knowledge bases: the documents added to each base and where each chunk stands.
	"knowledge_documents": "pipeline/knowledge",
	"knowledge_chunks":    "pipeline/knowledge",

	// The deployment of replicas.
	"instances":        "coord",
	"inbound_ledger":   "coord",
	"turn_queue":       "coord",
	"lease_holders":    "coord",
	"chat_budgets":     "coord",
	"chat_deliveries":  "coord",
	"reply_messages":   "coord",
	"web_watchers":     "coord",
	"web_relay_events": "coord",
	"questions":        "coord",
	"question_presses": "coord",
	"stop_requests":    "coord",
}

var (
	createTable = regexp.MustCompile(`(?i)\bCREATE\s+(?:VIRTUAL\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_][a-z0-9_]*)`)
	// writeSQL finds the statements that write a table, in the upper case the module writes
	// SQL in ("ON CONFLICT ... DO UPDATE SET" names no table).
	writeSQL = regexp.MustCompile(`\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+([a-z_][a-z0-9_]*)`)
)

func TestEveryTableHasAnOwner(t *testing.T) {
	created := map[string]bool{}
	for _, dialect := range []string{"sqlite", "postgres"} {
		fsys, err := migrations.For(dialect)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := fs.ReadDir(fsys, ".")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			sql, err := fs.ReadFile(fsys, e.Name())
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range createTable.FindAllStringSubmatch(string(sql), -1) {
				table := strings.ToLower(m[1])
				created[table] = true
				if _, ok := tableOwner[table]; !ok {
					t.Errorf("migration %s (%s) creates table %s, which has no owner in internal/deps/tables_test.go", e.Name(), dialect, table)
				}
			}
		}
	}
	for table := range tableOwner {
		if !created[table] {
			t.Errorf("table %s has an owner but no migration creates it", table)
		}
	}
}

func TestOnlyItsOwnerWritesATable(t *testing.T) {
	for _, p := range listModule(t) {
		from, _ := rel(p.ImportPath)
		for _, name := range p.GoFiles {
			src, err := os.ReadFile(filepath.Join(p.Dir, name))
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range writeSQL.FindAllStringSubmatch(string(src), -1) {
				table := m[1]
				owner, ok := tableOwner[table]
				if !ok {
					continue // not a table of ours: a word in a comment
				}
				if from != owner && !strings.HasPrefix(from, owner+"/") {
					t.Errorf("%s/%s writes table %s, which %s owns: ask %s to write it", from, name, table, owner, owner)
				}
			}
		}
	}

}
