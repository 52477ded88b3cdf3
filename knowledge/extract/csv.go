package extract

import (
	"context"
	"encoding/csv"
	"errors"
	"io"
	"path"
	"strings"
)

// csvBlocks cuts a CSV (or TSV) file into its rows, each a block never cut (a quoted field may
// hold line ends), the header row first: every chunk after the first repeats the header line,
// so its rows keep their column names. The separator is a tab for a .tsv file, else whichever
// of comma, semicolon and tab the first line has most of. A row the CSV reader cannot make
// sense of (a quote never closed) ends the parsing: the lines from there on are rows as they
// are.
func csvBlocks(ctx context.Context, name, text string) ([]block, error) {
	r := csv.NewReader(strings.NewReader(text))
	r.Comma = csvSeparator(name, text)
	r.FieldsPerRecord = -1
	r.LazyQuotes = true
	r.ReuseRecord = true
	var blocks []block
	prefix := ""
	add := func(a, b int) {
		s, e := trimSpan(text, a, b)
		if s == e {
			return
		}
		if prefix == "" {
			prefix = text[s:e]
		}
		blocks = append(blocks, block{start: s, end: e, atomic: true, prefix: prefix})
	}
	prev := 0
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		_, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			for prev < len(text) {
				end := strings.IndexByte(text[prev:], '\n')
				if end < 0 {
					end = len(text) - prev
				}
				add(prev, prev+end)
				prev += end + 1
			}
			break
		}
		off := int(r.InputOffset())
		add(prev, off)
		prev = off
	}
	// Every block holds the header line as its prefix, the header row's own block included.
	for i := range blocks {
		blocks[i].prefix = prefix
	}
	return blocks, nil
}

// csvSeparator returns a tab for a .tsv file, else the one of comma, semicolon and tab its first
// line has most of (a comma when none).
func csvSeparator(name, text string) rune {
	if strings.EqualFold(path.Ext(name), ".tsv") {
		return '\t'
	}
	line, _, _ := strings.Cut(text[:min(len(text), 64<<10)], "\n")
	best, sep := 0, ','
	for _, c := range []rune{',', ';', '\t'} {
		if n := strings.Count(line, string(c)); n > best {
			best, sep = n, c
		}
	}
	return sep
}
