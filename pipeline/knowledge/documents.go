package knowledge

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// State is where a document's import stands.
type State string

// The states of a document.
const (
	StateImporting State = "importing"
	StateReady     State = "ready"
)

// Document is one file added to a base.
type Document struct {
	ID     int64  `json:"id"`
	Base   string `json:"base"`
	Name   string `json:"name"`
	Format string `json:"format"`
	// Pages is a PDF's page count (0 for the other formats).
	Pages  int `json:"pages"`
	Bytes  int `json:"bytes"`
	Chunks int `json:"chunks"`
	// AddedBy is who added it ("cli", "admin:NAME", "api").
	AddedBy string    `json:"added_by"`
	AddedAt time.Time `json:"added_at"`
	State   State     `json:"state"`
	// Done of Total chunks are stored while it is importing.
	Done  int `json:"progress_done"`
	Total int `json:"progress_total"`
}

// ErrNotFound is a document id that is not the base's (or is gone).
var ErrNotFound = errors.New("knowledge: no such document")

// chunkRow is where one chunk stands in its document (knowledge_chunks); its text is the
// retrieval layer's.
type chunkRow struct {
	ID       int64
	Document int64
	Ordinal  int
	Page     int
	Headings []string
	Start    int
	End      int
}

// headingSep joins a chunk's heading path in its row: a character no heading holds.
const headingSep = "\x1f"

// documents reads and writes knowledge_documents and knowledge_chunks. Its queries name
// parameters $1, $2, ... in the order they first appear (SQLite numbers $N by appearance).
type documents struct {
	w, r    *sql.DB
	dialect string
	// maxDocs is the most documents a base holds (0: no limit).
	maxDocs int
}

const docColumns = `id, base, name, format, pages, bytes, chunks, added_by, added_at, state, progress_done, progress_total`

func scanDoc(s interface{ Scan(...any) error }) (Document, error) {
	var d Document
	var state string
	err := s.Scan(&d.ID, &d.Base, &d.Name, &d.Format, &d.Pages, &d.Bytes, &d.Chunks, &d.AddedBy, &d.AddedAt, &state, &d.Done, &d.Total)
	d.State = State(state)
	return d, err
}

// count is how many documents base holds.
func (q documents) count(ctx context.Context, base string) (int, error) {
	var n int
	if err := q.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM knowledge_documents WHERE base = $1`, base).Scan(&n); err != nil {
		return 0, fmt.Errorf("knowledge: count documents: %w", err)
	}
	return n, nil
}

// insert writes d (importing) with its chunks' rows and returns it with its id and the
// chunks' ids, in order. When the base already holds maxDocs documents it writes
// nothing and returns a *RefusedError naming knowledge.max_documents. The count and the insert
// are one step however many uploads run at once, on however many replicas: on SQLite the
// transaction holds the database's write lock from its start (the store begins them
// IMMEDIATE, on its one writer connection); on PostgreSQL it holds a transaction-level
// advisory lock on the base, which every replica's insert into that base takes first.
func (q documents) insert(ctx context.Context, d Document, chunks []chunkRow) (Document, []int64, error) {
	tx, err := q.w.BeginTx(ctx, nil)
	if err != nil {
		return d, nil, fmt.Errorf("knowledge: add a document: %w", err)
	}
	defer tx.Rollback()
	if q.maxDocs > 0 {
		if q.dialect == "postgres" {
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('knowledge base ' || $1, 0))`, d.Base); err != nil {
				return d, nil, fmt.Errorf("knowledge: lock base %q: %w", d.Base, err)
			}
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM knowledge_documents WHERE base = $1`, d.Base).Scan(&n); err != nil {
			return d, nil, fmt.Errorf("knowledge: count documents: %w", err)
		}
		if n >= q.maxDocs {
			return d, nil, full(d.Base, n, q.maxDocs)
		}
	}
	err = tx.QueryRowContext(ctx, `INSERT INTO knowledge_documents (base, name, format, pages, bytes, chunks, added_by, added_at,
		state, progress_done, progress_total) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, $6) RETURNING id`,
		d.Base, d.Name, d.Format, d.Pages, d.Bytes, d.Chunks, d.AddedBy, d.AddedAt, string(StateImporting)).Scan(&d.ID)
	if err != nil {
		return d, nil, fmt.Errorf("knowledge: add a document: %w", err)
	}
	ids := make([]int64, len(chunks))
	for i, c := range chunks {
		err := tx.QueryRowContext(ctx, `INSERT INTO knowledge_chunks (document_id, base, ordinal, page, headings, start_offset, end_offset)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
			d.ID, d.Base, c.Ordinal, c.Page, strings.Join(c.Headings, headingSep), c.Start, c.End).Scan(&ids[i])
		if err != nil {
			return d, nil, fmt.Errorf("knowledge: add chunk %d of %q: %w", i, d.Name, err)
		}
	}
	d.State, d.Total = StateImporting, d.Chunks
	return d, ids, tx.Commit()
}

// progress records how many of a document's chunks are stored; done == total makes it ready.
func (q documents) progress(ctx context.Context, id int64, done, total int) error {
	state := StateImporting
	if done >= total {
		state = StateReady
	}
	_, err := q.w.ExecContext(ctx, `UPDATE knowledge_documents SET progress_done = $1, state = $2 WHERE id = $3`, done, string(state), id)
	if err != nil {
		return fmt.Errorf("knowledge: document %d's progress: %w", id, err)
	}
	return nil
}

// bases returns the names of the bases that hold documents.
func (q documents) bases(ctx context.Context) ([]string, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT DISTINCT base FROM knowledge_documents ORDER BY base`)
	if err != nil {
		return nil, fmt.Errorf("knowledge: the bases of the documents: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var b string
		if err := rows.Scan(&b); err != nil {
			return nil, fmt.Errorf("knowledge: the bases of the documents: %w", err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// rename files every document of from (and its chunks' rows) under to, and returns how many
// moved. Under to's lock (as insert takes it), to's documents and from's together may not pass
// maxDocs: a *RefusedError naming knowledge.max_documents, nothing moved.
func (q documents) rename(ctx context.Context, from, to string) (int, error) {
	tx, err := q.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("knowledge: rename %q: %w", from, err)
	}
	defer tx.Rollback()
	if q.dialect == "postgres" {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('knowledge base ' || $1, 0))`, to); err != nil {
			return 0, fmt.Errorf("knowledge: lock base %q: %w", to, err)
		}
	}
	var have, moving int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(CASE WHEN base = $1 THEN 1 END), COUNT(CASE WHEN base = $2 THEN 1 END)
		FROM knowledge_documents WHERE base IN ($1, $2)`, to, from).Scan(&have, &moving); err != nil {
		return 0, fmt.Errorf("knowledge: count documents: %w", err)
	}
	if q.maxDocs > 0 && moving > 0 && have+moving > q.maxDocs {
		return 0, &RefusedError{Key: "knowledge.max_documents", Limit: int64(q.maxDocs), Got: int64(have + moving),
			Reason: fmt.Sprintf("base %q holds %d documents and %q %d: together more than knowledge.max_documents (%d)", to, have, from, moving, q.maxDocs)}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE knowledge_chunks SET base = $1 WHERE base = $2`, to, from); err != nil {
		return 0, fmt.Errorf("knowledge: rename %q: %w", from, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE knowledge_documents SET base = $1 WHERE base = $2`, to, from); err != nil {
		return 0, fmt.Errorf("knowledge: rename %q: %w", from, err)
	}
	return moving, tx.Commit()
}

// list returns base's documents, oldest first.
func (q documents) list(ctx context.Context, base string) ([]Document, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT `+docColumns+` FROM knowledge_documents WHERE base = $1 ORDER BY id`, base)
	if err != nil {
		return nil, fmt.Errorf("knowledge: list documents: %w", err)
	}
	defer rows.Close()
	var out []Document
	for rows.Next() {
		d, err := scanDoc(rows)
		if err != nil {
			return nil, fmt.Errorf("knowledge: list documents: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// get returns one of base's documents.
func (q documents) get(ctx context.Context, base string, id int64) (Document, error) {
	d, err := scanDoc(q.r.QueryRowContext(ctx, `SELECT `+docColumns+` FROM knowledge_documents WHERE id = $1 AND base = $2`, id, base))
	if errors.Is(err, sql.ErrNoRows) {
		return Document{}, ErrNotFound
	}
	if err != nil {
		return Document{}, fmt.Errorf("knowledge: read document %d: %w", id, err)
	}
	return d, nil
}

// chunkIDs returns the ids of a document's chunks.
func (q documents) chunkIDs(ctx context.Context, doc int64) ([]int64, error) {
	rows, err := q.w.QueryContext(ctx, `SELECT id FROM knowledge_chunks WHERE document_id = $1 ORDER BY ordinal`, doc)
	if err != nil {
		return nil, fmt.Errorf("knowledge: the chunks of document %d: %w", doc, err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("knowledge: the chunks of document %d: %w", doc, err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// remove deletes a document's row and its chunks' rows.
func (q documents) remove(ctx context.Context, id int64) error {
	tx, err := q.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("knowledge: remove document %d: %w", id, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM knowledge_chunks WHERE document_id = $1`, id); err != nil {
		return fmt.Errorf("knowledge: remove document %d: %w", id, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM knowledge_documents WHERE id = $1`, id); err != nil {
		return fmt.Errorf("knowledge: remove document %d: %w", id, err)
	}
	return tx.Commit()
}

// place is a chunk's row with its document's name.
type place struct {
	chunkRow
	Base    string
	DocName string
}

// places returns the rows of chunks ids (those still there), by id, in one query.
func (q documents) places(ctx context.Context, ids []int64) (map[int64]place, error) {
	out := make(map[int64]place, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	ph := make([]string, len(ids))
	args := make([]any, len(ids))
	for i, id := range ids {
		ph[i] = fmt.Sprintf("$%d", i+1)
		args[i] = id
	}
	rows, err := q.r.QueryContext(ctx, `SELECT c.id, c.document_id, c.ordinal, c.page, c.headings, c.start_offset, c.end_offset, c.base, d.name
		FROM knowledge_chunks c JOIN knowledge_documents d ON d.id = c.document_id WHERE c.id IN (`+strings.Join(ph, ", ")+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("knowledge: read chunks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var p place
		var heads string
		if err := rows.Scan(&p.ID, &p.Document, &p.Ordinal, &p.Page, &heads, &p.Start, &p.End, &p.Base, &p.DocName); err != nil {
			return nil, fmt.Errorf("knowledge: read chunks: %w", err)
		}
		if heads != "" {
			p.Headings = strings.Split(heads, headingSep)
		}
		out[p.ID] = p
	}
	return out, rows.Err()
}
