package retrieval

import "sort"

// RRFK is the constant of reciprocal rank fusion: a result's score is the sum over the lists it
// is in of 1/(RRFK + its rank), ranks from 1. 60 is the value of the method's paper, and what
// most hybrid search engines use.
const RRFK = 60

// Fuse merges ranked lists of ids (best first) by reciprocal rank fusion and returns at most
// limit ids, best first; ties keep the order of the first list that has them.
func Fuse(limit int, lists ...[]int64) []int64 {
	score := map[int64]float64{}
	first := map[int64]int{}
	n := 0
	for _, list := range lists {
		for rank, id := range list {
			if _, seen := first[id]; !seen {
				first[id] = n
				n++
			}
			score[id] += 1 / float64(RRFK+rank+1)
		}
	}
	out := make([]int64, 0, len(score))
	for id := range score {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool {
		if score[out[i]] != score[out[j]] {
			return score[out[i]] > score[out[j]]
		}
		return first[out[i]] < first[out[j]]
	})
	if limit >= 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}
