package admin

import (
	"net/netip"
	"sync"
	"time"
)

const (
	// freeFailures is how many wrong tokens an address may send before it has to wait.
	freeFailures = 3
	// backoffBase is the first wait; each further wrong token doubles it, up to backoffMax.
	backoffBase = time.Second
	backoffMax  = 15 * time.Minute
	// throttleForget is how long after its last wrong token an address starts afresh.
	throttleForget = time.Hour
	// maxThrottled caps the addresses remembered, so a spray from many addresses cannot grow the
	// map without bound; the one whose last failure is oldest goes first.
	maxThrottled = 10000
)

// throttle slows down token guessing per client address, on the login form and on Bearer auth
// alike: after freeFailures wrong tokens an address waits backoffBase, then twice as long after
// each further wrong token. Addresses are counted apart, so an attacker's failures never lock
// out the admin at another address; a right token clears its address's count.
type throttle struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[netip.Prefix]*throttled
}

type throttled struct {
	failures int
	last     time.Time // the latest wrong token
	until    time.Time // refused before this
}

func newThrottle(now func() time.Time) *throttle {
	return &throttle{now: now, m: map[netip.Prefix]*throttled{}}
}

// clientKey groups an address with its neighbours that one party controls: one IPv4 address, or
// the /64 an IPv6 host is given.
func clientKey(ip netip.Addr) netip.Prefix {
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	pfx, err := ip.Prefix(bits)
	if err != nil { // the zero Addr: a peer whose address could not be read
		return netip.Prefix{}
	}
	return pfx
}

// wait returns how long ip must still wait before its next token is checked; 0 means now.
func (t *throttle) wait(ip netip.Addr) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.m[clientKey(ip)]
	if e == nil {
		return 0
	}
	return max(0, e.until.Sub(t.now()))
}

// failed counts a wrong token from ip and returns how long ip must now wait.
func (t *throttle) failed(ip netip.Addr) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	key := clientKey(ip)
	e := t.m[key]
	if e != nil && now.Sub(e.last) > throttleForget {
		e = nil
	}
	if e == nil {
		t.makeRoom(now)
		e = &throttled{}
		t.m[key] = e
	}
	e.failures++
	e.last = now
	if n := e.failures - freeFailures; n > 0 {
		d := backoffMax
		if n <= 20 && backoffBase<<(n-1) < backoffMax {
			d = backoffBase << (n - 1)
		}
		e.until = now.Add(d)
	}
	return max(0, e.until.Sub(now))
}

// succeeded forgets ip's failures: the admin got the token right.
func (t *throttle) succeeded(ip netip.Addr) {
	t.mu.Lock()
	delete(t.m, clientKey(ip))
	t.mu.Unlock()
}

// makeRoom drops forgotten addresses, and the stalest one while the map is full. t.mu is held.
func (t *throttle) makeRoom(now time.Time) {
	if len(t.m) < maxThrottled {
		return
	}
	var stalest netip.Prefix
	var stalestAt time.Time
	for k, e := range t.m {
		if now.Sub(e.last) > throttleForget && !now.Before(e.until) {
			delete(t.m, k)
			continue
		}
		if stalestAt.IsZero() || e.last.Before(stalestAt) {
			stalest, stalestAt = k, e.last
		}
	}
	if len(t.m) >= maxThrottled {
		delete(t.m, stalest)
	}
}
