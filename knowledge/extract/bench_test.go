package extract_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"relaybot/internal/testkit/files"
	"relaybot/knowledge/extract"
)

// BenchmarkMarkdown reads and chunks a 2 MB Markdown handbook (400 sections of ten paragraphs).
func BenchmarkMarkdown(b *testing.B) {
	var md strings.Builder
	for s := range 400 {
		fmt.Fprintf(&md, "## Section %d\n\n", s)
		if s%4 == 0 {
			fmt.Fprintf(&md, "### Detail %d\n\n", s)
		}
		for p := range 10 {
			for range 8 {
				fmt.Fprintf(&md, "Paragraph %d of section %d says one plain thing about the bot. ", p, s)
			}
			md.WriteString("\n\n")
		}
	}
	data := []byte(md.String())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		doc, err := extract.Read(context.Background(), "handbook.md", bytes.NewReader(data), extract.Limits{}, extract.ChunkOptions{}, nil)
		if err != nil || len(doc.Chunks) < 400 {
			b.Fatalf("%d chunks, %v", len(doc.Chunks), err)
		}
	}
}

// BenchmarkPDF300Pages reads and chunks a 300-page PDF (40 lines a page) through the reader
// process, as an import does.
func BenchmarkPDF300Pages(b *testing.B) {
	pages := make([][]string, 300)
	for i := range pages {
		for j := range 40 {
			pages[i] = append(pages[i], fmt.Sprintf("Page %d line %d: the handbook goes on about the bot and its rules.", i+1, j+1))
		}
	}
	data := files.PDF(pages)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		doc, err := extract.Read(context.Background(), "handbook.pdf", bytes.NewReader(data), extract.Limits{}, extract.ChunkOptions{}, nil)
		if err != nil || doc.Pages != 300 {
			b.Fatalf("%d pages, %v", doc.Pages, err)
		}
	}
}
