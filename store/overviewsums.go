package store

import (
	"maps"
	"slices"
	"time"

	"relaybot/audit"
	"relaybot/chat"
)

// sums are what one bucket of the overview holds before it is priced and ranked, as the rows
// give it and as an hour of the roll-up keeps it: counts and sums, each model's calls apart (so
// that they are priced when read, at the running config's prices), and the replies' times as
// counts per millisecond value (exact from the rows; rounded to two significant digits in the
// roll-up, replyTime).
type sums struct {
	Turns    int64 `json:"turns,omitempty"`
	Waits    int64 `json:"waits,omitempty"`
	WaitedMS int64 `json:"waited_ms,omitempty"`
	// Errors counts the turns that ended in error by their failure ("" for an error of another kind).
	Errors map[chat.Failure]int64 `json:"errors,omitempty"`
	Models map[string]*modelSums  `json:"models,omitempty"`
	Tools  map[audit.Status]int64 `json:"tools,omitempty"`
	First  map[int64]int64        `json:"first,omitempty"`
	Final  map[int64]int64        `json:"final,omitempty"`
}

// modelSums are one model's calls in a bucket.
type modelSums struct {
	N         int64 `json:"n"`
	Errors    int64 `json:"errors,omitempty"`
	TokensIn  int64 `json:"in,omitempty"`
	TokensOut int64 `json:"out,omitempty"`
	Cached    int64 `json:"cached,omitempty"`
	Wrote     int64 `json:"wrote,omitempty"`
	AudioMs   int64 `json:"audio_ms,omitempty"`
	Images    int64 `json:"images,omitempty"`
}

func (m *modelSums) add(o modelSums) {
	m.N += o.N
	m.Errors += o.Errors
	m.TokensIn += o.TokensIn
	m.TokensOut += o.TokensOut
	m.Cached += o.Cached
	m.Wrote += o.Wrote
	m.AudioMs += o.AudioMs
	m.Images += o.Images
}

// tally adds n to (*m)[k], making the map when it has none.
func tally[K comparable](m *map[K]int64, k K, n int64) {
	if *m == nil {
		*m = map[K]int64{}
	}
	(*m)[k] += n
}

// add adds o's counts, sums and times to s.
func (s *sums) add(o *sums) {
	s.Turns += o.Turns
	s.Waits += o.Waits
	s.WaitedMS += o.WaitedMS
	for k, v := range o.Errors {
		tally(&s.Errors, k, v)
	}
	for k, v := range o.Tools {
		tally(&s.Tools, k, v)
	}
	for k, v := range o.First {
		tally(&s.First, k, v)
	}
	for k, v := range o.Final {
		tally(&s.Final, k, v)
	}
	for name, m := range o.Models {
		if s.Models == nil {
			s.Models = map[string]*modelSums{}
		}
		if s.Models[name] == nil {
			s.Models[name] = &modelSums{}
		}
		s.Models[name].add(*m)
	}
}

// empty reports whether the bucket saw nothing.
func (s *sums) empty() bool {
	return s.Turns == 0 && len(s.Errors) == 0 && len(s.Models) == 0 && len(s.Tools) == 0 && len(s.First) == 0 && len(s.Final) == 0
}

// bucket is s as the overview shows [start, end): priced at prices, its times ranked.
func (s *sums) bucket(start, end time.Time, prices map[string]chat.Price) OverviewBucket {
	b := OverviewBucket{Start: start, End: end, Turns: s.Turns, Waits429: s.Waits, Waited429MS: s.WaitedMS,
		FirstText: percentiles(s.First), Final: percentiles(s.Final)}
	if len(s.Errors) > 0 {
		b.Failures = maps.Clone(s.Errors)
		for _, n := range s.Errors {
			b.TurnErrors += n
		}
	}
	if len(s.Tools) > 0 {
		b.ToolCalls = maps.Clone(s.Tools)
		for st, n := range s.Tools {
			if st.Failed() {
				b.ToolErrors += n
			}
		}
	}
	for name, m := range s.Models {
		b.ModelCalls += m.N
		b.ModelErrors += m.Errors
		b.TokensIn += m.TokensIn
		b.TokensOut += m.TokensOut
		b.CachedIn += m.Cached
		b.CacheWriteIn += m.Wrote
		p := prices[name]
		b.Cost += p.Bill(m.TokensIn, m.Cached, m.Wrote, m.TokensOut) + p.AudioCost(m.AudioMs) + p.ImageCost(m.Images)
	}
	return b
}

// percentiles are the nearest-rank p50 and p95 of the times counted in ms (value → count).
func percentiles(ms map[int64]int64) Percentiles {
	var n int64
	for _, c := range ms {
		n += c
	}
	if n == 0 {
		return Percentiles{}
	}
	values := slices.Sorted(maps.Keys(ms))
	rank := func(p int64) int64 {
		want, seen := (n*p+99)/100, int64(0)
		for _, v := range values {
			if seen += ms[v]; seen >= want {
				return v
			}
		}
		return values[len(values)-1]
	}
	return Percentiles{N: n, P50: rank(50), P95: rank(95)}
}

// replyTime is a reply time as the roll-up keeps it: to two significant digits (within 5%), so
// an hour keeps at most a few hundred distinct values however many turns it had.
func replyTime(ms int64) int64 {
	if ms < 100 {
		return ms
	}
	scale := int64(1)
	for ms/scale >= 100 {
		scale *= 10
	}
	return (ms + scale/2) / scale * scale
}
