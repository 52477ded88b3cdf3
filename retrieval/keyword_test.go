package retrieval_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"relaybot/retrieval"
	"relaybot/store/storetest"
)

// keywordVocabulary mixes a few words most texts hold, words some hold, rare ones, and words
// SQLite's tokenizer folds (case, diacritics).
var keywordVocabulary = strings.Fields("the leave policy annual parental Café cafe CAFÉ naïve über " +
	"receipts laptop badge train flight hotel canteen parking wifi drill 2026 v2 x1 pension bonus")

// keywordText is a generated text: skewed draws from the vocabulary (so scores tie and some
// words are in most texts), a few unique words.
func keywordText(r *rand.Rand, i int) string {
	n := 3 + r.IntN(12)
	words := make([]string, 0, n+1)
	for range n {
		k := int(float64(len(keywordVocabulary)) * r.Float64() * r.Float64())
		words = append(words, keywordVocabulary[k])
	}
	if i%5 == 0 {
		words = append(words, fmt.Sprintf("unique%d", i%40))
	}
	return strings.Join(words, " ")
}

// TestTheKeywordLegRanksAsTheExactJoinDoes holds SQLite's keyword leg (postings read alone,
// rows read for the best only) to the exact one it replaced (every hit joined with its row and
// weighed by matchinfo 'pcnx'): the same items in the same order, for owners large and small,
// with and without scopes, after deletes, replaced texts, moved scopes and owners, on a base
// beside another collection's texts.
func TestTheKeywordLegRanksAsTheExactJoinDoes(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, storetest.SQLite)
	x := open(t, db, retrieval.SQLite, "knowledge")
	other := open(t, db, retrieval.SQLite, "memory")
	r := rand.New(rand.NewPCG(7, 39))
	scopes := []string{"", "a", "b"}
	// Items in another order than the rows: ties are ordered by item, not by row.
	items := r.Perm(1500)
	var docs []retrieval.Doc
	for i := range 1500 {
		owner := "big"
		if i%10 == 0 {
			owner = "small"
		}
		docs = append(docs, retrieval.Doc{Item: int64(items[i] + 1), Owner: owner, Scope: scopes[i%3], Text: keywordText(r, i)})
	}
	if err := x.PutMany(ctx, docs, nil, retrieval.Space{}); err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		if err := other.Put(ctx, retrieval.Doc{Item: int64(i + 1), Owner: "big", Text: keywordText(r, i)}, nil, retrieval.Space{}); err != nil {
			t.Fatal(err)
		}
	}
	// Deleted, replaced, moved to another scope and to another owner.
	if err := x.Delete(ctx, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987); err != nil {
		t.Fatal(err)
	}
	for i := 100; i < 1500; i += 37 {
		d := retrieval.Doc{Item: int64(i + 1), Owner: []string{"big", "small"}[i%2], Scope: scopes[(i+1)%3], Text: keywordText(r, i+7)}
		if err := x.Put(ctx, d, nil, retrieval.Space{}); err != nil {
			t.Fatal(err)
		}
	}
	queries := []string{
		"leave", "the", "the leave", "annual parental leave policy", "cafe", "Café", "café naïve über",
		"receipts for the hotel", "unique7", "unique7 unique8 the", "nothing here", "2026 v2", "x1",
		"THE LEAVE POLICY", "wifi wifi wifi", docs[41].Text, docs[700].Text,
		strings.Join(keywordVocabulary, " "),
	}
	for _, owner := range []string{"big", "small", "nobody"} {
		for _, sc := range [][]string{nil, {"a"}, {"a", "b"}, {""}, {}} {
			for _, query := range queries {
				q := retrieval.Query{Owner: owner, Scopes: sc, Text: query}
				want, err := x.KeywordListExact(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				got, err := x.KeywordList(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s %q in %q: found %v, the exact ranking is %v", owner, sc, query, got, want)
				}
			}
		}
	}
}

// TestAKeywordSearchCountsTheOwnersTextsAnotherReplicaAdded: a heavy owner's search leaves out
// words most of their texts hold, by the owner's count of texts, which an index keeps between
// searches. Another replica's text (with no vector) that makes the owner heavy changes the next
// search of this one as it changes the exact ranking.
func TestAKeywordSearchCountsTheOwnersTextsAnotherReplicaAdded(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, storetest.SQLite)
	a := open(t, db, retrieval.SQLite, "memory")
	b := open(t, db, retrieval.SQLite, "memory")
	var docs []retrieval.Doc
	for i := range 199 { // one below the count that leaves common words out
		text := fmt.Sprintf("plays the cello on day%d", i)
		if i%10 == 0 {
			text = fmt.Sprintf("likes the opera on day%d", i)
		}
		docs = append(docs, retrieval.Doc{Item: int64(i + 1), Owner: "telegram:1", Text: text})
	}
	if err := a.PutMany(ctx, docs, nil, retrieval.Space{}); err != nil {
		t.Fatal(err)
	}
	q := retrieval.Query{Owner: "telegram:1", Text: "cello opera"}
	before, err := a.KeywordList(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 50 || before[0] != 1 {
		t.Fatalf("before: %v, want 50 texts, the operas first (item 1)", before)
	}
	if err := b.Put(ctx, retrieval.Doc{Item: 500, Owner: "telegram:1", Text: "went to the opera"}, nil, retrieval.Space{}); err != nil {
		t.Fatal(err)
	}
	want, err := a.KeywordListExact(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.KeywordList(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) || slices.Equal(got, before) {
		t.Errorf("after the other replica's text: %v, want the exact %v (not the earlier %v)", got, want, before)
	}
}
