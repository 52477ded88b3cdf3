package config

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"
)

// A duration in config.toml is a time.Duration field whose key names its unit (turn_wait_sec,
// idle_reset_minutes, retention_days): a number there counts that unit, as the key always meant,
// and a string is a Go duration ("90s", "2h").

var durationType = reflect.TypeOf(time.Duration(0))

// keyUnit is the unit a duration key's name ends in.
func keyUnit(key string) (unit time.Duration, name string, ok bool) {
	for _, u := range []struct {
		suffix string
		unit   time.Duration
		name   string
	}{
		{"_sec", time.Second, "seconds"}, {"_seconds", time.Second, "seconds"},
		{"_minutes", time.Minute, "minutes"}, {"_days", 24 * time.Hour, "days"},
	} {
		if strings.HasSuffix(key, u.suffix) {
			return u.unit, u.name, true
		}
	}
	return 0, "", false
}

// scaleDurations sets every duration field of v that the file gave as a number (raw holds v's
// table as the file wrote it) to that many of its key's unit: the decoder read the number as
// nanoseconds. A number too large for a duration becomes the largest one, which validation
// refuses by its key.
func scaleDurations(v reflect.Value, raw map[string]any) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f, fv := t.Field(i), v.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			scaleDurations(fv, raw) // an embedded struct's keys stand in the table itself
			continue
		}
		name := f.Tag.Get("toml")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		switch {
		case f.Type == durationType:
			n, isNumber := raw[name].(int64)
			if unit, _, ok := keyUnit(name); ok && isNumber {
				fv.SetInt(int64(scale(n, unit)))
			}
		case f.Type.Kind() == reflect.Struct:
			if sub, ok := raw[name].(map[string]any); ok {
				scaleDurations(fv, sub)
			}
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			entries, _ := raw[name].([]map[string]any)
			for j := 0; j < fv.Len() && j < len(entries); j++ {
				scaleDurations(fv.Index(j), entries[j])
			}
		}
	}
}

// scale is n units, clamped to the durations there are.
func scale(n int64, unit time.Duration) time.Duration {
	switch {
	case n > math.MaxInt64/int64(unit):
		return math.MaxInt64
	case n < math.MinInt64/int64(unit):
		return math.MinInt64
	}
	return time.Duration(n) * unit
}

// inUnit renders d in the unit of key: a whole number of it ("60"), or the duration when it is
// not one ("1m30.5s").
func inUnit(key string, d time.Duration) string {
	unit, _, ok := keyUnit(key)
	if !ok || d%unit != 0 {
		return d.String()
	}
	return fmt.Sprint(int64(d / unit))
}

// durationBetween records a v outside lo..hi of key's unit (both included).
func (p *problems) durationBetween(key string, v time.Duration, lo, hi int64) {
	unit, _, _ := keyUnit(key)
	if v < scale(lo, unit) || v > scale(hi, unit) {
		p.bad(key, "must be between %d and %d, got %s", lo, hi, inUnit(key, v))
	}
}

// durationError says what a duration key takes, for a string that is no Go duration.
// got is the value as the decoder quotes it.
func durationError(key, got string) error {
	_, unit, ok := keyUnit(key)
	if !ok {
		return fmt.Errorf("%s: must be a duration like \"90s\" or \"2h\", got %s", key, got)
	}
	return fmt.Errorf("%s: must be a number of %s or a duration like \"90s\" or \"2h\", got %s", key, unit, got)
}

// Span is a duration key whose name has no unit ([tasks] min_every, misfire_grace): it is written
// as a Go duration string ("5m", "1h") and a bare number, which would name no unit, is refused.
type Span time.Duration

// UnmarshalText reads a Go duration string.
func (s *Span) UnmarshalText(b []byte) error {
	d, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q: write it as a Go duration such as \"5m\" or \"1h\"", b)
	}
	*s = Span(d)
	return nil
}

// MarshalText writes the Go duration string.
func (s Span) MarshalText() ([]byte, error) { return []byte(time.Duration(s).String()), nil }

// D is the span as a time.Duration.
func (s Span) D() time.Duration { return time.Duration(s) }
