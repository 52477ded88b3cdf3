package web

import (
	"net/http/httptest"
	"testing"
)

// twoReplicas serves two web chats, each made with the options opts returns (a replica's own
// relay, for one), as two replicas of one bot behind their own listeners, closed when the test
// ends.
func twoReplicas(t *testing.T, opts func() Options) [2]*httptest.Server {
	t.Helper()
	var srvs [2]*httptest.Server
	for i := range srvs {
		c, err := New(opts())
		if err != nil {
			t.Fatal(err)
		}
		srvs[i] = httptest.NewServer(c.Handler())
		t.Cleanup(func() {
			srvs[i].Close()
			c.Close()
		})
	}
	return srvs
}
