package retrieval_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
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

// TestAHeavyOwnersKeywordSearchOnPostgresWeighsItsPostings: on PostgreSQL an owner of 5,000
// texts or more is searched from its words' postings, kept in memory by its generation: the
// items found, in order, are those a weighing of the texts themselves ranks first (each query
// word's hits/(hits+1.2) times its inverse document frequency among the owner's texts; ties by
// item), with and without scopes; another replica's add, replace and delete change the next
// search here; a small owner beside it is searched as before, by ts_rank.
func TestAHeavyOwnersKeywordSearchOnPostgresWeighsItsPostings(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, storetest.Postgres)
	x := open(t, db, retrieval.Postgres, "knowledge")
	replica := open(t, db, retrieval.Postgres, "knowledge")
	vocab := strings.Fields("the leave policy annual parental receipts laptop badge train flight hotel canteen " +
		"parking wifi drill pension bonus office visitor insurance salary review")
	r := rand.New(rand.NewPCG(11, 68))
	text := func(i int) string {
		n := 3 + r.IntN(12)
		words := make([]string, 0, n+1)
		for range n {
			words = append(words, vocab[int(float64(len(vocab))*r.Float64()*r.Float64())])
		}
		if i%5 == 0 {
			words = append(words, fmt.Sprintf("unique%d", i%40))
		}
		return strings.Join(words, " ")
	}
	scopes := []string{"", "a", "b"}
	texts := map[int64]retrieval.Doc{} // what the database holds of "big", by item
	var docs []retrieval.Doc
	for i := range 5200 {
		d := retrieval.Doc{Item: int64(i + 1), Owner: "big", Scope: scopes[i%3], Text: text(i)}
		docs, texts[d.Item] = append(docs, d), d
	}
	for i := range 50 {
		docs = append(docs, retrieval.Doc{Item: int64(10000 + i), Owner: "small", Text: text(i)})
	}
	if err := x.PutMany(ctx, docs, nil, retrieval.Space{}); err != nil {
		t.Fatal(err)
	}
	// want ranks the owner's texts of the scopes kept (nil: all) as the leg should.
	want := func(sc []string, query string) []int64 {
		df := map[string]float64{}
		tf := map[int64]map[string]float64{}
		for item, d := range texts {
			tf[item] = map[string]float64{}
			for _, w := range strings.Fields(d.Text) {
				if tf[item][w] == 0 {
					df[w]++
				}
				tf[item][w]++
			}
		}
		total := float64(len(texts))
		type scored struct {
			item  int64
			score float64
		}
		var all []scored
		for item, d := range texts {
			if sc != nil && !slices.Contains(sc, d.Scope) {
				continue
			}
			s, found := 0.0, false
			for _, w := range retrieval.Terms(query) {
				if h := tf[item][w]; h > 0 {
					s += h / (h + 1.2) * math.Log(1+(total-df[w]+0.5)/(df[w]+0.5))
					found = true
				}
			}
			if found {
				all = append(all, scored{item, s})
			}
		}
		slices.SortFunc(all, func(a, b scored) int {
			if a.score != b.score {
				return cmp.Compare(b.score, a.score)
			}
			return cmp.Compare(a.item, b.item)
		})
		out := []int64{}
		for _, s := range all[:min(len(all), 50)] {
			out = append(out, s.item)
		}
		return out
	}
	queries := []string{"leave", "the leave", "annual parental leave policy", "receipts for the hotel", "unique7",
		"unique7 unique8 the", "nothing here", "THE LEAVE POLICY", "wifi wifi wifi", "zebra crossing", texts[42].Text}
	check := func(stage string) {
		t.Helper()
		for _, sc := range [][]string{nil, {"a"}, {"a", "b"}, {""}} {
			for _, query := range queries {
				got, err := x.KeywordList(ctx, retrieval.Query{Owner: "big", Scopes: sc, Text: query})
				if err != nil {
					t.Fatal(err)
				}
				if w := want(sc, query); !slices.Equal(got, w) && !(len(got) == 0 && len(w) == 0) {
					t.Errorf("%s: %q in %q found %v, want %v", stage, sc, query, got, w)
				}
			}
		}
		if got, err := x.KeywordList(ctx, retrieval.Query{Owner: "big", Scopes: []string{}, Text: "leave"}); err != nil || len(got) != 0 {
			t.Errorf("%s: no scope kept found %v, %v", stage, got, err)
		}
	}
	check("stored")

	// Another replica's writes: a new text, one replaced, one deleted.
	added := retrieval.Doc{Item: 6000, Owner: "big", Text: "zebra crossing at the office"}
	replaced := retrieval.Doc{Item: 10, Owner: "big", Scope: "a", Text: "zebra zebra leave"}
	for _, d := range []retrieval.Doc{added, replaced} {
		if err := replica.Put(ctx, d, nil, retrieval.Space{}); err != nil {
			t.Fatal(err)
		}
		texts[d.Item] = d
	}
	if err := replica.Delete(ctx, 43); err != nil {
		t.Fatal(err)
	}
	delete(texts, 43)
	check("after another replica's writes")
	if got, err := x.KeywordList(ctx, retrieval.Query{Owner: "big", Text: "zebra"}); err != nil || !slices.Equal(got, []int64{10, 6000}) {
		t.Fatalf("the other replica's texts: found %v (%v), want [10 6000]", got, err)
	}

	// The small owner's search is its own (ts_rank): its texts only.
	got, err := x.KeywordList(ctx, retrieval.Query{Owner: "small", Text: "leave policy"})
	if err != nil || len(got) == 0 {
		t.Fatalf("the small owner's search: %v, %v", got, err)
	}
	for _, item := range got {
		if item < 10000 {
			t.Fatalf("the small owner's search found the heavy owner's item %d", item)
		}
	}
}

// TestAHeavyOwnerTooBigForTheCacheIsStillSearched: an owner of 5,000 texts whose postings do
// not fit the index's cache is searched by ts_rank on PostgreSQL, as before 066: every text
// found holds a word of the query, and the texts holding both come first.
func TestAHeavyOwnerTooBigForTheCacheIsStillSearched(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t, storetest.Postgres)
	x := open(t, db, retrieval.Postgres, "knowledge")
	x.SetCacheBytes(64 << 10)
	vocab := strings.Fields("leave policy hotel train badge parking wifi drill pension bonus office visitor")
	docs := make([]retrieval.Doc, 5000)
	for i := range docs {
		docs[i] = retrieval.Doc{Item: int64(i + 1), Owner: "big",
			Text: fmt.Sprintf("%s %s %s", vocab[i%len(vocab)], vocab[(i/7)%len(vocab)], vocab[(i/13)%len(vocab)])}
	}
	if err := x.PutMany(ctx, docs, nil, retrieval.Space{}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second search at the same generation does not try the cache again
		got, err := x.KeywordList(ctx, retrieval.Query{Owner: "big", Text: "hotel wifi"})
		if err != nil || len(got) != 50 {
			t.Fatalf("found %d texts (%v), want 50", len(got), err)
		}
		both := true
		for _, item := range got {
			text := docs[item-1].Text
			has := strings.Contains(text, "hotel") && strings.Contains(text, "wifi")
			if !has && !strings.Contains(text, "hotel") && !strings.Contains(text, "wifi") {
				t.Fatalf("found %q, which holds neither word", text)
			}
			if has && !both {
				t.Fatalf("a text holding both words ranks after one holding one: %v", got)
			}
			both = both && has
		}
	}
}
