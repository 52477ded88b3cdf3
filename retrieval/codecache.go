package retrieval

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
)

// DefaultCodeCacheBytes is how many bytes of codes an Index keeps in memory by default: an
// owner's codes in one space are read from the database once and kept until the owner's texts
// change (its generation, a row every replica's writes bump, says when).
const DefaultCodeCacheBytes = 64 << 20

// writeTx is a write transaction of the index that remembers whose texts or codes it changed, so
// their generations move when it commits and every replica's caches read them again.
type writeTx struct {
	*sql.Tx
	x      *Index
	owners map[string]bool
	all    bool
}

func (x *Index) begin(ctx context.Context) (*writeTx, error) {
	tx, err := x.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &writeTx{Tx: tx, x: x, owners: map[string]bool{}}, nil
}

// commit moves the generations of the owners whose texts or codes changed and commits.
func (t *writeTx) commit(ctx context.Context) error {
	if t.all {
		if _, err := t.ExecContext(ctx, `UPDATE retrieval_owners SET gen = gen + 1 WHERE collection = $1`, t.x.collection); err != nil {
			return fmt.Errorf("move the codes' generations: %w", err)
		}
	}
	for owner := range t.owners {
		if _, err := t.ExecContext(ctx, `INSERT INTO retrieval_owners (collection, owner, gen) VALUES ($1, $2, 1)
			ON CONFLICT (collection, owner) DO UPDATE SET gen = retrieval_owners.gen + 1`, t.x.collection, owner); err != nil {
			return fmt.Errorf("move the codes' generation of %s: %w", owner, err)
		}
	}
	return t.Commit()
}

// codeCache keeps owners' codes in memory, least recently used dropped first past max bytes.
type codeCache struct {
	mu      sync.Mutex
	max     int
	bytes   int
	tick    uint64
	entries map[cacheKey]*ownerCodes
}

type cacheKey struct {
	owner string
	space Space
	kind  uint8 // kindWords: the owner's keyword postings (ownerWords); else codes or texts
}

// kindWords marks a cache entry of an owner's keyword postings.
const kindWords uint8 = 1

// ownerCodes is one owner's codes in one space, as of generation gen; or, under the zero space
// and with no words, the owner's texts (ownerDocs).
type ownerCodes struct {
	gen    int64
	used   uint64
	docs   []int64
	items  []int64
	scopes []int32  // index into names
	names  []string // the scopes
	words  []uint64 // per doc: the positive plane, then the negative plane
	// terms are a kindWords entry's postings: each word's texts (positions into docs) and hits.
	terms map[string]postingList
	size  int
}

func (c *codeCache) get(k cacheKey, gen int64) *ownerCodes {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[k]
	if e == nil || e.gen != gen {
		return nil
	}
	c.tick++
	e.used = c.tick
	return e
}

func (c *codeCache) put(k cacheKey, e *ownerCodes) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.size > c.max {
		return
	}
	if old := c.entries[k]; old != nil {
		c.bytes -= old.size
		delete(c.entries, k)
	}
	for c.bytes+e.size > c.max {
		var oldest cacheKey
		var min uint64 = ^uint64(0)
		for k, v := range c.entries {
			if v.used < min {
				oldest, min = k, v.used
			}
		}
		c.bytes -= c.entries[oldest].size
		delete(c.entries, oldest)
	}
	c.tick++
	e.used = c.tick
	c.entries[k] = e
	c.bytes += e.size
}

// generation is the owner's generation (0 before any write since codes had one): every write
// transaction that changes the owner's texts or codes moves it when it commits.
func (x *Index) generation(ctx context.Context, owner string) (int64, error) {
	return x.generationIn(ctx, x.r, owner)
}

// generationIn is generation read through r (a read transaction: the snapshot its other reads see).
func (x *Index) generationIn(ctx context.Context, r querier, owner string) (int64, error) {
	var gen int64
	err := r.QueryRowContext(ctx, `SELECT gen FROM retrieval_owners WHERE collection = $1 AND owner = $2`,
		x.collection, owner).Scan(&gen)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("retrieval: the codes' generation: %w", err)
	}
	return gen, nil
}

// ownerCodes returns the owner's codes in space s, from memory when gen (the owner's generation,
// read first) is the one they were read at. Codes read after the generation are at least as new
// as it: a write in between only makes the next search read them again.
func (x *Index) ownerCodes(ctx context.Context, owner string, s Space, gen int64) (*ownerCodes, error) {
	k := cacheKey{owner: owner, space: s}
	if e := x.cache.get(k, gen); e != nil {
		return e, nil
	}
	rows, err := x.r.QueryContext(ctx, `SELECT doc_id, item_id, scope, code FROM retrieval_codes
		WHERE collection = $1 AND owner = $2 AND model = $3 AND dims = $4`, x.collection, owner, s.Model, s.Dims)
	if err != nil {
		return nil, fmt.Errorf("retrieval: vector search: %w", err)
	}
	defer rows.Close()
	n := codeWords(s.Dims)
	e := &ownerCodes{gen: gen}
	index := map[string]int32{}
	var blob sql.RawBytes
	var scope string
	for rows.Next() {
		var doc, item int64
		if err := rows.Scan(&doc, &item, &scope, &blob); err != nil {
			return nil, fmt.Errorf("retrieval: vector search: %w", err)
		}
		if len(blob) != 16*n {
			continue
		}
		i, ok := index[scope]
		if !ok {
			i = int32(len(e.names))
			index[scope] = i
			e.names = append(e.names, scope)
		}
		e.docs = append(e.docs, doc)
		e.items = append(e.items, item)
		e.scopes = append(e.scopes, i)
		for j := range 2 * n {
			e.words = append(e.words, binary.LittleEndian.Uint64(blob[8*j:]))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("retrieval: vector search: %w", err)
	}
	e.size = 8*len(e.words) + 20*len(e.docs) + 64
	x.cache.put(k, e)
	return e, nil
}

// best is the rescore docs of e best by their codes' score against c, of the scopes kept (nil:
// all), ties by doc id. Scores are whole numbers within ±dims: a count of each finds the lowest
// score kept without sorting every doc.
func (e *ownerCodes) best(c code, dims int, scopes []string) []scored {
	keep := e.keeps(scopes)
	n := len(c.pos)
	scores := make([]int32, len(e.docs))
	counts := make([]int, 2*dims+1)
	for i := range e.docs {
		if keep != nil && !keep[e.scopes[i]] {
			scores[i] = math.MinInt32
			continue
		}
		w := e.words[2*n*i : 2*n*(i+1)]
		sc := c.wordScore(w[:n], w[n:])
		scores[i] = int32(sc)
		counts[sc+dims]++
	}
	floor, kept := -dims, 0
	for v := dims; v >= -dims; v-- {
		kept += counts[v+dims]
		if kept >= rescore {
			floor = v
			break
		}
	}
	out := make([]scored, 0, min(kept, len(e.docs)))
	for i, sc := range scores {
		if sc != math.MinInt32 && int(sc) >= floor {
			out = append(out, scored{doc: e.docs[i], item: e.items[i], score: float32(sc)})
		}
	}
	return top(out, rescore, func(a, b scored) bool { return a.doc < b.doc })
}

// maxSizes bounds how many owners' text counts an index keeps; past it the counts are forgotten
// all at once (a count costs one query to read again).
const maxSizes = 4096

// sizeCache keeps owners' text counts, each as of a generation.
type sizeCache struct {
	mu      sync.Mutex
	entries map[string]ownerSize
}

type ownerSize struct {
	gen  int64
	size int
}

// ownerSize counts the owner's texts in the collection, from memory when gen (the owner's
// generation, read first) is the one they were counted at: every write of the owner's texts
// moves it, so a count kept is never older than its label.
func (x *Index) ownerSize(ctx context.Context, owner string, gen int64) (int, error) {
	c := x.sizes
	c.mu.Lock()
	e, ok := c.entries[owner]
	c.mu.Unlock()
	if ok && e.gen == gen {
		return e.size, nil
	}
	var n int
	if err := x.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM retrieval_docs WHERE collection = $1 AND owner = $2`,
		x.collection, owner).Scan(&n); err != nil {
		return 0, fmt.Errorf("retrieval: count the owner's texts: %w", err)
	}
	c.mu.Lock()
	if len(c.entries) >= maxSizes {
		clear(c.entries)
	}
	c.entries[owner] = ownerSize{gen: gen, size: n}
	c.mu.Unlock()
	return n, nil
}

// ownerDocs returns the owner's texts (row ids ascending, with their items and scopes) as of gen,
// the generation r's snapshot holds: from memory when they were read at gen, else read through r
// and kept. Every write of the owner's texts moves the generation, so texts kept at gen are the
// snapshot's.
func (x *Index) ownerDocs(ctx context.Context, r querier, owner string, gen int64) (*ownerCodes, error) {
	k := cacheKey{owner: owner}
	if e := x.cache.get(k, gen); e != nil {
		return e, nil
	}
	rows, err := r.QueryContext(ctx, `SELECT id, item_id, scope FROM retrieval_docs WHERE collection = $1 AND owner = $2 ORDER BY id`,
		x.collection, owner)
	if err != nil {
		return nil, fmt.Errorf("retrieval: the owner's texts: %w", err)
	}
	defer rows.Close()
	e := &ownerCodes{gen: gen}
	index := map[string]int32{}
	var scope string
	for rows.Next() {
		var doc, item int64
		if err := rows.Scan(&doc, &item, &scope); err != nil {
			return nil, fmt.Errorf("retrieval: the owner's texts: %w", err)
		}
		i, ok := index[scope]
		if !ok {
			i = int32(len(e.names))
			index[scope] = i
			e.names = append(e.names, scope)
		}
		e.docs = append(e.docs, doc)
		e.items = append(e.items, item)
		e.scopes = append(e.scopes, i)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("retrieval: the owner's texts: %w", err)
	}
	e.size = 20*len(e.docs) + 64
	x.cache.put(k, e)
	return e, nil
}

// keeps is which of e's scopes scopes keeps (nil: all).
func (e *ownerCodes) keeps(scopes []string) []bool {
	if scopes == nil {
		return nil
	}
	keep := make([]bool, len(e.names))
	for i, name := range e.names {
		keep[i] = slices.Contains(scopes, name)
	}
	return keep
}
