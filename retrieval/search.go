package retrieval

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode"
)

// candidates is how many results each of keyword and vector search hands to the fusion.
const candidates = 50

// maxTerms bounds the words of a keyword query.
const maxTerms = 24

// Query is one search of an owner's texts.
type Query struct {
	Owner string
	// Scopes, when not nil, keeps only texts of these scopes.
	Scopes []string
	// Text is searched by its words; empty skips keyword search.
	Text string
	// Vector, when set, is compared with the stored vectors of Space only.
	Vector []float32
	Space  Space
	// Limit is the most items returned (default 10).
	Limit int
	// Approximate searches pgvector's HNSW graph of the space (built on first use) instead of
	// comparing every vector of the owner: for owners of tens of thousands of texts (a
	// knowledge base), not a person's facts. Without pgvector it changes nothing.
	Approximate bool
}

// Search returns the items that best answer q, best first: keyword and vector results merged by
// reciprocal rank fusion.
func (x *Index) Search(ctx context.Context, q Query) ([]int64, error) {
	if q.Limit <= 0 {
		q.Limit = 10
	}
	// The two legs read different rows and run at once: a recall waits for the slower of the
	// two, not their sum.
	var kw, vs []int64
	var kwErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		if terms := Terms(q.Text); len(terms) > 0 {
			kw, kwErr = x.keyword(ctx, q, terms)
		}
	}()
	var vsErr error
	if len(q.Vector) > 0 && q.Space.Valid() && len(q.Vector) == q.Space.Dims {
		vs, vsErr = x.vector(ctx, q)
	}
	<-done
	if kwErr != nil {
		return nil, kwErr
	}
	if vsErr != nil {
		return nil, vsErr
	}
	var lists [][]int64
	if kw != nil {
		lists = append(lists, kw)
	}
	if vs != nil {
		lists = append(lists, vs)
	}
	return Fuse(q.Limit, lists...), nil
}

// Terms are the words of text a keyword search looks for: runs of letters and digits, lower
// case, each once, at most 24.
func Terms(text string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range words(text) {
		if seen[w] || len(out) == maxTerms {
			continue
		}
		seen[w] = true
		out = append(out, w)
	}
	return out
}

// words are text's runs of letters and digits, lower case.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// where is the condition on retrieval_docs d for q, its arguments starting at $n.
func (x *Index) where(q Query, n int) (string, []any) {
	cond := fmt.Sprintf("d.collection = $%d AND d.owner = $%d", n, n+1)
	args := []any{x.collection, q.Owner}
	if q.Scopes != nil {
		if len(q.Scopes) == 0 {
			return cond + " AND 1 = 0", args
		}
		ph := make([]string, len(q.Scopes))
		for i, s := range q.Scopes {
			ph[i] = fmt.Sprintf("$%d", n+2+i)
			args = append(args, s)
		}
		cond += " AND d.scope IN (" + strings.Join(ph, ", ") + ")"
	}
	return cond, args
}

// keyword ranks the owner's texts holding any of terms: BM25-like weights from FTS4's matchinfo
// on SQLite, ts_rank on PostgreSQL.
func (x *Index) keyword(ctx context.Context, q Query, terms []string) ([]int64, error) {
	if x.dialect == Postgres {
		cond, args := x.where(q, 2)
		owned, err := x.ownerSize(ctx, q.Owner)
		if err != nil {
			return nil, err
		}
		// A person's few texts first (MATERIALIZED): the GIN index's postings of a common word
		// span every owner's texts. An owner of many texts (a knowledge base) the other way: the
		// postings of the query's words first, then the owner's filter, instead of ranking every
		// one of its texts.
		query := `WITH o AS MATERIALIZED (SELECT d.item_id, d.body_tsv FROM retrieval_docs d WHERE ` + cond + `)
			SELECT o.item_id FROM o, to_tsquery('simple', $1) q
			WHERE o.body_tsv @@ q ORDER BY ts_rank(o.body_tsv, q) DESC, o.item_id LIMIT ` + fmt.Sprint(candidates)
		if owned >= manyTexts {
			query = `SELECT d.item_id FROM retrieval_docs d, to_tsquery('simple', $1) q
			WHERE d.body_tsv @@ q AND ` + cond + ` ORDER BY ts_rank(d.body_tsv, q) DESC, d.item_id LIMIT ` + fmt.Sprint(candidates)
		}
		rows, err := x.r.QueryContext(ctx, query, append([]any{strings.Join(terms, " | ")}, args...)...)
		if err != nil {
			return nil, fmt.Errorf("retrieval: keyword search: %w", err)
		}
		return scanIDs(rows)
	}
	// CROSS JOIN keeps SQLite's loops in this order: the full-text query once, then each hit's
	// doc. The other order runs the whole query again for every doc of the owner.
	key := x.ownerKey(q.Owner)
	match := make([]string, len(terms))
	for i, t := range terms {
		match[i] = key + t
	}
	match, err := x.rareTerms(ctx, q, match)
	if err != nil {
		return nil, err
	}
	cond, args := x.where(q, 2)
	rows, err := x.r.QueryContext(ctx, `SELECT d.item_id, matchinfo(retrieval_docs_fts, 'pcnx')
		FROM retrieval_docs_fts CROSS JOIN retrieval_docs d ON d.id = retrieval_docs_fts.docid
		WHERE retrieval_docs_fts MATCH $1 AND `+cond,
		append([]any{strings.Join(match, " OR ")}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("retrieval: keyword search: %w", err)
	}
	defer rows.Close()
	type scored struct {
		id    int64
		score float64
	}
	var all []scored
	for rows.Next() {
		var s scored
		var info []byte
		if err := rows.Scan(&s.id, &info); err != nil {
			return nil, fmt.Errorf("retrieval: keyword search: %w", err)
		}
		s.score = matchScore(info)
		all = append(all, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("retrieval: keyword search: %w", err)
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].score != all[j].score {
			return all[i].score > all[j].score
		}
		return all[i].id < all[j].id
	})
	out := make([]int64, 0, min(len(all), candidates))
	for _, s := range all[:min(len(all), candidates)] {
		out = append(out, s.id)
	}
	return out, nil
}

// commonOwner is how many texts an owner has before a search of theirs leaves out words most of
// their texts hold: below it every word is searched.
const commonOwner = 200

// manyTexts is how many texts make an owner's keyword search on PostgreSQL start from the
// index's postings rather than from the owner's texts.
const manyTexts = 5000

// ownerSize counts the owner's texts in the collection.
func (x *Index) ownerSize(ctx context.Context, owner string) (int, error) {
	var n int
	if err := x.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM retrieval_docs WHERE collection = $1 AND owner = $2`,
		x.collection, owner).Scan(&n); err != nil {
		return 0, fmt.Errorf("retrieval: keyword search: %w", err)
	}
	return n, nil
}

// rareTerms leaves out of a heavy owner's keyword query the words more than half of the owner's
// texts hold, when a rarer word remains: such a word weighs almost nothing in the ranking
// (its inverse document frequency is near zero), but every text holding it would be read and
// weighed.
func (x *Index) rareTerms(ctx context.Context, q Query, match []string) ([]string, error) {
	if len(match) < 2 {
		return match, nil
	}
	owned, err := x.ownerSize(ctx, q.Owner)
	if err != nil {
		return nil, err
	}
	if owned < commonOwner {
		return match, nil
	}
	parts := make([]string, len(match))
	args := make([]any, len(match))
	for i, m := range match {
		parts[i] = fmt.Sprintf(`SELECT term, documents FROM retrieval_docs_terms WHERE col = '*' AND term = $%d`, i+1)
		args[i] = m
	}
	rows, err := x.r.QueryContext(ctx, strings.Join(parts, " UNION ALL "), args...)
	if err != nil {
		return nil, fmt.Errorf("retrieval: keyword search: %w", err)
	}
	defer rows.Close()
	common := map[string]bool{}
	for rows.Next() {
		var term string
		var docs int
		if err := rows.Scan(&term, &docs); err != nil {
			return nil, fmt.Errorf("retrieval: keyword search: %w", err)
		}
		if 2*docs > owned {
			common[term] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("retrieval: keyword search: %w", err)
	}
	var rare []string
	for _, m := range match {
		if !common[m] {
			rare = append(rare, m)
		}
	}
	if len(rare) == 0 {
		return match, nil
	}
	return rare, nil
}

// matchScore weighs a row from matchinfo 'pcnx' (phrases, columns, rows, then per phrase and
// column: hits in this row, hits in all rows, rows with hits): the body column's hits of each
// word times its inverse document frequency.
func matchScore(info []byte) float64 {
	u := func(i int) float64 {
		if 4*i+4 > len(info) {
			return 0
		}
		return float64(binary.NativeEndian.Uint32(info[4*i:]))
	}
	p, c, n := int(u(0)), int(u(1)), u(2)
	score := 0.0
	for ph := 0; ph < p; ph++ {
		base := 3 + 3*(ph*c+1) // column 1: body
		hits, docs := u(base), u(base+2)
		if hits > 0 && docs > 0 {
			score += hits / (hits + 1.2) * math.Log(1+(n-docs+0.5)/(docs+0.5))
		}
	}
	return score
}

// vector ranks the owner's texts that have a vector in q's space by cosine similarity: the
// owner's codes first, then the vectors of the best rescore of them compared exactly.
func (x *Index) vector(ctx context.Context, q Query) ([]int64, error) {
	v := append([]float32(nil), q.Vector...)
	normalize(v)
	if x.Pgvector() && q.Approximate {
		// SQLite numbers $N parameters in the order they first appear: the join's come first.
		cond, args := x.where(q, 3)
		join := "JOIN retrieval_vectors v ON v.doc_id = d.id AND v.model = $1 AND v.dims = $2"
		return x.approximate(ctx, q, v, join, cond, append([]any{q.Space.Model, q.Space.Dims}, args...))
	}
	e, err := x.ownerCodes(ctx, q.Owner, q.Space)
	if err != nil {
		return nil, err
	}
	best := e.best(newCode(v), q.Space.Dims, q.Scopes)
	if len(best) == 0 {
		return nil, nil
	}
	return x.rerank(ctx, q.Space, v, best)
}

// rerank orders the texts best by their codes by the exact cosine similarity of their vectors,
// ties by item id, and keeps the best candidates.
func (x *Index) rerank(ctx context.Context, s Space, v []float32, best []scored) ([]int64, error) {
	from := `FROM retrieval_vectors v JOIN retrieval_docs d ON d.id = v.doc_id
		WHERE v.model = $1 AND v.dims = $2 AND v.doc_id IN (` + docList(best) + `)`
	if x.Pgvector() {
		t := x.vecType(s.Dims)
		rows, err := x.r.QueryContext(ctx, fmt.Sprintf(`SELECT d.item_id %s
			ORDER BY v.embedding::%s OPERATOR(%s.<=>) $3::%s, d.item_id LIMIT %d`,
			from, t, quoteIdent(x.vecSchema), t, candidates), s.Model, s.Dims, pgvectorText(v))
		if err != nil {
			return nil, fmt.Errorf("retrieval: vector search: %w", err)
		}
		return scanIDs(rows)
	}
	rows, err := x.r.QueryContext(ctx, `SELECT v.doc_id, d.item_id, v.embedding `+from, s.Model, s.Dims)
	if err != nil {
		return nil, fmt.Errorf("retrieval: vector search: %w", err)
	}
	defer rows.Close()
	all := make([]scored, 0, len(best))
	var blob sql.RawBytes
	for rows.Next() {
		var r scored
		if err := rows.Scan(&r.doc, &r.item, &blob); err != nil {
			return nil, fmt.Errorf("retrieval: vector search: %w", err)
		}
		r.score = dotEncoded(v, blob)
		all = append(all, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("retrieval: vector search: %w", err)
	}
	out := make([]int64, 0, candidates)
	for _, r := range top(all, candidates, func(a, b scored) bool { return a.item < b.item }) {
		out = append(out, r.item)
	}
	return out, nil
}

// approximate is the vector search through the space's HNSW graph, its index scan continued
// (pgvector's iterative scan) until enough of the owner's texts are found.
func (x *Index) approximate(ctx context.Context, q Query, v []float32, join, cond string, args []any) ([]int64, error) {
	if err := x.ensureHNSW(ctx, q.Space); err != nil {
		return nil, err
	}
	tx, err := x.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("retrieval: vector search: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SET LOCAL hnsw.iterative_scan = relaxed_order`); err != nil {
		return nil, fmt.Errorf("retrieval: vector search: %w", err)
	}
	t := x.vecType(q.Space.Dims)
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(`SELECT d.item_id FROM retrieval_docs d %s WHERE %s
		ORDER BY v.embedding::%s OPERATOR(%s.<=>) $%d::%s LIMIT %d`,
		join, cond, t, quoteIdent(x.vecSchema), len(args)+1, t, candidates), append(args, pgvectorText(v))...)
	if err != nil {
		return nil, fmt.Errorf("retrieval: vector search: %w", err)
	}
	return scanIDs(rows)
}

// hnswMaxDims is the longest vector pgvector's HNSW index takes; longer ones are searched
// exactly.
const hnswMaxDims = 2000

// ensureHNSW creates the HNSW index of space s once (an expression index on the vectors of that
// model and length, cosine distance): a space's vectors are found through their own graph.
func (x *Index) ensureHNSW(ctx context.Context, s Space) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.hnsw[s] || s.Dims > hnswMaxDims {
		return nil
	}
	sum := sha256Hex(s.String())
	_, err := x.w.ExecContext(ctx, fmt.Sprintf(`CREATE INDEX IF NOT EXISTS idx_retrieval_vectors_hnsw_%s ON retrieval_vectors
		USING hnsw ((embedding::%s) %s.vector_cosine_ops) WHERE model = %s AND dims = %d`,
		sum, x.vecType(s.Dims), quoteIdent(x.vecSchema), quoteLiteral(s.Model), s.Dims))
	if err != nil {
		return fmt.Errorf("retrieval: create the HNSW index of %s: %w", s, err)
	}
	x.hnsw[s] = true
	return nil
}
