package audit_test

import (
	"strings"
	"testing"
	"time"

	"relaybot/audit"
)

// TestParseSinceReadsEveryFormTheAuditReadersAccept: the CLI, the admin API and the audit_query
// tool accept the same ages and times, and refuse the same nonsense with a message that says what
// would do.
func TestParseSinceReadsEveryFormTheAuditReadersAccept(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	tests := []struct {
		in   string
		want time.Time // zero with bad: an error
		bad  bool
	}{
		{"", time.Time{}, false},
		{"   ", time.Time{}, false},
		{"24h", now.Add(-24 * time.Hour).UTC(), false},
		{" 90m ", now.Add(-90 * time.Minute).UTC(), false},
		{"7d", now.Add(-7 * 24 * time.Hour).UTC(), false},
		{"0d", now.UTC(), false},
		{"2026-12-01T08:30:00+02:00", time.Date(2026, 12, 1, 6, 30, 0, 0, time.UTC), false},
		{"2026-12-01T08:30", time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC), false},
		{"2026-12-01", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), false},
		{"yesterday", time.Time{}, true},
		{"-24h", time.Time{}, true},
		{"-1d", time.Time{}, true},
		{"1.5d", time.Time{}, true},
		{"d", time.Time{}, true},
		{"99999999999d", time.Time{}, true},
		{"2026-13-01", time.Time{}, true},
	}
	for _, tc := range tests {
		got, err := audit.ParseSince(tc.in, now)
		switch {
		case tc.bad && err == nil:
			t.Errorf("ParseSince(%q) = %v, want an error", tc.in, got)
		case tc.bad && !strings.Contains(err.Error(), "is not a duration (90m, 24h, 7d)"):
			t.Errorf("ParseSince(%q) error %q does not say what would do", tc.in, err)
		case !tc.bad && err != nil:
			t.Errorf("ParseSince(%q): %v", tc.in, err)
		case !tc.bad && !got.Equal(tc.want):
			t.Errorf("ParseSince(%q) = %v, want %v", tc.in, got, tc.want)
		case !tc.bad && !got.IsZero() && got.Location() != time.UTC:
			t.Errorf("ParseSince(%q) = %v, want it in UTC", tc.in, got)
		}
	}
}
