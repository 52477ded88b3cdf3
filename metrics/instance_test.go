package metrics

import (
	"context"
	"net/http/httptest"
	"relaybot/pipeline"
	"strings"
	"testing"
)

// TestEverySeriesOfAReplicaCarriesItsInstance scrapes the metrics of a replica: every series,
// the runtime's included, names the replica, so two replicas' counters never add up as one.
func TestEverySeriesOfAReplicaCarriesItsInstance(t *testing.T) {
	m := New(Options{Instance: "replica-a"})
	m.CountQueue("pipeline", func() int { return 0 })
	m.TurnFinished(context.Background(), &pipeline.TurnFinish{Status: "ok"}, 0)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var series int
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		series++
		if !strings.Contains(line, `instance="replica-a"`) {
			t.Errorf("series without the replica's instance label: %s", line)
		}
	}
	if series == 0 {
		t.Fatal("the scrape shows no series")
	}
}
