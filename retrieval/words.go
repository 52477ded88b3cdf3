package retrieval

import (
	"context"
	"fmt"
	"iter"
	"math"
	"strings"
	"sync"
)

// A heavy owner's keyword search on PostgreSQL (decision 066): ranking with ts_rank reads the row
// of every text holding a query word (thousands of heap pages in a 50,000-chunk base), which is
// most of a search's time. An owner of at least manyTexts texts instead has its words' postings
// (which texts hold each word, and how often) read once and kept in memory by its generation, as
// its codes are, and a search weighs them as SQLite's keyword leg does (BM25-like: each word's
// hits/(hits+1.2) times its inverse document frequency among the owner's texts).

// postingList is the texts holding one word (positions into an ownerCodes' docs, ascending)
// and the word's hits in each.
type postingList struct {
	docs []int32
	hits []uint16
}

// wordsState is an Index's heavy owners' postings beyond the code cache that keeps them (under
// kindWords): building serialises reading one owner's postings; tooBig remembers, by
// generation, the owners whose postings would not fit the cache, which search by ts_rank.
type wordsState struct {
	mu       sync.Mutex
	building map[string]*sync.Mutex
	tooBig   map[string]int64
}

func newWordsState() *wordsState {
	return &wordsState{building: map[string]*sync.Mutex{}, tooBig: map[string]int64{}}
}

// ownerWords returns the owner's postings as of gen: from memory when kept at gen, else read
// (one reader per owner at a time; the others wait for it and use what it read). It returns
// nil, with no error, when they do not fit the cache: the caller ranks with ts_rank instead.
func (x *Index) ownerWords(ctx context.Context, owner string, gen int64) (*ownerCodes, error) {
	if w := x.keptWords(owner, gen); w != nil {
		return w, nil
	}
	s := x.words
	if s.tooBigAt(owner, gen) {
		return nil, nil
	}
	s.mu.Lock()
	b := s.building[owner]
	if b == nil {
		b = &sync.Mutex{}
		s.building[owner] = b
	}
	s.mu.Unlock()
	b.Lock()
	defer b.Unlock()
	// The search this one waited for may have read them, or found them too big.
	if w := x.keptWords(owner, gen); w != nil {
		return w, nil
	}
	if s.tooBigAt(owner, gen) {
		return nil, nil
	}
	w, err := x.readWords(ctx, owner, gen)
	if err != nil || w != nil {
		return w, err
	}
	s.mu.Lock()
	if len(s.tooBig) >= maxSizes {
		clear(s.tooBig)
	}
	s.tooBig[owner] = gen
	s.mu.Unlock()
	return nil, nil
}

// tooBigAt reports whether the owner's postings were found too big for the cache at gen.
func (s *wordsState) tooBigAt(owner string, gen int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.tooBig[owner]
	return ok && g == gen
}

// keptWords is the owner's postings kept at gen, or nil.
func (x *Index) keptWords(owner string, gen int64) *ownerCodes {
	return x.cache.get(cacheKey{owner: owner, kind: kindWords}, gen)
}

// postingBytes is what one posting costs in memory (its position and its hits).
const postingBytes = 6

// readWords reads the owner's texts and each one's words with their hits, and keeps them in the
// cache; nil when they outgrow it.
func (x *Index) readWords(ctx context.Context, owner string, gen int64) (*ownerCodes, error) {
	// One row per text with its tsvector as text, parsed here: PostgreSQL writes it five times
	// faster than it unnests and aggregates the same lexemes (0.5 against 2.5 s for 50,000 texts).
	rows, err := x.r.QueryContext(ctx, `SELECT d.id, d.item_id, d.scope, d.body_tsv::text
		FROM retrieval_docs d WHERE d.collection = $1 AND d.owner = $2 ORDER BY d.id`, x.collection, owner)
	if err != nil {
		return nil, fmt.Errorf("retrieval: the owner's words: %w", err)
	}
	defer rows.Close()
	e := &ownerCodes{gen: gen, terms: map[string]postingList{}}
	index := map[string]int32{}
	size := 64
	var scope, words string
	for rows.Next() {
		var doc, item int64
		if err := rows.Scan(&doc, &item, &scope, &words); err != nil {
			return nil, fmt.Errorf("retrieval: the owner's words: %w", err)
		}
		i, ok := index[scope]
		if !ok {
			i = int32(len(e.names))
			index[scope] = i
			e.names = append(e.names, scope)
		}
		pos := int32(len(e.docs))
		e.docs = append(e.docs, doc)
		e.items = append(e.items, item)
		e.scopes = append(e.scopes, i)
		size += 20
		for lexeme, hits := range lexemes(words) {
			p, ok := e.terms[lexeme]
			if !ok {
				size += 48 + len(lexeme)
			}
			p.docs = append(p.docs, pos)
			p.hits = append(p.hits, hits)
			e.terms[lexeme] = p
			size += postingBytes
		}
		if size > x.cache.max {
			return nil, nil
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("retrieval: the owner's words: %w", err)
	}
	e.size = size
	x.cache.put(cacheKey{owner: owner, kind: kindWords}, e)
	return e, nil
}

// lexemes yields the lexemes of a tsvector's text (PostgreSQL's output, such as 'word':1,5B:
// each lexeme quoted, a quote inside doubled and a backslash escaped, positions optional) with the
// number of their positions (1 without any; at most 65,535). It stops at anything else.
func lexemes(tsv string) iter.Seq2[string, uint16] {
	return func(yield func(string, uint16) bool) {
		var b strings.Builder
		i := 0
		for i < len(tsv) {
			for i < len(tsv) && tsv[i] == ' ' {
				i++
			}
			if i == len(tsv) || tsv[i] != '\'' {
				return
			}
			i++
			b.Reset()
			closed := false
			for i < len(tsv) {
				c := tsv[i]
				switch {
				case c == '\'' && i+1 < len(tsv) && tsv[i+1] == '\'':
					b.WriteByte('\'')
					i += 2
				case c == '\'':
					closed = true
					i++
				case c == '\\' && i+1 < len(tsv):
					b.WriteByte(tsv[i+1])
					i += 2
				default:
					b.WriteByte(c)
					i++
				}
				if closed {
					break
				}
			}
			if !closed {
				return
			}
			hits := 1
			if i < len(tsv) && tsv[i] == ':' {
				hits = 0
				for i < len(tsv) && tsv[i] != ' ' {
					if tsv[i] == ':' || tsv[i] == ',' {
						hits++
					}
					i++
				}
			}
			if !yield(b.String(), uint16(min(hits, math.MaxUint16))) {
				return
			}
		}
	}
}

// searchWords weighs e's texts holding any of terms (e read by ownerWords) and returns the
// candidates best of the scopes kept (nil: all), ties by item.
func (w *ownerCodes) searchWords(terms []string, scopes []string) []int64 {
	total := float64(len(w.docs))
	score := map[int32]float64{}
	for _, t := range terms {
		p, ok := w.terms[t]
		if !ok {
			continue
		}
		df := float64(len(p.docs))
		idf := math.Log(1 + (total-df+0.5)/(df+0.5))
		for j, d := range p.docs {
			h := float64(p.hits[j])
			score[d] += h / (h + 1.2) * idf
		}
	}
	hits := make([]hit, 0, len(score))
	for d, s := range score {
		hits = append(hits, hit{doc: w.docs[d], score: s})
	}
	return bestItems(hits, w, scopes)
}
