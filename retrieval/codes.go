package retrieval

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// A vector search reads each candidate's code first, not its vector: a code keeps two bits a
// number (above a threshold, below minus it, or near zero), sixteen times fewer bytes than the
// float32s. The best rescore codes by that rough similarity are then compared exactly, so an
// owner with at most rescore vectors gets exactly the ranking of an exact scan, and a larger one
// the exact ranking of the rescore texts its codes put first (decision 059).

// rescore is how many texts, best by their codes, a vector search compares exactly.
const rescore = 400

// codeThreshold is the magnitude below which a number of a unit vector of dims numbers counts as
// zero in its code: 0.43/√dims leaves about a third of a dense vector's numbers at zero (its
// numbers spread as a normal of deviation 1/√dims), and a sparse vector's nonzero numbers above it.
func codeThreshold(dims int) float32 { return float32(0.43 / math.Sqrt(float64(dims))) }

// codeWords is how many 64-bit words one bit plane of a code of dims numbers holds.
func codeWords(dims int) int { return (dims + 63) / 64 }

// encodeCode is the code of the unit vector v: the plane of numbers above the threshold, then the
// plane of numbers below minus it, each as little-endian 64-bit words.
func encodeCode(v []float32) []byte {
	n := codeWords(len(v))
	pos := make([]uint64, n)
	neg := make([]uint64, n)
	t := codeThreshold(len(v))
	for i, x := range v {
		switch {
		case x > t:
			pos[i/64] |= 1 << (i % 64)
		case x < -t:
			neg[i/64] |= 1 << (i % 64)
		}
	}
	b := make([]byte, 16*n)
	for i := range n {
		binary.LittleEndian.PutUint64(b[8*i:], pos[i])
		binary.LittleEndian.PutUint64(b[8*(n+i):], neg[i])
	}
	return b
}

// code is a query's code, as words.
type code struct{ pos, neg []uint64 }

func newCode(v []float32) code {
	b := encodeCode(v)
	n := codeWords(len(v))
	c := code{pos: make([]uint64, n), neg: make([]uint64, n)}
	for i := range n {
		c.pos[i] = binary.LittleEndian.Uint64(b[8*i:])
		c.neg[i] = binary.LittleEndian.Uint64(b[8*(n+i):])
	}
	return c
}

// wordScore is the code's estimate of the dot product with a stored code's planes: numbers of
// the same sign count one, of opposite signs minus one.
func (c code) wordScore(pos, neg []uint64) int {
	s := 0
	for i := range c.pos {
		p, q := pos[i], neg[i]
		s += bits.OnesCount64(c.pos[i]&p) + bits.OnesCount64(c.neg[i]&q) -
			bits.OnesCount64(c.pos[i]&q) - bits.OnesCount64(c.neg[i]&p)
	}
	return s
}

// scored is a text and its similarity to a query.
type scored struct {
	doc, item int64
	score     float32
}

// top keeps the n best of all by score (ties by less), best first.
func top(all []scored, n int, less func(a, b scored) bool) []scored {
	sortScored(all, less)
	return all[:min(len(all), n)]
}

// backfillCodes gives every vector of the collection that has no code one (vectors stored before
// codes existed), in batches. On pgvector the vectors are read in their text form.
func (x *Index) backfillCodes(ctx context.Context) error {
	col := "v.embedding"
	if x.Pgvector() {
		col = "v.embedding::text"
	}
	for {
		rows, err := x.r.QueryContext(ctx, `SELECT d.id, d.item_id, d.owner, d.scope, v.model, v.dims, `+col+` FROM retrieval_vectors v
			JOIN retrieval_docs d ON d.id = v.doc_id AND d.collection = $1
			WHERE NOT EXISTS (SELECT 1 FROM retrieval_codes c WHERE c.doc_id = v.doc_id AND c.model = v.model AND c.dims = v.dims)
			LIMIT 500`, x.collection)
		if err != nil {
			return fmt.Errorf("retrieval: vectors without codes: %w", err)
		}
		type missing struct {
			doc   coded
			space Space
			vec   []float32
		}
		var batch []missing
		for rows.Next() {
			var m missing
			var raw []byte
			if err := rows.Scan(&m.doc.id, &m.doc.item, &m.doc.owner, &m.doc.scope, &m.space.Model, &m.space.Dims, &raw); err != nil {
				rows.Close()
				return fmt.Errorf("retrieval: vectors without codes: %w", err)
			}
			if m.vec, err = x.decodeStored(raw, m.space.Dims); err != nil {
				rows.Close()
				return fmt.Errorf("retrieval: the vector of doc %d: %w", m.doc.id, err)
			}
			batch = append(batch, m)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("retrieval: vectors without codes: %w", err)
		}
		if len(batch) == 0 {
			return nil
		}
		tx, err := x.begin(ctx)
		if err != nil {
			return fmt.Errorf("retrieval: codes: %w", err)
		}
		for _, m := range batch {
			if err := x.putCode(ctx, tx, m.doc, m.space, m.vec); err != nil {
				tx.Rollback()
				return fmt.Errorf("retrieval: codes: %w", err)
			}
		}
		if err := tx.commit(ctx); err != nil {
			return fmt.Errorf("retrieval: codes: %w", err)
		}
	}
}

// decodeStored reads a stored vector: little-endian float32s, or pgvector's text "[1,2,3]".
func (x *Index) decodeStored(raw []byte, dims int) ([]float32, error) {
	if !x.Pgvector() {
		if len(raw) != 4*dims {
			return nil, fmt.Errorf("%d bytes for %d numbers", len(raw), dims)
		}
		v := make([]float32, dims)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return v, nil
	}
	s := strings.TrimSuffix(strings.TrimPrefix(string(raw), "["), "]")
	parts := strings.Split(s, ",")
	if len(parts) != dims {
		return nil, fmt.Errorf("%d numbers, want %d", len(parts), dims)
	}
	v := make([]float32, dims)
	for i, p := range parts {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 32)
		if err != nil {
			return nil, err
		}
		v[i] = float32(f)
	}
	return v, nil
}

// coded is a doc as its code's row repeats it.
type coded struct {
	id    int64
	item  int64
	owner string
	scope string
}

// putCode stores the code of the unit vector v of doc d in space s.
func (x *Index) putCode(ctx context.Context, tx *writeTx, d coded, s Space, v []float32) error {
	tx.owners[d.owner] = true
	_, err := tx.ExecContext(ctx, `INSERT INTO retrieval_codes (collection, owner, model, dims, doc_id, item_id, scope, code)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (collection, owner, model, dims, doc_id) DO UPDATE SET item_id = excluded.item_id, scope = excluded.scope, code = excluded.code`,
		x.collection, d.owner, s.Model, s.Dims, d.id, d.item, d.scope, encodeCode(v))
	return err
}

// sortScored orders all best first: higher score, then less.
func sortScored(all []scored, less func(a, b scored) bool) {
	slices.SortFunc(all, func(a, b scored) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		case less(a, b):
			return -1
		case less(b, a):
			return 1
		}
		return 0
	})
}
