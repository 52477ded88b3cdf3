package retrieval

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// The dialects, as the store names its drivers.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// Doc is one text of a collection.
type Doc struct {
	// Item is the collection owner's id of the text (a fact's id, a chunk's id).
	Item int64
	// Owner is whose it is (a person "telegram:42", a base's name); searches read one owner's.
	Owner string
	// Scope narrows where it may be found within the owner's ("private", a chat); "" is none.
	Scope string
	Text  string
}

// Index is one collection's texts, keyword index and vectors. It is safe for concurrent use.
//
// Its queries name parameters $1, $2, ... in the order they first appear: SQLite numbers $N
// parameters by appearance, PostgreSQL by N.
type Index struct {
	w, r       *sql.DB
	dialect    string
	collection string
	// vecSchema is pgvector's schema when the vectors are pgvector's type; "" when they are
	// float32s compared in Go.
	vecSchema string

	mu   sync.Mutex
	hnsw map[Space]bool // the spaces whose HNSW index exists

	cache *codeCache
	sizes *sizeCache
	words *wordsState
}

// Open returns the index of collection over the migrated database: w is where it writes (on
// SQLite the store's single writer connection), r where it reads.
func Open(ctx context.Context, w, r *sql.DB, dialect, collection string) (*Index, error) {
	if dialect != SQLite && dialect != Postgres {
		return nil, fmt.Errorf("retrieval: unknown dialect %q", dialect)
	}
	if collection == "" {
		return nil, errors.New("retrieval: a collection needs a name")
	}
	x := &Index{w: w, r: r, dialect: dialect, collection: collection, hnsw: map[Space]bool{},
		cache: &codeCache{max: DefaultCodeCacheBytes, entries: map[cacheKey]*ownerCodes{}},
		sizes: &sizeCache{entries: map[string]ownerSize{}}, words: newWordsState()}
	if dialect == Postgres {
		err := r.QueryRowContext(ctx, `SELECT CASE WHEN t.typname = 'vector' THEN n.nspname ELSE '' END
			FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid JOIN pg_namespace n ON n.oid = t.typnamespace
			WHERE a.attrelid = 'retrieval_vectors'::regclass AND a.attname = 'embedding'`).Scan(&x.vecSchema)
		if err != nil {
			return nil, fmt.Errorf("retrieval: read the vectors' column type: %w", err)
		}
	}
	// Vectors stored before codes existed (migration 00042) get theirs: a vector search reads
	// codes first and would not see them.
	if err := x.backfillCodes(ctx); err != nil {
		return nil, err
	}
	return x, nil
}

// Pgvector reports whether vectors are compared by pgvector (else in Go).
func (x *Index) Pgvector() bool { return x.vecSchema != "" }

// ownerKey is the keyword index's prefix for (collection, owner): letters and digits only, so the
// tokenizer keeps a prefixed word whole.
func (x *Index) ownerKey(owner string) string {
	sum := sha256.Sum256([]byte(x.collection + "\x00" + owner))
	return "k" + hex.EncodeToString(sum[:12])
}

// ownedWords is text as SQLite's keyword index stores it: each word prefixed with the owner's
// key, so a word's postings are one owner's and a search reads only its owner's (an unprefixed
// common word has postings in every owner's texts, all read by every search).
func ownedWords(key, text string) string {
	words := words(text)
	for i, w := range words {
		words[i] = key + w
	}
	return strings.Join(words, " ")
}

// Put stores d (replacing the text of the same item) with its vector in space s; a nil vec
// stores none, and a replaced text loses the vectors of its old words.
func (x *Index) Put(ctx context.Context, d Doc, vec []float32, s Space) error {
	var vecs [][]float32
	if vec != nil {
		vecs = [][]float32{vec}
	}
	return x.PutMany(ctx, []Doc{d}, vecs, s)
}

// PutMany is Put of many docs in one transaction (an import): vecs is nil or holds one vector
// (or nil) per doc.
func (x *Index) PutMany(ctx context.Context, docs []Doc, vecs [][]float32, s Space) error {
	if vecs != nil && len(vecs) != len(docs) {
		return fmt.Errorf("retrieval: %d vectors for %d texts", len(vecs), len(docs))
	}
	tx, err := x.begin(ctx)
	if err != nil {
		return fmt.Errorf("retrieval: put: %w", err)
	}
	defer tx.Rollback()
	for i, d := range docs {
		var vec []float32
		if vecs != nil {
			vec = vecs[i]
		}
		if err := x.put(ctx, tx, d, vec, s); err != nil {
			return fmt.Errorf("retrieval: put %s %d: %w", x.collection, d.Item, err)
		}
	}
	return tx.commit(ctx)
}

func (x *Index) put(ctx context.Context, tx *writeTx, d Doc, vec []float32, s Space) error {
	// The owner the item had (it may move) and the one it gets both change: their generations move.
	var was string
	err := tx.QueryRowContext(ctx, `SELECT owner FROM retrieval_docs WHERE collection = $1 AND item_id = $2`,
		x.collection, d.Item).Scan(&was)
	switch {
	case err == nil:
		tx.owners[was] = true
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	tx.owners[d.Owner] = true
	var id int64
	err = tx.QueryRowContext(ctx, `INSERT INTO retrieval_docs (collection, item_id, owner, scope, body)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (collection, item_id) DO UPDATE SET owner = excluded.owner, scope = excluded.scope, body = excluded.body
		RETURNING id`, x.collection, d.Item, d.Owner, d.Scope, d.Text).Scan(&id)
	if err != nil {
		return err
	}
	if err := deleteVectors(ctx, tx, id); err != nil {
		return err
	}
	if x.dialect == SQLite {
		if _, err := tx.ExecContext(ctx, `DELETE FROM retrieval_docs_fts WHERE docid = $1`, id); err != nil {
			return err
		}
		key := x.ownerKey(d.Owner)
		if _, err := tx.ExecContext(ctx, `INSERT INTO retrieval_docs_fts (docid, owner_key, body) VALUES ($1, $2, $3)`,
			id, key, ownedWords(key, d.Text)); err != nil {
			return err
		}
	}
	if vec == nil {
		return nil
	}
	return x.putVector(ctx, tx, coded{id: id, item: d.Item, owner: d.Owner, scope: d.Scope}, vec, s)
}

// SetVectors stores the vectors of items (in space s) beside the texts already put; an item no
// longer there is skipped.
func (x *Index) SetVectors(ctx context.Context, s Space, items []int64, vecs [][]float32) error {
	if len(items) != len(vecs) {
		return fmt.Errorf("retrieval: %d vectors for %d items", len(vecs), len(items))
	}
	tx, err := x.begin(ctx)
	if err != nil {
		return fmt.Errorf("retrieval: set vectors: %w", err)
	}
	defer tx.Rollback()
	for i, item := range items {
		d := coded{item: item}
		err := tx.QueryRowContext(ctx, `SELECT id, owner, scope FROM retrieval_docs WHERE collection = $1 AND item_id = $2`,
			x.collection, item).Scan(&d.id, &d.owner, &d.scope)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("retrieval: set vectors: %w", err)
		}
		if err := x.putVector(ctx, tx, d, vecs[i], s); err != nil {
			return fmt.Errorf("retrieval: set vectors: %w", err)
		}
	}
	return tx.commit(ctx)
}

func (x *Index) putVector(ctx context.Context, tx *writeTx, d coded, vec []float32, s Space) error {
	if !s.Valid() || len(vec) != s.Dims {
		return fmt.Errorf("a vector of %d numbers in space %s", len(vec), s)
	}
	v := append([]float32(nil), vec...)
	normalize(v)
	var arg any = encode(v)
	q := `INSERT INTO retrieval_vectors (doc_id, model, dims, embedding) VALUES ($1, $2, $3, $4)
		ON CONFLICT (doc_id, model, dims) DO UPDATE SET embedding = excluded.embedding`
	if x.Pgvector() {
		arg = pgvectorText(v)
		q = strings.Replace(q, "$4)", "$4::"+x.vecType(0)+")", 1)
	}
	if _, err := tx.ExecContext(ctx, q, d.id, s.Model, s.Dims, arg); err != nil {
		return err
	}
	return x.putCode(ctx, tx, d, s, v)
}

// deleteVectors removes the vectors of doc id and their codes.
func deleteVectors(ctx context.Context, tx *writeTx, id int64) error {
	rows, err := tx.QueryContext(ctx, `DELETE FROM retrieval_codes WHERE doc_id = $1 RETURNING owner`, id)
	if err != nil {
		return err
	}
	for rows.Next() {
		var owner string
		if err := rows.Scan(&owner); err != nil {
			rows.Close()
			return err
		}
		tx.owners[owner] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `DELETE FROM retrieval_vectors WHERE doc_id = $1`, id)
	return err
}

// vecType is pgvector's type, of dims numbers when dims > 0.
func (x *Index) vecType(dims int) string {
	t := quoteIdent(x.vecSchema) + ".vector"
	if dims > 0 {
		t += fmt.Sprintf("(%d)", dims)
	}
	return t
}

// Delete removes items' texts, keyword postings and vectors (rows deleted, not marked).
func (x *Index) Delete(ctx context.Context, items ...int64) error {
	if len(items) == 0 {
		return nil
	}
	tx, err := x.begin(ctx)
	if err != nil {
		return fmt.Errorf("retrieval: delete: %w", err)
	}
	defer tx.Rollback()
	for _, item := range items {
		var id int64
		var owner string
		err := tx.QueryRowContext(ctx, `SELECT id, owner FROM retrieval_docs WHERE collection = $1 AND item_id = $2`,
			x.collection, item).Scan(&id, &owner)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("retrieval: delete: %w", err)
		}
		tx.owners[owner] = true
		if err := x.deleteDoc(ctx, tx, id); err != nil {
			return fmt.Errorf("retrieval: delete: %w", err)
		}
	}
	return tx.commit(ctx)
}

func (x *Index) deleteDoc(ctx context.Context, tx *writeTx, id int64) error {
	if err := deleteVectors(ctx, tx, id); err != nil {
		return err
	}
	if x.dialect == SQLite {
		if _, err := tx.ExecContext(ctx, `DELETE FROM retrieval_docs_fts WHERE docid = $1`, id); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM retrieval_docs WHERE id = $1`, id)
	return err
}

// Scrub leaves no copy of deleted texts where the database keeps them after a delete. On SQLite
// the keyword index's segments are merged (dropping deleted postings) and the write-ahead log is
// checkpointed and truncated; freed pages are zeroed as they are freed (the store opens SQLite
// with secure_delete). On PostgreSQL the index's tables are vacuumed: the deleted rows leave
// their pages' line pointers and the keyword and vector indexes now, not at autovacuum's next
// pass (PostgreSQL has no secure_delete: freed space keeps its bytes until reused, and the
// write-ahead log until its segments are recycled).
func (x *Index) Scrub(ctx context.Context) error {
	if x.dialect != SQLite {
		if _, err := x.w.ExecContext(ctx, `VACUUM retrieval_docs, retrieval_vectors, retrieval_codes`); err != nil {
			return fmt.Errorf("retrieval: vacuum: %w", err)
		}
		return nil
	}
	if _, err := x.w.ExecContext(ctx, `INSERT INTO retrieval_docs_fts (retrieval_docs_fts) VALUES ('optimize')`); err != nil {
		return fmt.Errorf("retrieval: merge the keyword index: %w", err)
	}
	var busy, frames, done int
	if err := x.w.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &done); err != nil {
		return fmt.Errorf("retrieval: checkpoint: %w", err)
	}
	if busy != 0 {
		return errors.New("retrieval: checkpoint: a reader held the log; the deleted pages are zeroed but the log keeps old frames until the next checkpoint")
	}
	return nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }
