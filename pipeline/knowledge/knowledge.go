// Package knowledge keeps the admins' documents the bot answers from: knowledge bases, each a
// set of documents read into chunks (package knowledge/extract, under the upload limits) whose
// words and vectors are the retrieval layer's "knowledge" collection, one owner per base. A
// base serves the chats it names only (a chat covers its threads; none named: every chat), as
// the search_knowledge tool (mode "tool") or as the best chunks put into every turn there
// (mode "auto"), and a chat outside every base's scope is never offered the tool (decision 050).
package knowledge

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"relaybot/chat"
	"relaybot/knowledge/extract"
	"relaybot/provider"
	"relaybot/retrieval"
)

// Collection is the retrieval collection of the chunks; a chunk's owner is its base's name.
const Collection = "knowledge"

// Mode is how a base's chunks reach a turn.
type Mode string

// The modes.
const (
	// ModeTool: the model searches with search_knowledge when it needs to.
	ModeTool Mode = "tool"
	// ModeAuto: the best chunks go into every turn in the base's chats, within MaxTokens.
	ModeAuto Mode = "auto"
)

// Base is one knowledge base.
type Base struct {
	Name string
	// Description tells the model what the base holds.
	Description string
	// Chats may use the base (a chat covers its threads); empty: every chat.
	Chats     []chat.Ref
	Mode      Mode
	MaxTokens int
}

// Covers reports whether a turn whose rule chats are refs (the thread, its chat, a thread's
// parent: adapters.Inbound.RuleChats) may use the base.
func (b Base) Covers(refs []chat.Ref) bool {
	if len(b.Chats) == 0 {
		return true
	}
	for _, r := range refs {
		if slices.Contains(b.Chats, r) {
			return true
		}
	}
	return false
}

// Limits bound an upload.
type Limits struct {
	MaxFileBytes int64
	MaxPages     int
	MaxTextBytes int64
	// MaxDocuments is the most documents one base holds (0: no limit).
	MaxDocuments int
	// Timeout bounds reading one file (default 2 minutes).
	Timeout time.Duration
}

// Meter accounts for a turn's embedding calls (the turn's quota meter).
type Meter interface {
	Start(ctx context.Context, call chat.ModelCall, prompt int) (func(chat.ModelCall), error)
}

// Options configure the knowledge bases.
type Options struct {
	// Dialect is "sqlite" or "postgres"; W and R the pools (store.Database.Pools).
	Dialect string
	W, R    *sql.DB
	Bases   []Base
	Limits  Limits
	Chunks  extract.ChunkOptions
	// Embedder turns texts into vectors; nil (or none configured): keywords only.
	Embedder *retrieval.Embedder
	// Rerank, when it names a model, is the /rerank endpoint that orders the found chunks
	// again, reached through HTTPClient (nil: http.DefaultClient).
	Rerank     provider.Endpoint
	HTTPClient *http.Client
	Log        *slog.Logger
	// Now returns the current time (tests); nil means time.Now.
	Now func() time.Time
}

// Knowledge is every base. It is safe for concurrent use.
type Knowledge struct {
	opts     Options
	reranker *Reranker
	docs     documents
	index    *retrieval.Index
	log      *slog.Logger
}

// New opens the bases over the migrated database.
func New(ctx context.Context, o Options) (*Knowledge, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Limits.Timeout <= 0 {
		o.Limits.Timeout = 2 * time.Minute
	}
	if o.Limits.MaxFileBytes <= 0 {
		o.Limits.MaxFileBytes = extract.DefaultMaxFileBytes
	}
	seen := map[string]bool{}
	for _, b := range o.Bases {
		if b.Name == "" || seen[b.Name] {
			return nil, fmt.Errorf("knowledge: base %q is unnamed or named twice", b.Name)
		}
		seen[b.Name] = true
	}
	x, err := retrieval.Open(ctx, o.W, o.R, o.Dialect, Collection)
	if err != nil {
		return nil, err
	}
	k := &Knowledge{opts: o, docs: documents{w: o.W, r: o.R, dialect: o.Dialect, maxDocs: o.Limits.MaxDocuments}, index: x, log: o.Log}
	if o.Rerank.Model != "" {
		k.reranker = NewReranker(o.Rerank, o.HTTPClient)
	}
	k.warnOrphans(ctx)
	return k, nil
}

// Bases returns the bases, as configured.
func (k *Knowledge) Bases() []Base { return slices.Clone(k.opts.Bases) }

// Base returns the base named name.
func (k *Knowledge) Base(name string) (Base, bool) {
	for _, b := range k.opts.Bases {
		if b.Name == name {
			return b, true
		}
	}
	return Base{}, false
}

// BasesFor returns the bases a turn whose rule chats are refs may use.
func (k *Knowledge) BasesFor(refs []chat.Ref) []Base {
	var out []Base
	for _, b := range k.opts.Bases {
		if b.Covers(refs) {
			out = append(out, b)
		}
	}
	return out
}

// Keywords reports whether searches are by keywords alone (no embeddings endpoint).
func (k *Knowledge) Keywords() bool { return !k.opts.Embedder.Enabled() }

// ErrNoBase is a base name no [[knowledge.bases]] entry has.
var ErrNoBase = errors.New("knowledge: no such base")

// RefusedError is an upload refused before anything was stored: over a limit (Key names it as
// the configuration does: "knowledge.max_file_bytes", "knowledge.max_documents"), or a format
// the bases do not read (Key empty). Its message says which.
type RefusedError struct {
	Key    string
	Limit  int64
	Got    int64
	Reason string
}

func (e *RefusedError) Error() string { return "refused: " + e.Reason }

// refusal turns what the reader refused into a RefusedError, or returns nil for other errors.
func refusal(name string, err error) *RefusedError {
	var le *extract.LimitError
	switch {
	case errors.As(err, &le):
		return &RefusedError{Key: "knowledge." + le.Key, Limit: le.Limit, Got: le.Got, Reason: fmt.Sprintf("%s: %v", name, le)}
	case errors.Is(err, extract.ErrUnknownFormat):
		return &RefusedError{Reason: fmt.Sprintf("%s: %v", name, err)}
	}
	return nil
}

// MaxFileBytes is the largest file a base takes (knowledge.max_file_bytes).
func (k *Knowledge) MaxFileBytes() int64 { return k.opts.Limits.MaxFileBytes }

// CheckSize refuses, before a byte of it is read, a file whose size is known beforehand (a file
// on disk, a request's declared length) when it is over knowledge.max_file_bytes; nil when it
// fits.
func (k *Knowledge) CheckSize(name string, size int64) *RefusedError {
	if size <= k.opts.Limits.MaxFileBytes {
		return nil
	}
	return refusal(name, &extract.LimitError{Key: "max_file_bytes", Limit: k.opts.Limits.MaxFileBytes, Got: size})
}

// full is the refusal of a document into a base that holds n documents, the most it may.
func full(base string, n, limit int) *RefusedError {
	return &RefusedError{Key: "knowledge.max_documents", Limit: int64(limit), Got: int64(n + 1),
		Reason: fmt.Sprintf("base %q holds %d documents, the most knowledge.max_documents (%d) allows", base, n, limit)}
}

// Progress hears an import's stages: "read" (the reader's own stages pass through with their
// names) and "store", with how much of how much is done.
type Progress func(stage string, done, total int)

// Add reads r (the file name) into base and stores its chunks, with vectors when embeddings are
// configured (a failed embedding leaves them to keywords until the background reindex). A
// refused file (a limit, an unknown format, a full base) is a *RefusedError and stores nothing.
func (k *Knowledge) Add(ctx context.Context, base, name string, r io.Reader, addedBy string, p Progress) (Document, error) {
	if _, ok := k.Base(base); !ok {
		return Document{}, fmt.Errorf("%w: %q", ErrNoBase, base)
	}
	if p == nil {
		p = func(string, int, int) {}
	}
	n, err := k.docs.count(ctx, base)
	if err != nil {
		return Document{}, err
	}
	// A first look, so a full base refuses before the file is read; insert counts again, under
	// the base's lock, for the uploads that passed this one together.
	if limit := k.opts.Limits.MaxDocuments; limit > 0 && n >= limit {
		return Document{}, full(base, n, limit)
	}
	counted := &countingReader{r: r}
	rctx, cancel := context.WithTimeout(ctx, k.opts.Limits.Timeout)
	doc, err := extract.Read(rctx, name, counted, extract.Limits{MaxFileBytes: k.opts.Limits.MaxFileBytes, MaxPages: k.opts.Limits.MaxPages,
		MaxTextBytes: k.opts.Limits.MaxTextBytes, Timeout: k.opts.Limits.Timeout}, k.opts.Chunks, extract.Progress(p))
	cancel()
	if err != nil {
		if ref := refusal(name, err); ref != nil {
			return Document{}, ref
		}
		return Document{}, fmt.Errorf("knowledge: read %q: %w", name, err)
	}
	if len(doc.Chunks) == 0 {
		return Document{}, &RefusedError{Reason: fmt.Sprintf("%q holds no text", name)}
	}
	return k.store(ctx, base, name, doc, counted.n, addedBy, p)
}

// store writes a read document: its row and its chunks' rows, then their texts and vectors
// batch by batch with progress. A failure removes what was written.
func (k *Knowledge) store(ctx context.Context, base, name string, doc extract.Document, size int64, addedBy string, p Progress) (Document, error) {
	rows := make([]chunkRow, len(doc.Chunks))
	for i, c := range doc.Chunks {
		rows[i] = chunkRow{Ordinal: i, Page: c.Page, Headings: c.Headings, Start: c.Start, End: c.End}
	}
	d := Document{Base: base, Name: name, Format: string(doc.Format), Pages: doc.Pages, Bytes: int(size), Chunks: len(rows),
		AddedBy: addedBy, AddedAt: k.opts.Now().UTC()}
	d, ids, err := k.docs.insert(ctx, d, rows)
	if err != nil {
		return Document{}, err
	}
	if err := k.indexChunks(ctx, d, ids, doc.Chunks, p); err != nil {
		if rerr := k.purge(context.WithoutCancel(ctx), d.ID, ids); rerr != nil {
			k.log.Error("knowledge: a document not stored whole could not be removed", "document", d.ID, "err", rerr)
		}
		return Document{}, err
	}
	d.State, d.Done = StateReady, d.Chunks
	return d, nil
}

// importBatch is how many chunks are embedded and stored at a time.
const importBatch = 64

func (k *Knowledge) indexChunks(ctx context.Context, d Document, ids []int64, chunks []extract.Chunk, p Progress) error {
	for at := 0; at < len(ids); at += importBatch {
		end := min(at+importBatch, len(ids))
		texts := make([]string, 0, end-at)
		docs := make([]retrieval.Doc, 0, end-at)
		for i := at; i < end; i++ {
			texts = append(texts, chunks[i].Text)
			docs = append(docs, retrieval.Doc{Item: ids[i], Owner: d.Base, Text: chunks[i].Text})
		}
		var vecs [][]float32
		var space retrieval.Space
		if k.opts.Embedder.Enabled() {
			emb, err := k.opts.Embedder.Embed(ctx, texts)
			if err != nil {
				k.log.Warn("knowledge: chunks not embedded; found by keywords until the reindex", "document", d.ID, "err", err)
			} else {
				vecs, space = emb.Vectors, emb.Space
			}
		}
		if err := k.index.PutMany(ctx, docs, vecs, space); err != nil {
			return err
		}
		if err := k.docs.progress(ctx, d.ID, end, len(ids)); err != nil {
			return err
		}
		p("store", end, len(ids))
	}
	return nil
}

// Documents returns base's documents, oldest first.
func (k *Knowledge) Documents(ctx context.Context, base string) ([]Document, error) {
	if _, ok := k.Base(base); !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoBase, base)
	}
	return k.docs.list(ctx, base)
}

// Remove deletes one of base's documents: its rows, its chunks' words and vectors (rows
// deleted, not marked), then scrubs the freed bytes.
func (k *Knowledge) Remove(ctx context.Context, base string, id int64) (Document, error) {
	d, err := k.docs.get(ctx, base, id)
	if err != nil {
		return Document{}, err
	}
	ids, err := k.docs.chunkIDs(ctx, id)
	if err != nil {
		return Document{}, err
	}
	if err := k.purge(ctx, id, ids); err != nil {
		return Document{}, err
	}
	if err := k.index.Scrub(ctx); err != nil {
		k.log.Warn("knowledge: removed chunks may linger in the write-ahead log until the next checkpoint", "err", err)
	}
	return d, nil
}

func (k *Knowledge) purge(ctx context.Context, doc int64, chunks []int64) error {
	if err := k.index.Delete(ctx, chunks...); err != nil {
		return err
	}
	return k.docs.remove(ctx, doc)
}

// Reindex gives every chunk a vector of the embedder's space (after a model change) and drops
// the other spaces' vectors, reporting progress; until it ends, a query compares vectors of its
// own space only, and the chunks without one are found by keywords.
func (k *Knowledge) Reindex(ctx context.Context, progress func(done, total int)) (retrieval.Space, error) {
	return retrieval.Reindex(ctx, k.index, k.opts.Embedder, retrieval.ReindexOptions{Progress: progress})
}

// VectorProgress counts the chunks and those with a vector of the embedder's space.
func (k *Knowledge) VectorProgress(ctx context.Context) (done, total int, space retrieval.Space, err error) {
	if !k.opts.Embedder.Enabled() {
		return 0, 0, retrieval.Space{}, nil
	}
	space, _, err = k.opts.Embedder.Space(ctx)
	if err != nil {
		return 0, 0, space, err
	}
	done, total, err = k.index.Progress(ctx, space)
	return done, total, space, err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}
