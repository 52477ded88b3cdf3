package retrieval

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strings"
)

// KeywordListExact is the keyword leg as it was before the postings were read alone (decision
// 060): every hit joined with its text's row and weighed by matchinfo 'pcnx'. Tests hold
// KeywordList to it on SQLite.
func (x *Index) KeywordListExact(ctx context.Context, q Query) ([]int64, error) {
	terms := Terms(q.Text)
	if len(terms) == 0 || x.dialect != SQLite {
		return nil, fmt.Errorf("the exact keyword leg is SQLite's, for a query with words")
	}
	var owned int
	if err := x.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM retrieval_docs WHERE collection = $1 AND owner = $2`,
		x.collection, q.Owner).Scan(&owned); err != nil {
		return nil, err
	}
	key := x.ownerKey(q.Owner)
	match := make([]string, len(terms))
	for i, t := range terms {
		match[i] = key + t
	}
	match, err := rareTerms(ctx, x.r, owned, match)
	if err != nil {
		return nil, err
	}
	cond, args := x.where(q, 2)
	rows, err := x.r.QueryContext(ctx, `SELECT d.item_id, matchinfo(retrieval_docs_fts, 'pcnx')
		FROM retrieval_docs_fts CROSS JOIN retrieval_docs d ON d.id = retrieval_docs_fts.docid
		WHERE retrieval_docs_fts MATCH $1 AND `+cond,
		append([]any{strings.Join(match, " OR ")}, args...)...)
	if err != nil {
		return nil, err
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
			return nil, err
		}
		s.score = matchScore(info)
		all = append(all, s)
	}
	if err := rows.Err(); err != nil {
		return nil, err
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

// SetCacheBytes sets how many bytes of codes and postings x keeps in memory.
func (x *Index) SetCacheBytes(n int) { x.cache.mu.Lock(); x.cache.max = n; x.cache.mu.Unlock() }
