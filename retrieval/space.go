// Package retrieval finds text again: embeddings from an OpenAI-compatible /v1/embeddings
// endpoint (with fallbacks, every call reported for usage and metrics), vectors and keyword
// search over the bot's own database, and the two merged by reciprocal rank fusion. Memory
// keeps each person's facts in it; knowledge bases keep their chunks in it.
//
// Every vector is stored with its Space, the model and dimension that made it, and a search
// compares only vectors of the query's space: a changed model is re-embedded (Reindex) instead
// of mixing spaces. Vectors are compared in Go on SQLite (and on a PostgreSQL without pgvector);
// on PostgreSQL with pgvector, by pgvector with an HNSW index per space. No native vector
// library is loaded, so nothing compiled for one CPU can crash the process on another
// (decision 047).
package retrieval

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Space is the vector space a vector lives in: the embedding model that made it and its length.
// Vectors of two spaces are never compared.
type Space struct {
	Model string
	Dims  int
}

// String is "model/dims".
func (s Space) String() string { return fmt.Sprintf("%s/%d", s.Model, s.Dims) }

// Valid reports whether the space names a model and a length.
func (s Space) Valid() bool { return s.Model != "" && s.Dims > 0 }

// normalize scales v to length 1 in place (a zero vector stays zero), so a dot product is the
// cosine similarity.
func normalize(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return
	}
	n := float32(1 / math.Sqrt(sum))
	for i := range v {
		v[i] *= n
	}
}

// encode writes v as little-endian float32s.
func encode(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// dotEncoded is the dot product of q and the little-endian float32s of b (as long as q).
func dotEncoded(q []float32, b []byte) float32 {
	if len(b) != 4*len(q) {
		return float32(math.Inf(-1))
	}
	var s float32
	for i, x := range q {
		s += x * math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return s
}

// pgvectorText is v as pgvector's text form, "[1,2,3]".
func pgvectorText(v []float32) string {
	b := make([]byte, 0, 1+len(v)*10)
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, "%g", x)
	}
	return string(append(b, ']'))
}
