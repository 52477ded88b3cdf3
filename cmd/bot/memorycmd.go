package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"relaybot/chat"
	"relaybot/config"
	"relaybot/pipeline/memory"
)

// memoryUsage is bot memory's help.
const memoryUsage = `usage: bot memory [-config PATH] <list|forget|reindex> [flags]

  list -user PLATFORM:ID [-json]   a person's remembered facts, with where, when and by whom each was written
  forget ID                        delete one fact (rows and vectors, no soft delete)
  forget -user PLATFORM:ID         delete every fact of a person
  reindex                          give every fact a vector of the [embeddings] model, with progress

Every delete is an audit entry (path admin, actor cli) that keeps no text of the fact.`

// runMemory is `bot memory`: admins read, delete and re-embed the facts memory keeps.
func runMemory(ctx context.Context, cfg *config.Config, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stdout, memoryUsage)
		return fmt.Errorf("%w: bot memory needs list, forget or reindex", errUsage)
	}
	fs := flag.NewFlagSet("memory "+args[0], flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() { fmt.Fprintln(fs.Output(), memoryUsage) }
	userF := fs.String("user", "", "the person, as PLATFORM:ID (telegram:42)")
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	if err := fs.Parse(args[1:]); err != nil {
		return err
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
	w, r := st.Pools()
	mem, err := memory.New(ctx, memory.Options{Dialect: st.Driver(), W: w, R: r, Embedder: emb, Calls: st.ToolCalls})
	if err != nil {
		return err
	}
	switch args[0] {
	case "list":
		who, err := parseUser(*userF)
		if err != nil {
			return err
		}
		return listMemory(ctx, mem, who, *asJSON, stdout)
	case "forget":
		return forgetMemory(ctx, mem, *userF, fs.Args(), stdout)
	case "reindex":
		if !emb.Enabled() {
			return errors.New("no [embeddings] model is configured: facts are searched by keywords only")
		}
		space, err := mem.Reindex(ctx, func(done, total int) { fmt.Fprintf(stdout, "%d of %d facts have a vector\n", done, total) })
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "every fact has a vector of %s\n", space)
		return nil
	}
	return fmt.Errorf("%w: unknown bot memory command %q (list, forget, reindex)", errUsage, args[0])
}

// parseUser reads -user: PLATFORM:ID.
func parseUser(s string) (chat.User, error) {
	ref, err := chat.ParseRef(s)
	if s == "" || err != nil || ref.ThreadID != "" {
		return chat.User{}, fmt.Errorf("%w: -user must be PLATFORM:ID (telegram:42), got %q", errUsage, s)
	}
	return chat.User{Platform: ref.Platform, ID: ref.ChatID}, nil
}

func listMemory(ctx context.Context, mem *memory.Memory, who chat.User, asJSON bool, stdout io.Writer) error {
	facts, err := mem.List(ctx, who)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		for _, f := range facts {
			if err := enc.Encode(map[string]any{"id": f.ID, "user": f.Who.String(), "fact": f.Text, "scope": f.Scope,
				"chat": f.Chat, "turn": f.SourceTurn, "message": f.SourceMessage, "written_by": f.WrittenBy,
				"path": f.Path, "created_at": f.CreatedAt, "updated_at": f.UpdatedAt}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tLEARNED\tWHERE\tMESSAGE\tBY\tFACT")
	for _, f := range facts {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s (%s)\t%s\n", f.ID, f.CreatedAt.UTC().Format("2006-01-02 15:04"), f.Chat,
			f.SourceMessage, f.WrittenBy, f.Path, f.Text)
	}
	return tw.Flush()
}

func forgetMemory(ctx context.Context, mem *memory.Memory, user string, args []string, stdout io.Writer) error {
	if user != "" {
		who, err := parseUser(user)
		if err != nil {
			return err
		}
		n, err := mem.ForgetAll(ctx, who, memory.PathAdmin, "cli")
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "deleted %d facts of %s\n", n, who)
		return nil
	}
	if len(args) != 1 {
		return fmt.Errorf("%w: bot memory forget ID, or -user PLATFORM:ID", errUsage)
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q is not a fact id", errUsage, args[0])
	}
	f, err := mem.ForgetByAdmin(ctx, id, "cli")
	if errors.Is(err, memory.ErrNotFound) {
		return fmt.Errorf("no fact %d", id)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "deleted fact %d of %s\n", id, f.Who)
	return nil
}
