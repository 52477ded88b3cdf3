package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"relaybot/config"
	"relaybot/pipeline/knowledge"
)

// knowledgeUsage is bot knowledge's help.
const knowledgeUsage = `usage: bot knowledge [-config PATH] <add|list|remove|search|reindex|rename> [flags]

  add -base NAME FILE...           read files into a base (PDF, Markdown, HTML, CSV, text), with progress
  list [-base NAME] [-json]        the documents of a base (of every base without -base, and of
                                   bases config.toml no longer names)
  remove -base NAME ID             delete a document: its rows, chunks and vectors
  search -base NAME QUERY          what the bot would find, numbered as the model sees it
  reindex                          give every chunk a vector of the [embeddings] model, with progress
  rename -from OLD -to NEW         after renaming a base in config.toml, move its documents (with
                                   their vectors) from the old name to the new one

A file over knowledge.max_file_bytes, max_pages or max_text_bytes, of a format the bases do not
read, or beyond a base's max_documents is refused, and nothing of it is stored. Documents of a base
config.toml no longer names are kept but never searched: move them with rename, or delete them
with remove -base OLD ID.`

// runKnowledge is `bot knowledge`: admins add, list, remove and try the bases' documents.
func runKnowledge(ctx context.Context, cfg *config.Config, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stdout, knowledgeUsage)
		return fmt.Errorf("%w: bot knowledge needs add, list, remove, search, reindex or rename", errUsage)
	}
	fs := flag.NewFlagSet("knowledge "+args[0], flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() { fmt.Fprintln(fs.Output(), knowledgeUsage) }
	baseF := fs.String("base", "", "the base's name, as [[knowledge.bases]] names it")
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	fromF := fs.String("from", "", "rename: the base's old name")
	toF := fs.String("to", "", "rename: the base's name in config.toml")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if len(cfg.Knowledge.Bases) == 0 {
		return errors.New("no [[knowledge.bases]] is configured")
	}
	// list and remove also take a base config.toml no longer names, whose documents are kept.
	orphanOK := args[0] == "list" || args[0] == "remove"
	if *baseF != "" && !hasBase(cfg, *baseF) && !orphanOK {
		return fmt.Errorf("%w: no base %q (config.toml names %s)", errUsage, *baseF, baseNames(cfg))
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	emb, err := newEmbedder(cfg, nil)
	if err != nil {
		return err
	}
	k, err := openKnowledge(ctx, cfg, st, emb, nil)
	if err != nil {
		return err
	}
	needBase := func() error {
		if *baseF == "" {
			return fmt.Errorf("%w: bot knowledge %s needs -base NAME", errUsage, args[0])
		}
		return nil
	}
	switch args[0] {
	case "add":
		if err := needBase(); err != nil {
			return err
		}
		return addKnowledge(ctx, k, *baseF, fs.Args(), stdout)
	case "list":
		return listKnowledge(ctx, k, *baseF, *asJSON, stdout)
	case "rename":
		return renameKnowledge(ctx, k, cfg, *fromF, *toF, stdout)
	case "remove":
		if err := needBase(); err != nil {
			return err
		}
		return removeKnowledge(ctx, k, *baseF, fs.Args(), stdout)
	case "search":
		if err := needBase(); err != nil {
			return err
		}
		return searchKnowledge(ctx, k, *baseF, strings.Join(fs.Args(), " "), stdout)
	case "reindex":
		if !emb.Enabled() {
			return errors.New("no [embeddings] model is configured: chunks are searched by keywords only")
		}
		space, err := k.Reindex(ctx, func(done, total int) { fmt.Fprintf(stdout, "%d of %d chunks have a vector\n", done, total) })
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "every chunk has a vector of %s\n", space)
		return nil
	}
	return fmt.Errorf("%w: unknown bot knowledge command %q (add, list, remove, search, reindex, rename)", errUsage, args[0])
}

func hasBase(cfg *config.Config, name string) bool {
	for _, b := range cfg.Knowledge.Bases {
		if b.Name == name {
			return true
		}
	}
	return false
}

func baseNames(cfg *config.Config) string {
	names := make([]string, len(cfg.Knowledge.Bases))
	for i, b := range cfg.Knowledge.Bases {
		names[i] = strconv.Quote(b.Name)
	}
	return strings.Join(names, ", ")
}

// addKnowledge reads each file into base, printing the import's progress; a refused file is
// reported and the others still read, and the command fails when any was refused.
func addKnowledge(ctx context.Context, k *knowledge.Knowledge, base string, files []string, stdout io.Writer) error {
	if len(files) == 0 {
		return fmt.Errorf("%w: bot knowledge add -base NAME FILE...", errUsage)
	}
	failed := 0
	for _, path := range files {
		d, err := addFile(ctx, k, base, path, stdout)
		if err != nil {
			fmt.Fprintf(stdout, "%s: %v\n", path, err)
			failed++
			continue
		}
		where := fmt.Sprintf("%d chunks", d.Chunks)
		if d.Pages > 0 {
			where = fmt.Sprintf("%d pages, %s", d.Pages, where)
		}
		fmt.Fprintf(stdout, "%s: added as document %d of %s (%s, %s)\n", path, d.ID, base, d.Format, where)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d files not added", failed, len(files))
	}
	return nil
}

func addFile(ctx context.Context, k *knowledge.Knowledge, base, path string, stdout io.Writer) (knowledge.Document, error) {
	f, err := os.Open(path)
	if err != nil {
		return knowledge.Document{}, err
	}
	defer f.Close()
	// A file already known to be too large is refused before a byte of it is read.
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		if ref := k.CheckSize(filepath.Base(path), fi.Size()); ref != nil {
			return knowledge.Document{}, ref
		}
	}
	last := ""
	return k.Add(ctx, base, filepath.Base(path), f, "cli", func(stage string, done, total int) {
		line := fmt.Sprintf("%s: %s %d", path, stage, done)
		if total > 0 {
			line = fmt.Sprintf("%s of %d", line, total)
			// Every tenth of the way, not every page: a 300-page PDF prints a dozen lines.
			if done != total && done%max(total/10, 1) != 0 {
				return
			}
		}
		if line != last {
			last = line
			fmt.Fprintln(stdout, line)
		}
	})
}

// listedDocument is a document as bot knowledge list -json prints it: Orphan is set when
// config.toml no longer names its base.
type listedDocument struct {
	knowledge.Document
	Orphan bool `json:"orphan,omitempty"`
}

// listKnowledge prints the documents of base (every base's without one), then those of the
// bases config.toml no longer names, with how to move or delete them.
func listKnowledge(ctx context.Context, k *knowledge.Knowledge, base string, asJSON bool, stdout io.Writer) error {
	var docs []listedDocument
	for _, b := range k.Bases() {
		if base != "" && b.Name != base {
			continue
		}
		some, err := k.Documents(ctx, b.Name)
		if err != nil {
			return err
		}
		for _, d := range some {
			docs = append(docs, listedDocument{Document: d})
		}
	}
	orphans, err := k.Orphans(ctx)
	if err != nil {
		return err
	}
	var orphaned []knowledge.Orphan
	for _, o := range orphans {
		if base != "" && o.Base != base {
			continue
		}
		orphaned = append(orphaned, o)
		for _, d := range o.Documents {
			docs = append(docs, listedDocument{Document: d, Orphan: true})
		}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		for _, d := range docs {
			if err := enc.Encode(d); err != nil {
				return err
			}
		}
		return nil
	}
	if err := printDocuments(docs, stdout); err != nil {
		return err
	}
	for _, o := range orphaned {
		fmt.Fprintf(stdout, "\nBase %q is not in config.toml: its %d documents are kept but never searched. If it was renamed,\n"+
			"move them with: bot knowledge rename -from %s -to NEW_NAME\nor delete them with: bot knowledge remove -base %s ID\n",
			o.Base, len(o.Documents), o.Base, o.Base)
	}
	return nil
}

func printDocuments(docs []listedDocument, stdout io.Writer) error {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tBASE\tNAME\tFORMAT\tPAGES\tBYTES\tCHUNKS\tSTATE\tADDED\tBY")
	for _, d := range docs {
		state := string(d.State)
		if d.State == knowledge.StateImporting {
			state = fmt.Sprintf("importing %d/%d", d.Done, d.Total)
		}
		base := d.Base
		if d.Orphan {
			base += " (not in config.toml)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", d.ID, base, d.Name, d.Format, d.Pages, d.Bytes, d.Chunks,
			state, d.AddedAt.UTC().Format("2006-01-02 15:04"), d.AddedBy)
	}
	return tw.Flush()
}

// renameKnowledge moves the documents of a base renamed in config.toml to its new name.
func renameKnowledge(ctx context.Context, k *knowledge.Knowledge, cfg *config.Config, from, to string, stdout io.Writer) error {
	if from == "" || to == "" {
		return fmt.Errorf("%w: bot knowledge rename -from OLD -to NEW", errUsage)
	}
	if !hasBase(cfg, to) {
		return fmt.Errorf("%w: no base %q in config.toml (it names %s): rename the base there first", errUsage, to, baseNames(cfg))
	}
	got, err := k.Rename(ctx, from, to)
	switch {
	case errors.Is(err, knowledge.ErrStillConfigured):
		return fmt.Errorf("base %q is still in config.toml: rename it there first, then run this again", from)
	case errors.Is(err, knowledge.ErrNotFound):
		return fmt.Errorf("no document is filed under base %q", from)
	case err != nil:
		return err
	}
	fmt.Fprintf(stdout, "moved %d documents (%d chunks, with their vectors) from %s to %s\n", got.Documents, got.Chunks, from, to)
	return nil
}

func removeKnowledge(ctx context.Context, k *knowledge.Knowledge, base string, args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: bot knowledge remove -base NAME ID", errUsage)
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q is not a document id", errUsage, args[0])
	}
	d, err := k.Remove(ctx, base, id)
	if errors.Is(err, knowledge.ErrNotFound) {
		return fmt.Errorf("base %s has no document %d", base, id)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "removed document %d (%s, %d chunks) from %s\n", d.ID, d.Name, d.Chunks, base)
	return nil
}

func searchKnowledge(ctx context.Context, k *knowledge.Knowledge, base, query string, stdout io.Writer) error {
	if strings.TrimSpace(query) == "" {
		return fmt.Errorf("%w: bot knowledge search -base NAME QUERY", errUsage)
	}
	hits, err := k.Search(ctx, []string{base}, query, 5, nil)
	if err != nil {
		return err
	}
	if len(hits) == 0 {
		fmt.Fprintln(stdout, "nothing found")
		return nil
	}
	if k.Keywords() {
		fmt.Fprintln(stdout, "(keywords only: no [embeddings] model is configured)")
	}
	fmt.Fprintln(stdout, knowledge.Numbered(hits))
	return nil
}
