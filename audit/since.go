package audit

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// maxAge bounds an age ParseSince reads: far more than any retention, small enough that adding it
// to a time cannot overflow.
const maxAge = 100 * 366 * 24 * time.Hour

// ParseSince reads a bound of an audit query as the CLI (--since, --until), the admin API and
// pages (since, until) and the audit_query tool take it: empty is no bound (the zero time); an
// RFC 3339 time; a minute as <input type=datetime-local> sends it (2006-01-02T15:04, UTC); a
// date (2006-01-02, UTC); or an age back from now, a Go duration ("90m", "24h") or whole days
// ("7d"). Spaces around the value are ignored; the time returned is in UTC.
func ParseSince(v string, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", time.DateOnly} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	d, ok := parseAge(v)
	if !ok {
		return time.Time{}, fmt.Errorf("%q is not a duration (90m, 24h, 7d) nor a time (RFC 3339, 2006-01-02)", v)
	}
	return now.Add(-d).UTC(), nil
}

// parseAge reads a Go duration or a whole number of days, neither negative nor above maxAge.
func parseAge(v string) (time.Duration, bool) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || time.Duration(n) > maxAge/(24*time.Hour) {
			return 0, false
		}
		return time.Duration(n) * 24 * time.Hour, true
	}
	d, err := time.ParseDuration(v)
	return d, err == nil && d >= 0 && d <= maxAge
}
