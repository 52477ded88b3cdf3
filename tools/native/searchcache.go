package native

import (
	"sync"
	"time"
)

// resultCache keeps recent searches' results for a while, at most max queries: when full, the
// entry that expires first goes (all entries share one TTL, so that is the oldest).
type resultCache struct {
	mu      sync.Mutex
	max     int
	entries map[string]cacheEntry
	order   []string // keys in the order they were put
}

type cacheEntry struct {
	results []searchResult
	expires time.Time
}

func newResultCache(max int) *resultCache {
	return &resultCache{max: max, entries: make(map[string]cacheEntry)}
}

// get returns key's results if they have not expired at now.
func (c *resultCache) get(key string, now time.Time) ([]searchResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !now.Before(e.expires) {
		return nil, false
	}
	return e.results, true
}

// put keeps results under key until expires, dropping the oldest entries beyond max.
func (c *resultCache) put(key string, results []searchResult, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok {
		c.order = append(c.order, key)
	}
	c.entries[key] = cacheEntry{results: results, expires: expires}
	for len(c.order) > c.max {
		// A key put again keeps its first place in order: it goes a little early, never late.
		delete(c.entries, c.order[0])
		c.order = c.order[1:]
	}
}
