package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// unknownKeys is the error of the keys no setting has: one line a key, each with the known key
// it most likely misspells ("chat.queue_sise: unknown key; did you mean chat.queue_size?"). A
// key inside an unknown table is not named again: the table is.
func unknownKeys(und []toml.Key) error {
	tables := map[string]bool{}
	for _, k := range und {
		if len(k) > 1 {
			tables[k[:len(k)-1].String()] = true
		}
	}
	var errs []error
	for _, k := range und {
		if len(k) > 1 && slices.ContainsFunc(und, func(o toml.Key) bool { return o.String() == k[:len(k)-1].String() }) {
			continue
		}
		what, name := "key", k.String()
		if tables[k.String()] {
			what, name = "table", "["+k.String()+"]"
		}
		msg := fmt.Sprintf("%s: unknown %s", name, what)
		if s := suggest(k); s != "" {
			msg += "; did you mean " + s + "?"
		}
		errs = append(errs, errors.New(msg))
	}
	return errors.Join(errs...)
}

// suggest returns the known key k most likely stands for: the nearest name in k's own table,
// else the same name in another table; "" when none is near. A table is written "[chat]".
func suggest(k toml.Key) string {
	table, word := k[:len(k)-1], k[len(k)-1]
	if t, ok := tableType(reflect.TypeOf(Config{}), table); ok {
		if name, isTable := nearest(word, tomlFields(t)); name != "" {
			return render(append(slices.Clone(table), name), isTable)
		}
	}
	var elsewhere string
	walkKeys(reflect.TypeOf(Config{}), nil, func(path []string, isTable bool) {
		if elsewhere == "" && path[len(path)-1] == word && len(path) > 1 {
			elsewhere = render(path, isTable)
		}
	})
	return elsewhere
}

func render(path []string, isTable bool) string {
	if isTable {
		return "[" + strings.Join(path, ".") + "]"
	}
	return strings.Join(path, ".")
}

// nearest returns the field whose name is closest to word, and whether it is a table: within a
// few edits (a letter swapped, dropped or added, "-" for "_"), or holding every word of it
// ("max_rounds" → "max_tool_rounds", "timeout" → "timeout_sec").
func nearest(word string, fields map[string]reflect.Type) (string, bool) {
	best, bestD := "", 0
	for name := range fields {
		d := editDistance(word, name)
		if d > max(2, len(word)/4) && !holdsWords(name, word) {
			continue
		}
		if best == "" || d < bestD || d == bestD && name < best {
			best, bestD = name, d
		}
	}
	if best == "" {
		return "", false
	}
	return best, isTableType(fields[best])
}

// holdsWords reports whether every "_"-separated word of word is one of name's.
func holdsWords(name, word string) bool {
	have := strings.Split(name, "_")
	for _, w := range strings.FieldsFunc(word, func(r rune) bool { return r == '_' || r == '-' }) {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return word != ""
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// tomlFields returns the keys a table of type t holds (an embedded struct's keys stand in the
// table itself) with their types.
func tomlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			for k, v := range tomlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name := f.Tag.Get("toml"); name != "" && name != "-" && f.IsExported() {
			out[name] = f.Type
		}
	}
	return out
}

// tableType returns the struct type of the table at path ([[array]] tables by their entries).
func tableType(t reflect.Type, path []string) (reflect.Type, bool) {
	for _, seg := range path {
		f, ok := tomlFields(t)[seg]
		if !ok || !isTableType(f) {
			return nil, false
		}
		t = structOf(f)
	}
	return t, true
}

func isTableType(t reflect.Type) bool { return structOf(t).Kind() == reflect.Struct }

// structOf is t, or the element of a slice t.
func structOf(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Slice {
		return t.Elem()
	}
	return t
}

// walkKeys calls fn with the path of every key and table below t.
func walkKeys(t reflect.Type, path []string, fn func(path []string, isTable bool)) {
	fields := tomlFields(t)
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		p := append(slices.Clone(path), n)
		fn(p, isTableType(fields[n]))
		if isTableType(fields[n]) {
			walkKeys(structOf(fields[n]), p, fn)
		}
	}
}
