package retrieval

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// querier reads: the read pool, or one read transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// keywordSQLite ranks the owner's texts holding any of terms by BM25-like weights: each word's
// hits in a text (FTS4's matchinfo 'y') times its inverse document frequency among all the
// keyword index's texts.
//
// The postings are read alone, not joined with each text's row: a word prefixed with the
// owner's key (ownedWords) has postings in the owner's texts only, and every text holding a
// word of the query is a row of the OR query, so counting the rows with a word's hits is that
// word's document frequency (what matchinfo 'x' computes by reading every posting again). The
// texts' items and scopes come from the owner's list of texts kept in memory (ownerDocs), read
// again when the owner's generation moved. One read transaction holds it all to one snapshot.
func (x *Index) keywordSQLite(ctx context.Context, q Query, terms []string) ([]int64, error) {
	if q.Scopes != nil && len(q.Scopes) == 0 {
		return nil, nil
	}
	key := x.ownerKey(q.Owner)
	match := make([]string, len(terms))
	for i, t := range terms {
		match[i] = key + t
	}
	tx, err := x.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("retrieval: keyword search: %w", err)
	}
	defer tx.Rollback()
	gen, err := x.generationIn(ctx, tx, q.Owner)
	if err != nil {
		return nil, err
	}
	docs, err := x.ownerDocs(ctx, tx, q.Owner, gen)
	if err != nil {
		return nil, err
	}
	if match, err = rareTerms(ctx, tx, len(docs.docs), match); err != nil {
		return nil, err
	}
	total, err := indexedTexts(ctx, tx)
	if err != nil {
		return nil, err
	}
	hits, err := postings(ctx, tx, match, total)
	if err != nil {
		return nil, err
	}
	return bestItems(hits, docs, q.Scopes), nil
}

// indexedTexts is how many texts the keyword index holds (every collection's): the first varint
// of its statistics row, the count matchinfo 'n' reports.
func indexedTexts(ctx context.Context, r querier) (float64, error) {
	var stat []byte
	err := r.QueryRowContext(ctx, `SELECT value FROM retrieval_docs_fts_stat WHERE id = 0`).Scan(&stat)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("retrieval: keyword search: the index's count: %w", err)
	}
	n, size := binary.Uvarint(stat)
	if size <= 0 {
		return 0, fmt.Errorf("retrieval: keyword search: the index's count: %d bytes unreadable", len(stat))
	}
	return float64(uint32(n)), nil
}

// hit is a text holding a word of the query (by the keyword index's row id, or by item) and its
// weight.
type hit struct {
	doc   int64
	score float64
}

// postings reads the rows holding any of match (prefixed words) with each word's hits in the
// body column and weighs them: the sum over the words of hits/(hits+1.2) times the word's
// inverse document frequency among total texts.
func postings(ctx context.Context, r querier, match []string, total float64) ([]hit, error) {
	rows, err := r.QueryContext(ctx, `SELECT docid, matchinfo(retrieval_docs_fts, 'y') FROM retrieval_docs_fts
		WHERE retrieval_docs_fts MATCH $1`, strings.Join(match, " OR "))
	if err != nil {
		return nil, fmt.Errorf("retrieval: keyword search: %w", err)
	}
	defer rows.Close()
	p := len(match)
	var docs []int64
	var tf []uint32 // p per row: the body column's hits of each word
	df := make([]float64, p)
	var info sql.RawBytes
	for rows.Next() {
		var doc int64
		if err := rows.Scan(&doc, &info); err != nil {
			return nil, fmt.Errorf("retrieval: keyword search: %w", err)
		}
		// 'y' is, per word and column (owner_key, body), the hits in this row.
		if len(info) != 8*p {
			return nil, fmt.Errorf("retrieval: keyword search: matchinfo of %d bytes for %d words", len(info), p)
		}
		docs = append(docs, doc)
		for ph := range p {
			h := binary.NativeEndian.Uint32(info[8*ph+4:])
			tf = append(tf, h)
			if h > 0 {
				df[ph]++
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("retrieval: keyword search: %w", err)
	}
	idf := make([]float64, p)
	for ph, d := range df {
		idf[ph] = math.Log(1 + (total-d+0.5)/(d+0.5))
	}
	out := make([]hit, len(docs))
	for i, doc := range docs {
		score := 0.0
		for ph := range p {
			if h := float64(tf[i*p+ph]); h > 0 {
				score += h / (h + 1.2) * idf[ph]
			}
		}
		out[i] = hit{doc: doc, score: score}
	}
	return out, nil
}

// byScore orders hits best first: higher score, then lower id.
func byScore(a, b hit) int {
	if c := cmp.Compare(b.score, a.score); c != 0 {
		return c
	}
	return cmp.Compare(a.doc, b.doc)
}

// bestItems is the candidates best of hits that are docs' texts of the scopes kept (nil: all),
// ordered by score, then item.
func bestItems(hits []hit, docs *ownerCodes, scopes []string) []int64 {
	keep := docs.keeps(scopes)
	kept := make([]hit, 0, len(hits))
	for _, h := range hits {
		i, ok := slices.BinarySearch(docs.docs, h.doc)
		if !ok || keep != nil && !keep[docs.scopes[i]] {
			continue
		}
		kept = append(kept, hit{doc: docs.items[i], score: h.score})
	}
	slices.SortFunc(kept, byScore)
	out := make([]int64, 0, min(len(kept), candidates))
	for _, h := range kept[:min(len(kept), candidates)] {
		out = append(out, h.doc)
	}
	return out
}
