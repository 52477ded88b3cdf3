package knowledge

import (
	"context"
	"errors"
	"fmt"
)

// Orphan is a base config.toml no longer names that still holds documents (it was renamed or
// removed there): its documents are kept, never searched, until they are moved to a base with
// Rename or deleted with Remove.
type Orphan struct {
	Base      string
	Documents []Document
}

// Orphans returns the bases that hold documents but are not configured, by name.
func (k *Knowledge) Orphans(ctx context.Context) ([]Orphan, error) {
	names, err := k.docs.bases(ctx)
	if err != nil {
		return nil, err
	}
	var out []Orphan
	for _, name := range names {
		if _, ok := k.Base(name); ok {
			continue
		}
		docs, err := k.docs.list(ctx, name)
		if err != nil {
			return nil, err
		}
		out = append(out, Orphan{Base: name, Documents: docs})
	}
	return out, nil
}

// warnOrphans logs, once the bases are open, each base config.toml no longer names that holds
// documents, with the commands that fix it.
func (k *Knowledge) warnOrphans(ctx context.Context) {
	orphans, err := k.Orphans(ctx)
	if err != nil {
		k.log.Warn("knowledge: the documents of bases no longer configured were not looked for", "err", err)
		return
	}
	for _, o := range orphans {
		k.log.Warn("knowledge: a base config.toml does not name holds documents: they are kept but never searched",
			"base", o.Base, "documents", len(o.Documents),
			"fix", fmt.Sprintf("bot knowledge rename -from %s -to NAME (a base renamed), or bot knowledge remove -base %s ID", o.Base, o.Base))
	}
}

// ErrStillConfigured is a rename from a base config.toml still names.
var ErrStillConfigured = errors.New("knowledge: the base is still configured")

// Renamed is what a Rename moved.
type Renamed struct {
	Documents int
	Chunks    int64
}

// Rename moves every document of from, a base config.toml no longer names (it was renamed
// there), to the configured base to: their rows, and their chunks' words, vectors and codes,
// which keep their embeddings. A base of to's documents and from's over knowledge.max_documents
// is a *RefusedError and moves nothing. The documents move first, then the chunks' texts: a
// rename cut short between the two is finished by running it again.
func (k *Knowledge) Rename(ctx context.Context, from, to string) (Renamed, error) {
	if _, ok := k.Base(to); !ok {
		return Renamed{}, fmt.Errorf("%w: %q", ErrNoBase, to)
	}
	if _, ok := k.Base(from); ok {
		return Renamed{}, fmt.Errorf("%w: %q (rename it in config.toml first, or remove its documents one by one)", ErrStillConfigured, from)
	}
	docs, err := k.docs.rename(ctx, from, to)
	if err != nil {
		return Renamed{}, err
	}
	chunks, err := k.index.Reown(ctx, from, to)
	if err != nil {
		return Renamed{Documents: docs}, fmt.Errorf("knowledge: %d documents moved to %q, their chunks not yet (run the rename again): %w", docs, to, err)
	}
	if docs == 0 && chunks == 0 {
		return Renamed{}, fmt.Errorf("%w: no document is filed under base %q", ErrNotFound, from)
	}
	k.log.Info("knowledge: documents moved to another base", "from", from, "to", to, "documents", docs, "chunks", chunks)
	return Renamed{Documents: docs, Chunks: chunks}, nil
}
