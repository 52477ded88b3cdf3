package quota

import (
	"testing"
	"time"
)

func TestRateLimiter(t *testing.T) {
	r := NewRateLimiter(3, time.Minute)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		if ok, _ := r.Allow("u", t0.Add(time.Duration(i)*time.Second)); !ok {
			t.Fatalf("message %d refused within the limit", i+1)
		}
	}
	ok, first := r.Allow("u", t0.Add(10*time.Second))
	if ok || !first {
		t.Fatalf("4th message: ok=%v first=%v, want refused and told", ok, first)
	}
	if ok, first = r.Allow("u", t0.Add(11*time.Second)); ok || first {
		t.Fatalf("5th message: ok=%v first=%v, want refused quietly", ok, first)
	}
	if ok, _ := r.Allow("other", t0.Add(11*time.Second)); !ok {
		t.Fatal("another user was limited by the first one's messages")
	}
	if ok, _ := r.Allow("u", t0.Add(61*time.Second)); !ok {
		t.Fatal("a new window still refused the user")
	}
	if ok, _ := NewRateLimiter(0, time.Minute).Allow("u", t0); !ok {
		t.Fatal("limit 0 must turn the limiter off")
	}
}
