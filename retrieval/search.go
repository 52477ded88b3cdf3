package retrieval

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
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
	var kw []int64
	var kwErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		kw, kwErr = x.KeywordList(ctx, q)
	}()
	vs, vsErr := x.VectorList(ctx, q)
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

// KeywordList is Search's keyword leg: up to 50 of the owner's items holding q.Text's words,
// best first; nil when q.Text has no words. Search fuses it with VectorList; a caller that
// computes the query's vector meanwhile runs the two itself and fuses them the same way.
func (x *Index) KeywordList(ctx context.Context, q Query) ([]int64, error) {
	terms := Terms(q.Text)
	if len(terms) == 0 {
		return nil, nil
	}
	if x.dialect == SQLite {
		return x.keywordSQLite(ctx, q, terms)
	}
	gen, err := x.generation(ctx, q.Owner)
	if err != nil {
		return nil, err
	}
	owned, err := x.ownerSize(ctx, q.Owner, gen)
	if err != nil {
		return nil, err
	}
	if owned >= manyTexts {
		// A heavy owner's postings from memory (decision 068), unless they outgrow the cache.
		if q.Scopes != nil && len(q.Scopes) == 0 {
			return nil, nil
		}
		w, err := x.ownerWords(ctx, q.Owner, gen)
		if err != nil {
			return nil, err
		}
		if w != nil {
			return w.searchWords(terms, q.Scopes), nil
		}
	}
	return x.keywordPostgres(ctx, q, terms, owned)
}

// VectorList is Search's vector leg: up to 50 of the owner's items nearest q.Vector in q.Space,
// best first; nil when q has no vector of its space's length.
func (x *Index) VectorList(ctx context.Context, q Query) ([]int64, error) {
	if len(q.Vector) == 0 || !q.Space.Valid() || len(q.Vector) != q.Space.Dims {
		return nil, nil
	}
	return x.vector(ctx, q)
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

// keywordPostgres ranks the owner's texts holding any of terms by ts_rank.
func (x *Index) keywordPostgres(ctx context.Context, q Query, terms []string, owned int) ([]int64, error) {
	cond, args := x.where(q, 2)
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

// commonOwner is how many texts an owner has before a search of theirs leaves out words most of
// their texts hold: below it every word is searched.
const commonOwner = 200

// manyTexts is how many texts make an owner's keyword search on PostgreSQL start from the
// index's postings rather than from the owner's texts.
const manyTexts = 5000

// rareTerms leaves out of a heavy owner's keyword query the words more than half of the owner's
// texts hold, when a rarer word remains: such a word weighs almost nothing in the ranking
// (its inverse document frequency is near zero), but every text holding it would be read and
// weighed.
func rareTerms(ctx context.Context, r querier, owned int, match []string) ([]string, error) {
	if len(match) < 2 || owned < commonOwner {
		return match, nil
	}
	parts := make([]string, len(match))
	args := make([]any, len(match))
	for i, m := range match {
		parts[i] = fmt.Sprintf(`SELECT term, documents FROM retrieval_docs_terms WHERE col = '*' AND term = $%d`, i+1)
		args[i] = m
	}
	rows, err := r.QueryContext(ctx, strings.Join(parts, " UNION ALL "), args...)
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
	gen, err := x.generation(ctx, q.Owner)
	if err != nil {
		return nil, err
	}
	e, err := x.ownerCodes(ctx, q.Owner, q.Space, gen)
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
	docs := make([]int64, len(best))
	items := make(map[int64]int64, len(best))
	for i, b := range best {
		docs[i], items[b.doc] = b.doc, b.item
	}
	// The list of docs is one parameter, so the statement's text is the same every search (a
	// connection keeps its prepared statements by their text).
	var list any = docs
	in := `= ANY($3)`
	if x.dialect == SQLite {
		ids, err := json.Marshal(docs)
		if err != nil {
			return nil, fmt.Errorf("retrieval: vector search: %w", err)
		}
		list, in = string(ids), `IN (SELECT value FROM json_each($3))`
	}
	if x.Pgvector() {
		t := x.vecType(s.Dims)
		rows, err := x.r.QueryContext(ctx, fmt.Sprintf(`SELECT d.item_id FROM retrieval_vectors v JOIN retrieval_docs d ON d.id = v.doc_id
			WHERE v.model = $1 AND v.dims = $2 AND v.doc_id %s
			ORDER BY v.embedding::%s OPERATOR(%s.<=>) $4::%s, d.item_id LIMIT %d`,
			in, t, quoteIdent(x.vecSchema), t, candidates), s.Model, s.Dims, list, pgvectorText(v))
		if err != nil {
			return nil, fmt.Errorf("retrieval: vector search: %w", err)
		}
		return scanIDs(rows)
	}
	// The items are the codes': a doc's item never changes, and its vectors go with it.
	rows, err := x.r.QueryContext(ctx, `SELECT v.doc_id, v.embedding FROM retrieval_vectors v
		WHERE v.model = $1 AND v.dims = $2 AND v.doc_id `+in, s.Model, s.Dims, list)
	if err != nil {
		return nil, fmt.Errorf("retrieval: vector search: %w", err)
	}
	defer rows.Close()
	all := make([]scored, 0, len(best))
	var blob sql.RawBytes
	for rows.Next() {
		var r scored
		if err := rows.Scan(&r.doc, &blob); err != nil {
			return nil, fmt.Errorf("retrieval: vector search: %w", err)
		}
		r.item = items[r.doc]
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
