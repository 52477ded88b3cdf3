package audit_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"relaybot/audit"
)

// TestRecordJSONKeepsTheContractShape: the admin API and bot audit --json show a running call with
// finished_at null and every call's duration in milliseconds, and read back the same record.
func TestRecordJSONKeepsTheContractShape(t *testing.T) {
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		rec  audit.Record
		want []string
	}{
		{"running", audit.Record{ID: 1, ToolName: "fetch_url", Source: audit.SourceNative, Status: audit.StatusRunning, StartedAt: start},
			[]string{`"finished_at":null`, `"duration_ms":0`, `"status":"running"`, `"source":"native"`}},
		{"finished", audit.Record{ID: 2, ToolName: "search", Source: audit.SourceMCP, Server: "web", Status: audit.StatusTimeout,
			StartedAt: start, FinishedAt: start.Add(1500 * time.Millisecond), Duration: 1500 * time.Millisecond},
			[]string{`"finished_at":"2026-11-30T12:00:01.5Z"`, `"duration_ms":1500`, `"status":"timeout"`, `"server":"web"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.rec)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("JSON %s lacks %s", b, w)
				}
			}
			var back audit.Record
			if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, tc.rec) {
				t.Errorf("read back %+v (%v), want %+v", back, err, tc.rec)
			}
		})
	}
}

// TestStatusesSayWhichAreFailures: ok and running are not failures, every other listed status is,
// and a word that is not a status is neither valid nor a failure.
func TestStatusesSayWhichAreFailures(t *testing.T) {
	for _, s := range audit.Statuses {
		if !s.Valid() {
			t.Errorf("%s is listed but not valid", s)
		}
		if want := s != audit.StatusOK && s != audit.StatusRunning; s.Failed() != want {
			t.Errorf("%s.Failed() = %v, want %v", s, s.Failed(), want)
		}
	}
	if s := audit.Status("meh"); s.Valid() || s.Failed() {
		t.Errorf("an unknown status counts as valid %v or failed %v", s.Valid(), s.Failed())
	}
}
